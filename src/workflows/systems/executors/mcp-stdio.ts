/**
 * The stdio side of the `mcp` kind: `ChildStdioTransport`, an MCP client transport over a child
 * process run by the same process manager as the CLIs (`CliProcess`, src/core/util/process.ts): its
 * own process group, listed with the live processes, ended on shutdown, and recorded in the run
 * directory, so that a bridge killed with SIGKILL leaves no server behind (its orphan watcher ends
 * the group within about two seconds, the next bridge's start-up reaper at the latest — also a
 * server that ignores SIGTERM and a closed stdin). On top: the SDK's framing (`ReadBuffer`,
 * `serializeMessage`), the last part of its stderr kept, and a close that always ends and reaps it
 * (stdin closed, then SIGTERM and SIGKILL to the group). Also the exact environment a stdio server
 * gets (`childEnv`, command.ts): PATH, HOME, the names its `env` lists that are set, and its `setEnv` (no PWD
 * added). The SDK's own StdioClientTransport always adds HOME, LOGNAME, PATH, SHELL, TERM and USER
 * and does not start the server in its own process group, hence this one.
 */
import path from "node:path";
import { ReadBuffer, serializeMessage } from "@modelcontextprotocol/sdk/shared/stdio.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { CliProcess } from "../../../core/util/process.js";
import { startTime } from "../../../core/util/run-records.js";

/** How much of a stdio server's stderr is kept for error messages. */
const STDERR_KEEP = 2048;
/** After stdin is closed, how long a stdio server may take to exit on its own (normal end / after an abort). */
const STDIN_GRACE_MS = 1000;
const STDIN_GRACE_ABORTED_MS = 100;
/** Between SIGTERM and SIGKILL of the server's process group. */
const TERM_GRACE_MS = 2000;
/** Once the server's leader exited, how long something it started may keep its stdout open. */
const EXIT_LINGER_MS = 2000;

/** Which server process a call went to: its pid (= its process group) and kernel start time. */
export interface ServerIdentity {
  pid: number;
  start: string | undefined;
}

/**
 * An MCP stdio client transport over a `CliProcess` (own process group, run record, exact
 * environment), the last part of its stderr kept, and a close that always ends and reaps it.
 */
export class ChildStdioTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  /** Shorten the wait for a clean exit (the attempt was aborted: get it over with). */
  hurry = false;
  spawnError: Error | undefined;
  private proc: CliProcess | undefined;
  private readonly buffer = new ReadBuffer();
  private exit: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  private closedPromise: Promise<void> | undefined;
  private stopping: Promise<void> | undefined;

  constructor(private readonly opts: { command: string; args: string[]; env: Record<string, string>; cwd?: string }) {}

  /** The server's pid (its process group id), once started. */
  get pid(): number | undefined {
    return this.proc?.pid;
  }

  /** The server's pid and kernel start time, once started. */
  get identity(): ServerIdentity | undefined {
    const pid = this.proc?.pid;
    return pid ? { pid, start: startTime(pid) } : undefined;
  }

  /** The last 2 KB the server wrote to stderr. */
  get stderr(): string {
    return this.proc ? this.proc.stderrSince(0).slice(-STDERR_KEEP) : "";
  }

  /** How the server exited, once it has. */
  get exitStatus(): { code: number | null; signal: NodeJS.Signals | null } | undefined {
    return this.exit;
  }

  start(): Promise<void> {
    if (this.proc) throw new Error("ChildStdioTransport already started");
    return new Promise((resolve, reject) => {
      const proc = new CliProcess({
        command: this.opts.command,
        args: this.opts.args,
        env: this.opts.env,
        ...(this.opts.cwd ? { cwd: this.opts.cwd } : {}),
        setPwd: false, // the environment is exactly the allow-list
        keepStdin: true,
        killGraceMs: TERM_GRACE_MS,
        exitLingerMs: EXIT_LINGER_MS,
        label: `MCP server ${path.basename(this.opts.command)}`,
      });
      this.proc = proc;
      const child = proc.child;
      let started = false;
      this.closedPromise = proc.wait().then((end) => {
        this.exit ??= { code: end.code, signal: end.signal };
        this.onclose?.();
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
        resolve();
      });
      child.once("exit", (code, signal) => {
        this.exit = { code, signal };
      });
      child.stdout!.on("data", (chunk: Buffer) => {
        try {
          this.buffer.append(chunk);
        } catch (err) {
          this.onerror?.(err as Error);
          void proc.terminate("aborted");
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
      for (const s of [child.stdin!, child.stdout!, child.stderr!]) s.on("error", (err: Error) => this.onerror?.(err));
    });
  }

  send(message: JSONRPCMessage): Promise<void> {
    const stdin = this.proc?.child.stdin;
    if (!stdin?.writable || this.exit) return Promise.reject(new Error("the MCP server is not running"));
    return new Promise((resolve) => {
      if (stdin.write(serializeMessage(message))) resolve();
      else stdin.once("drain", resolve);
    });
  }

  /** Stop the server and wait until it is reaped (idempotent). */
  close(): Promise<void> {
    const proc = this.proc;
    const closed = this.closedPromise;
    if (!proc || !closed || this.spawnError) return Promise.resolve();
    const graceMs = this.hurry ? STDIN_GRACE_ABORTED_MS : STDIN_GRACE_MS;
    // Close stdin and give it `graceMs` to exit on its own; then SIGTERM the group, SIGKILL it
    // after TERM_GRACE_MS, and let go of the pipes should a process that left the group hold them.
    this.stopping ??= (async () => {
      try {
        proc.endInput();
      } catch {
        /* already closed */
      }
      if (await settles(closed, graceMs)) return;
      await proc.terminate("aborted");
      await closed;
    })();
    return this.stopping;
  }
}

/** Resolves true when `p` settles within `ms`, else false. */
export async function settles(p: Promise<unknown>, ms: number): Promise<boolean> {
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
