/**
 * The `mcp` kind: call one tool of an MCP server, over stdio (a child process the bridge starts
 * for the call) or Streamable HTTP. Each attempt connects, calls, and always disconnects: a stdio
 * server is stopped (stdin closed, then SIGTERM and SIGKILL to its process group) and reaped before
 * the attempt ends, whatever happened.
 *
 * A stdio server sees only PATH and HOME of the bridge's environment, the names its `env` lists
 * (when set) and its `setEnv`. The SDK's own StdioClientTransport always adds HOME, LOGNAME, PATH,
 * SHELL, TERM and USER and does not start the server in its own process group, so the child is
 * started here (`ChildStdioTransport`) with the SDK's framing (`ReadBuffer`, `serializeMessage`).
 *
 * The tool's arguments are `arguments` rendered with `renderValue` (a string that is exactly one
 * reference keeps its type), or the run's inputs as they are. Text content is streamed to the run's
 * output as it arrives; the step's output is the tool's `structuredContent` when it gives one, else
 * its text. `describeMcpTool` is the start-up look-up for `inputs: fromTool` and `sideEffects`.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport, StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ReadBuffer, serializeMessage } from "@modelcontextprotocol/sdk/shared/stdio.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import {
  ErrorCode,
  McpError,
  type CallToolResult,
  type JSONRPCMessage,
  type Tool,
} from "@modelcontextprotocol/sdk/types.js";
import { onAbort, type Abortable } from "../../../core/util/cancel.js";
import { startTime } from "../../../core/util/run-records.js";
import { ExecError, type Executor } from "../step-executor.js";
import type { McpRun, McpServer } from "../schema.js";
import { renderValue } from "../template.js";
import { VERSION } from "../../../core/version.js";

/** How much of a stdio server's stderr is kept for error messages. */
const STDERR_KEEP = 2048;
/** `tools/list` pages read at most (a server that keeps handing out cursors is cut off). */
const MAX_TOOL_PAGES = 50;
/** Tool names quoted in an "unknown tool" message at most. */
const MAX_NAMES_SHOWN = 30;
/** After stdin is closed, how long a stdio server may take to exit on its own (normal end / after an abort). */
const STDIN_GRACE_MS = 1000;
const STDIN_GRACE_ABORTED_MS = 100;
/** Between SIGTERM and SIGKILL of the server's process group. */
const TERM_GRACE_MS = 2000;
/** After SIGKILL, how long the pipes may stay open (held by a process that left the group) before we let go of them. */
const PIPE_RELEASE_MS = 1000;
/** Once the server's leader exited, how long something it started may keep its stdout open. */
const EXIT_LINGER_MS = 2000;
/** Bound on the DELETE that ends an HTTP session (normal end / after an abort). */
const HTTP_CLOSE_MS = 1000;
const HTTP_CLOSE_ABORTED_MS = 300;

export interface McpToolInfo {
  inputSchema: Record<string, unknown>;
  description?: string;
  /** The tool's `destructiveHint` annotation, when it gives one. */
  destructive?: boolean;
  /** The tool's `readOnlyHint` annotation, when it gives one. */
  readOnly?: boolean;
}

/**
 * One attempt's deadline and cancellation as a single AbortSignal for the SDK. `reason` says which
 * fired first. A fresh controller per attempt, because the SDK never removes the "abort" listener
 * it adds to a request's signal.
 */
class Deadline {
  private readonly ctl = new AbortController();
  reason: "timeout" | "cancelled" | undefined;
  private readonly timer: NodeJS.Timeout;
  private readonly off: () => void;
  private readonly end: number;

  constructor(
    readonly ms: number,
    parent?: Abortable,
  ) {
    this.end = Date.now() + ms;
    this.timer = setTimeout(() => this.stop("timeout"), ms);
    this.timer.unref();
    this.off = parent ? onAbort(parent, () => this.stop("cancelled")) : () => {};
  }

  get signal(): AbortSignal {
    return this.ctl.signal;
  }

  /** Time left, for the SDK's own request timer (ours fires first; its timer is only a backstop). */
  remaining(): number {
    return Math.max(1, this.end - Date.now()) + 1000;
  }

  private stop(reason: "timeout" | "cancelled"): void {
    if (this.reason) return;
    this.reason = reason;
    this.ctl.abort(new Error(reason === "timeout" ? `timed out after ${this.ms} ms` : "cancelled"));
  }

  dispose(): void {
    clearTimeout(this.timer);
    this.off();
  }
}

/** The environment a stdio server gets: PATH, HOME, the listed names that are set, `setEnv`. */
export function serverEnv(
  server: Extract<McpServer, { transport: "stdio" }>,
  from: NodeJS.ProcessEnv = process.env,
): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of ["PATH", "HOME", ...server.env]) {
    const v = from[name];
    if (v !== undefined) env[name] = v;
  }
  return { ...env, ...server.setEnv };
}

/**
 * An MCP stdio client transport over a child process in its own process group, with an exact
 * environment, the last part of its stderr kept, and a close that always ends and reaps it.
 */
export class ChildStdioTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  /** Shorten the wait for a clean exit (the attempt was aborted: get it over with). */
  hurry = false;
  spawnError: Error | undefined;
  private child: ChildProcess | undefined;
  private readonly buffer = new ReadBuffer();
  private stderrTail = "";
  private leaderStart: string | undefined;
  private exit: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  private closedPromise: Promise<void> | undefined;
  private stopping: Promise<void> | undefined;
  private lingerTimer: NodeJS.Timeout | undefined;

  constructor(private readonly opts: { command: string; args: string[]; env: Record<string, string>; cwd?: string }) {}

  /** The server's pid (its process group id), once started. */
  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** The last 2 KB the server wrote to stderr. */
  get stderr(): string {
    return this.stderrTail;
  }

  /** How the server exited, once it has. */
  get exitStatus(): { code: number | null; signal: NodeJS.Signals | null } | undefined {
    return this.exit;
  }

  start(): Promise<void> {
    if (this.child) throw new Error("ChildStdioTransport already started");
    return new Promise((resolve, reject) => {
      const child = spawn(this.opts.command, this.opts.args, {
        cwd: this.opts.cwd,
        env: this.opts.env,
        stdio: ["pipe", "pipe", "pipe"],
        detached: true, // own process group: whatever the server starts is stopped with it
        shell: false,
      });
      this.child = child;
      let started = false;
      this.closedPromise = new Promise<void>((closed) => {
        child.once("close", (code, signal) => {
          this.exit ??= { code, signal };
          if (this.lingerTimer) clearTimeout(this.lingerTimer);
          // Leftovers in the group (helpers the server started) must not outlive it.
          this.killGroup("SIGKILL");
          closed();
          this.onclose?.();
        });
      });
      child.once("error", (err) => {
        if (!started) {
          this.spawnError = err;
          this.exit = { code: null, signal: null };
          reject(err);
        } else this.onerror?.(err);
      });
      child.once("spawn", () => {
        started = true;
        this.leaderStart = child.pid ? startTime(child.pid) : undefined;
        resolve();
      });
      child.once("exit", (code, signal) => {
        this.exit = { code, signal };
        // Something it started still holds stdout: give it a moment, then stop reading.
        this.lingerTimer = setTimeout(() => void this.stop(0), EXIT_LINGER_MS);
        this.lingerTimer.unref();
      });
      child.stdout!.on("data", (chunk: Buffer) => {
        try {
          this.buffer.append(chunk);
        } catch (err) {
          this.onerror?.(err as Error);
          void this.stop(0);
          return;
        }
        for (let i = 0; i < 100_000; i++) {
          let msg: JSONRPCMessage | null;
          try {
            msg = this.buffer.readMessage();
          } catch (err) {
            this.onerror?.(err as Error);
            continue;
          }
          if (msg === null) break;
          this.onmessage?.(msg);
        }
      });
      child.stderr!.setEncoding("utf8");
      child.stderr!.on("data", (d: string) => {
        this.stderrTail = (this.stderrTail + d).slice(-STDERR_KEEP);
      });
      for (const s of [child.stdin!, child.stdout!, child.stderr!]) s.on("error", (err: Error) => this.onerror?.(err));
    });
  }

  send(message: JSONRPCMessage): Promise<void> {
    const stdin = this.child?.stdin;
    if (!stdin?.writable || this.exit) return Promise.reject(new Error("the MCP server is not running"));
    return new Promise((resolve) => {
      if (stdin.write(serializeMessage(message))) resolve();
      else stdin.once("drain", resolve);
    });
  }

  /** Stop the server and wait until it is reaped (idempotent). */
  close(): Promise<void> {
    return this.stop(this.hurry ? STDIN_GRACE_ABORTED_MS : STDIN_GRACE_MS);
  }

  /** Close stdin, wait `graceMs`, SIGTERM the group, wait, SIGKILL it, and let go of the pipes if still held. */
  private stop(graceMs: number): Promise<void> {
    const child = this.child;
    if (!child || !this.closedPromise || this.spawnError) return Promise.resolve();
    const closed = this.closedPromise;
    this.stopping ??= (async () => {
      try {
        child.stdin?.end();
      } catch {
        /* already closed */
      }
      if (await settles(closed, graceMs)) return;
      if (!this.exit) {
        this.killGroup("SIGTERM");
        if (await settles(closed, TERM_GRACE_MS)) return;
      }
      this.killGroup("SIGKILL");
      if (await settles(closed, PIPE_RELEASE_MS)) return;
      // Everything in the group is dead, yet a pipe is open: held by a process that left the group.
      child.stdout?.destroy();
      child.stderr?.destroy();
      child.stdin?.destroy();
      await settles(closed, PIPE_RELEASE_MS);
    })();
    return this.stopping;
  }

  private killGroup(sig: NodeJS.Signals): void {
    const child = this.child;
    const pid = child?.pid;
    if (!child || !pid) return;
    if (child.exitCode !== null || child.signalCode !== null) {
      // The leader is gone: a process now holding its pid with another start time means our group has ended.
      const now = startTime(pid);
      if (now !== undefined && now !== this.leaderStart) return;
    }
    try {
      process.kill(-pid, sig);
    } catch {
      try {
        child.kill(sig);
      } catch {
        /* already gone */
      }
    }
  }
}

/** Resolves true when `p` settles within `ms`, else false. */
async function settles(p: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      p.then(
        () => true,
        () => true,
      ),
      new Promise<false>((r) => (timer = setTimeout(() => r(false), ms))),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

interface Connection {
  client: Client;
  transport: ChildStdioTransport | StreamableHTTPClientTransport;
  close(): Promise<void>;
}

/** How a server is named in messages: no headers, environment, credentials or query (they may hold secrets). */
function describeServer(server: McpServer): string {
  if (server.transport === "stdio") return `MCP server "${server.command}"`;
  try {
    const u = new URL(server.url);
    return `MCP server ${u.origin}${u.pathname}`;
  } catch {
    return "MCP server (invalid URL)";
  }
}

function stderrNote(t: ChildStdioTransport): string {
  const tail = t.stderr.trim();
  return tail ? `; its stderr ends with: ${tail}` : "";
}

function exitNote(t: ChildStdioTransport): string {
  const e = t.exitStatus;
  if (!e) return "";
  return e.signal ? ` (killed by ${e.signal})` : e.code !== null ? ` (exit code ${e.code})` : "";
}

/** The reply of an HTTP server that refused: http_status (5xx and 429 may be retried). */
function httpStatusError(server: McpServer, err: StreamableHTTPError): ExecError {
  const status = err.code;
  if (status === undefined) return new ExecError("network", `${describeServer(server)}: ${err.message}`, true);
  return new ExecError(
    "http_status",
    `${describeServer(server)} answered HTTP ${status}: ${err.message}`,
    status >= 500 || status === 429,
  );
}

/**
 * Turn whatever the SDK threw into an ExecError. `phase` says whether the connection was up: a
 * stdio server that goes away before answering `initialize` could not be started.
 */
function classify(
  err: unknown,
  phase: "connect" | "call",
  server: McpServer,
  conn: { transport?: ChildStdioTransport | StreamableHTTPClientTransport },
  deadline: Deadline,
  what: string,
): ExecError {
  if (err instanceof ExecError) return err;
  if (deadline.reason === "cancelled") return new ExecError("cancelled", `${what} was cancelled`);
  if (deadline.reason === "timeout" || (err instanceof McpError && err.code === ErrorCode.RequestTimeout)) {
    return new ExecError("timeout", `${what} did not finish within ${deadline.ms / 1000}s`, true);
  }
  const message = err instanceof Error ? err.message : String(err);
  const t = conn.transport;
  if (t instanceof ChildStdioTransport) {
    if (t.spawnError) {
      return new ExecError(
        "spawn_failed",
        `cannot start ${describeServer(server)}: ${t.spawnError.message}${server.transport === "stdio" && server.cwd ? ` (cwd ${server.cwd})` : ""}`,
      );
    }
    const gone = t.exitStatus !== undefined || (err instanceof McpError && err.code === ErrorCode.ConnectionClosed);
    if (phase === "connect") {
      return new ExecError(
        "spawn_failed",
        `${describeServer(server)} ${gone ? `exited before it answered${exitNote(t)}` : `did not start properly: ${message}`}${stderrNote(t)}`,
      );
    }
    if (gone)
      return new ExecError(
        "tool_error",
        `${describeServer(server)} exited during the call to ${what}${exitNote(t)}${stderrNote(t)}`,
      );
  } else {
    if (err instanceof StreamableHTTPError) return httpStatusError(server, err);
    if (err instanceof McpError && err.code === ErrorCode.ConnectionClosed) {
      return new ExecError(
        "network",
        `${describeServer(server)} closed the connection${phase === "call" ? ` during the call to ${what}` : ""}`,
        true,
      );
    }
    if (!(err instanceof McpError)) {
      const cause = (err as { cause?: { message?: string; code?: string } }).cause;
      const detail = cause?.code ?? cause?.message;
      return new ExecError(
        "network",
        `cannot reach ${describeServer(server)}: ${message}${detail && detail !== message ? ` (${detail})` : ""}`,
        true,
      );
    }
  }
  if (phase === "connect")
    return new ExecError("bad_reply", `${describeServer(server)} failed to initialise: ${message}`);
  return new ExecError(err instanceof McpError ? "tool_error" : "bad_reply", `${what} failed: ${message}`);
}

/** Connect a client to `server`; on any failure everything started is stopped before the ExecError is thrown. */
async function connect(
  server: McpServer,
  deadline: Deadline,
  what: string,
  onError: (err: Error) => void,
): Promise<Connection> {
  const client = new Client({ name: "clawbridge", version: VERSION }, { capabilities: {} });
  client.onerror = onError;
  let transport: ChildStdioTransport | StreamableHTTPClientTransport;
  if (server.transport === "stdio") {
    transport = new ChildStdioTransport({
      command: server.command,
      args: server.args,
      env: serverEnv(server),
      ...(server.cwd ? { cwd: server.cwd } : {}),
    });
  } else {
    let url: URL;
    try {
      url = new URL(server.url);
    } catch {
      throw new ExecError("invalid", `${describeServer(server)}: the URL does not parse`);
    }
    transport = new StreamableHTTPClientTransport(url, { requestInit: { headers: server.headers } });
  }
  const close = async (): Promise<void> => {
    if (transport instanceof ChildStdioTransport) transport.hurry = deadline.reason !== undefined;
    else if (transport.sessionId) {
      // End the session on the server (DELETE), bounded. After a timeout or a cancel this is also
      // what stops the tool's work there: the server aborts a closed session's handlers.
      await settles(transport.terminateSession(), deadline.reason ? HTTP_CLOSE_ABORTED_MS : HTTP_CLOSE_MS);
    }
    try {
      await client.close();
    } catch {
      /* closing is best effort; the stdio transport has reaped its child either way */
    }
    if (transport instanceof ChildStdioTransport) await transport.close();
  };
  try {
    await client.connect(transport, { signal: deadline.signal, timeout: deadline.remaining() });
  } catch (err) {
    await close();
    throw classify(err, "connect", server, { transport }, deadline, what);
  }
  return { client, transport, close };
}

/** Every tool of a connected server (pagination followed, bounded). */
async function listAllTools(client: Client, deadline: Deadline): Promise<Tool[]> {
  const tools: Tool[] = [];
  const seen = new Set<string>();
  let cursor: string | undefined;
  for (let page = 0; page < MAX_TOOL_PAGES; page++) {
    const res = await client.listTools(cursor ? { cursor } : undefined, {
      signal: deadline.signal,
      timeout: deadline.remaining(),
    });
    tools.push(...res.tools);
    cursor = res.nextCursor;
    if (!cursor || seen.has(cursor)) break;
    seen.add(cursor);
  }
  return tools;
}

function noSuchTool(tool: string, tools: Tool[]): string {
  const names = tools.map((t) => t.name);
  const shown =
    names.slice(0, MAX_NAMES_SHOWN).join(", ") + (names.length > MAX_NAMES_SHOWN ? `, … (${names.length} in all)` : "");
  return `MCP server has no tool ${tool} (it has: ${shown || "no tools"})`;
}

/** The text blocks of a result, and its other blocks. */
function split(result: CallToolResult): { texts: string[]; other: unknown[] } {
  const texts: string[] = [];
  const other: unknown[] = [];
  for (const block of result.content ?? []) {
    if (block.type === "text") texts.push(block.text);
    else other.push(block);
  }
  return { texts, other };
}

export const runMcp: Executor<McpRun> = async (spec, ctx) => {
  const what = `MCP tool ${spec.tool}`;
  if (ctx.cancel.aborted) throw new ExecError("cancelled", `${what} was cancelled`);
  const args = spec.arguments !== undefined ? renderValue(spec.arguments, ctx.scope) : ctx.scope.inputs;
  const deadline = new Deadline(spec.timeoutSeconds * 1000, ctx.cancel);
  const log = ctx.log.child({ mcp: spec.server.transport, tool: spec.tool });
  let conn: Connection | undefined;
  try {
    conn = await connect(spec.server, deadline, what, (err) => log.debug({ err: err.message }, "mcp transport error"));
    if (conn.transport instanceof ChildStdioTransport) log.debug({ pid: conn.transport.pid }, "mcp server started");
    const client = conn.client;
    // A failed call may mean the tool does not exist (servers answer that either as a protocol
    // error or as an isError result): then say so, with the tools it has.
    const unknownTool = async (): Promise<ExecError | undefined> => {
      if (deadline.reason) return undefined;
      try {
        const tools = await listAllTools(client, deadline);
        return tools.some((t) => t.name === spec.tool)
          ? undefined
          : new ExecError("tool_error", noSuchTool(spec.tool, tools));
      } catch {
        return undefined; // keep the original error
      }
    };
    let result: CallToolResult;
    try {
      result = (await client.callTool({ name: spec.tool, arguments: args as Record<string, unknown> }, undefined, {
        signal: deadline.signal,
        timeout: deadline.remaining(),
      })) as CallToolResult;
    } catch (err) {
      const e = classify(err, "call", spec.server, conn, deadline, what);
      throw (e.code === "tool_error" && err instanceof McpError && (await unknownTool())) || e;
    }
    const { texts, other } = split(result);
    const text = texts.join("\n");
    if (result.isError) {
      throw (
        (await unknownTool()) ??
        new ExecError("tool_error", text || (other.length ? JSON.stringify(other) : `${what} reported an error`))
      );
    }
    texts.forEach((t, i) => ctx.output(i === 0 ? t : "\n" + t));
    if (result.structuredContent !== undefined) return { output: result.structuredContent };
    if (texts.length === 0 && other.length > 0) return { output: other };
    return { output: text };
  } finally {
    deadline.dispose();
    if (conn) {
      await conn.close();
      if (conn.transport instanceof ChildStdioTransport)
        log.debug({ pid: conn.transport.pid, exit: conn.transport.exitStatus }, "mcp server stopped");
    }
  }
};

/**
 * A tool's input schema and annotations, read from the server (`tools/list`, pagination followed).
 * Throws an Error naming the server's tools when it has no such tool, and an ExecError when the
 * server cannot be reached or does not answer within `timeoutMs`.
 */
export async function describeMcpTool(
  server: McpServer,
  tool: string,
  opts: { timeoutMs: number; signal?: AbortSignal },
): Promise<McpToolInfo> {
  const what = `listing the tools of ${describeServer(server)}`;
  const deadline = new Deadline(opts.timeoutMs, opts.signal);
  let conn: Connection | undefined;
  try {
    if (opts.signal?.aborted) throw new ExecError("cancelled", `${what} was cancelled`);
    conn = await connect(server, deadline, what, () => {});
    let tools: Tool[];
    try {
      tools = await listAllTools(conn.client, deadline);
    } catch (err) {
      throw classify(err, "call", server, conn, deadline, what);
    }
    const found = tools.find((t) => t.name === tool);
    if (!found) throw new Error(noSuchTool(tool, tools));
    const info: McpToolInfo = { inputSchema: found.inputSchema as Record<string, unknown> };
    if (found.description !== undefined) info.description = found.description;
    if (typeof found.annotations?.destructiveHint === "boolean") info.destructive = found.annotations.destructiveHint;
    if (typeof found.annotations?.readOnlyHint === "boolean") info.readOnly = found.annotations.readOnlyHint;
    return info;
  } finally {
    deadline.dispose();
    await conn?.close();
  }
}
