/**
 * The stdio side of the `mcp` kind: `ChildStdioTransport`, an MCP client transport over a child
 * process started in its own process group, with the SDK's framing (`ReadBuffer`,
 * `serializeMessage`), the last part of its stderr kept, and a close that always ends and reaps it
 * (stdin closed, then SIGTERM and SIGKILL to the group). Also the exact environment a stdio server
 * gets (`serverEnv`): PATH, HOME, the names its `env` lists that are set, and its `setEnv`. The SDK's
 * own StdioClientTransport always adds HOME, LOGNAME, PATH, SHELL, TERM and USER and does not start
 * the server in its own process group, hence this one.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { ReadBuffer, serializeMessage } from "@modelcontextprotocol/sdk/shared/stdio.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { startTime } from "../../../core/util/run-records.js";
import type { McpServer } from "../schema.js";

/** How much of a stdio server's stderr is kept for error messages. */
const STDERR_KEEP = 2048;
/** After stdin is closed, how long a stdio server may take to exit on its own (normal end / after an abort). */
const STDIN_GRACE_MS = 1000;
const STDIN_GRACE_ABORTED_MS = 100;
/** Between SIGTERM and SIGKILL of the server's process group. */
const TERM_GRACE_MS = 2000;
/** After SIGKILL, how long the pipes may stay open (held by a process that left the group) before we let go of them. */
const PIPE_RELEASE_MS = 1000;
/** Once the server's leader exited, how long something it started may keep its stdout open. */
const EXIT_LINGER_MS = 2000;

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
