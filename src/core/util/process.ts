/**
 * Running one CLI turn as a child process: argument array (never a shell), prompt on stdin, its own
 * process group so that everything it started can be terminated together (SIGTERM, then SIGKILL),
 * and always reaped. Every live child is tracked so shutdown can end them all.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, rmSync } from "node:fs";
import { createInterface } from "node:readline";
import { newRunOwner, startTime, writeRunRecord, type RunOwner } from "./run-records.js";

export interface CliProcessOptions {
  command: string;
  args: string[];
  env: NodeJS.ProcessEnv;
  cwd?: string;
  /** Written to stdin, then stdin is closed (unless `keepStdin`). */
  stdin?: string;
  /** Keep stdin open for `write()` (a warm CLI reads its turns from it); `stdin` is then not used. */
  keepStdin?: boolean;
  /** Aborting terminates the process group. */
  signal?: AbortSignal;
  /** Wall-clock limit for the whole process; 0 = none. */
  timeoutMs?: number;
  /** Time between SIGTERM and SIGKILL. */
  killGraceMs?: number;
  /**
   * How long the pipes may stay open after the leader exited (held by something it started)
   * before the rest of the group is ended. Default 2000.
   */
  exitLingerMs?: number;
  /** What this process is, in words (the backend's CLI, a system's command), for the dashboard. */
  label?: string;
  /** A long-lived process serving many turns (src/backends/warm): listed as warm. */
  warm?: boolean;
  /** Set PWD to `cwd` (default true); false keeps `env` exactly as given (an MCP server's allow-list). */
  setPwd?: boolean;
}

export interface ProcessEnd {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** Why it ended: on its own, because the timeout fired, or because the caller aborted. */
  reason: "exit" | "timeout" | "aborted" | "spawn_error";
  /** Last part of stderr (for error messages). */
  stderr: string;
  spawnError?: Error;
}

const live = new Set<CliProcess>();

/**
 * Where running CLIs are recorded (one small file per process group, `run-records.ts`), so that
 * CLIs a bridge could not end itself — it was killed with SIGKILL — are ended by its orphan
 * watcher, or by the next bridge when it starts.
 */
let run: { dir: string; owner: RunOwner } | undefined;

/** Record every CLI started from now on under `dir`; returns the id its records carry (the watcher's). */
export function setRunDir(dir: string): string;
export function setRunDir(dir: undefined): undefined;
export function setRunDir(dir: string | undefined): string | undefined {
  if (!dir) {
    run = undefined;
    return undefined;
  }
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  run = { dir, owner: newRunOwner() };
  return run.owner.id;
}

/** The start-up reaper (`run-records.ts`), here with the rest of the process-group handling. */
export { reapOrphans } from "./run-records.js";

/** Processes still running (for health output and shutdown). */
export function liveProcessCount(): number {
  return live.size;
}

/** A running child as the dashboard lists it (`GET /v1/admin/processes`). */
export interface LiveProcessInfo {
  pid: number | undefined;
  command: string;
  label?: string;
  cwd?: string;
  /** Epoch milliseconds. */
  startedAt: number;
  /** A warm process, kept between turns (src/backends/warm). */
  warm?: boolean;
}

/** The processes still running, oldest first. */
export function liveProcesses(): LiveProcessInfo[] {
  return [...live].map((p) => p.info);
}

/** Terminate every running child (used on shutdown). */
export async function terminateAll(): Promise<void> {
  await Promise.all([...live].map((p) => p.terminate("aborted")));
}

const STDERR_KEEP = 8192;
/** After SIGKILL, how long a process outside the group (it left with setsid) may keep our pipes open. */
const PIPE_RELEASE_MS = 1000;

/**
 * How a CLI ends, whatever its leader did. The group is signalled even when the leader has already
 * exited: a child it left (`sleep 40 &`, a language server) is still in the group and may hold
 * stdout, so `close` would not come until it exits on its own. Stopping the group is: SIGTERM,
 * `killGraceMs` for everything to close, SIGKILL, and — should the pipes still be open because a
 * process that left the group holds them — stop reading them, so the turn always ends.
 */
export class CliProcess {
  readonly child: ChildProcess;
  private reason: ProcessEnd["reason"] = "exit";
  private stderrBuf = "";
  /** Characters of stderr seen so far (a warm process's turn takes the part after its mark). */
  private stderrCount = 0;
  private spawnError: Error | undefined;
  private readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** The process exited and its pipes closed (or it never started): nothing left to signal. */
  private closed = false;
  private timer: NodeJS.Timeout | undefined;
  private lingerTimer: NodeJS.Timeout | undefined;
  private terminating: Promise<void> | undefined;
  private stopping: Promise<void> | undefined;
  private readonly onAbort = () => void this.terminate("aborted");
  private readonly killGraceMs: number;
  /** The leader's kernel start time, to tell its pid apart from a later process that got it. */
  private readonly leaderStart: string | undefined;

  /** What it is and since when (`liveProcesses()`). */
  readonly info: LiveProcessInfo;

  constructor(opts: CliProcessOptions) {
    this.killGraceMs = opts.killGraceMs ?? 3000;
    this.child = spawn(opts.command, opts.args, {
      cwd: opts.cwd,
      // PWD follows cwd as a shell's `cd` would: some CLIs (opencode) take their project directory
      // from $PWD, and would otherwise work in the bridge's own directory.
      env: opts.cwd && opts.setPwd !== false ? { ...opts.env, PWD: opts.cwd } : opts.env,
      stdio: ["pipe", "pipe", "pipe"],
      detached: true, // own session and process group: kill(-pid) reaches the CLI's children too
      shell: false,
    });
    live.add(this);
    const pid = this.child.pid;
    this.info = {
      pid,
      command: opts.command,
      ...(opts.label ? { label: opts.label } : {}),
      ...(opts.cwd ? { cwd: opts.cwd } : {}),
      startedAt: Date.now(),
      ...(opts.warm ? { warm: true } : {}),
    };
    this.leaderStart = pid ? startTime(pid) : undefined;
    const record = run && pid ? writeRunRecord(run.dir, run.owner, pid, opts.command, this.leaderStart) : undefined;
    this.exited = new Promise((resolve) => {
      this.child.once("error", (err) => {
        this.spawnError = err;
        this.reason = "spawn_error";
        resolve({ code: null, signal: null });
      });
      this.child.once("close", (code, signal) => resolve({ code, signal }));
    });
    void this.exited.then(() => {
      this.closed = true;
      live.delete(this);
      if (record) rmSync(record, { force: true });
      if (this.timer) clearTimeout(this.timer);
      if (this.lingerTimer) clearTimeout(this.lingerTimer);
      opts.signal?.removeEventListener("abort", this.onAbort);
      // Leftover grandchildren in the group (a language server, a tool) must not outlive the turn.
      this.killGroup("SIGKILL");
    });
    // The leader exited but something it started still holds stdout or stderr open: the CLI has
    // finished its turn, so give the leftovers a moment, then end the group (reason stays "exit").
    const exitLingerMs = opts.exitLingerMs ?? 2000;
    this.child.once("exit", () => {
      if (this.closed) return;
      this.lingerTimer = setTimeout(() => void this.stopGroup(), exitLingerMs);
      this.lingerTimer.unref();
    });
    this.child.stderr?.setEncoding("utf8");
    this.child.stderr?.on("data", (d: string) => {
      this.stderrBuf = (this.stderrBuf + d).slice(-STDERR_KEEP);
      this.stderrCount += d.length;
    });
    this.child.stdin?.on("error", () => {
      /* the CLI may exit before reading all of stdin; the exit tells why */
    });
    if (opts.keepStdin) {
      /* kept open: write() */
    } else if (opts.stdin !== undefined) this.child.stdin?.end(opts.stdin);
    else this.child.stdin?.end();
    if (opts.timeoutMs && opts.timeoutMs > 0) {
      this.timer = setTimeout(() => void this.terminate("timeout"), opts.timeoutMs);
      this.timer.unref();
    }
    if (opts.signal) {
      if (opts.signal.aborted) queueMicrotask(this.onAbort);
      else opts.signal.addEventListener("abort", this.onAbort, { once: true });
    }
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  /** Characters written to stderr so far. */
  get stderrTotal(): number {
    return this.stderrCount;
  }

  /** stderr written after `mark` (a `stderrTotal` reading), within the kept tail. */
  stderrSince(mark: number): string {
    const n = this.stderrCount - mark;
    return n <= 0 ? "" : this.stderrBuf.slice(-n);
  }

  /** Whether the process is still running (not exited, not failed to start). */
  get running(): boolean {
    return (
      !this.closed && this.child.exitCode === null && this.child.signalCode === null && this.reason !== "spawn_error"
    );
  }

  /** Write to a kept-open stdin (`keepStdin`). False when the process can no longer take input. */
  write(data: string): boolean {
    const stdin = this.child.stdin;
    if (!stdin || stdin.destroyed || stdin.writableEnded || !this.running) return false;
    stdin.write(data);
    return true;
  }

  /** Close a kept-open stdin (a stream-json CLI ends after its current turn). */
  endInput(): void {
    this.child.stdin?.end();
  }

  /** stdout, line by line, until the process closes it. */
  async *lines(): AsyncGenerator<string> {
    const stdout = this.child.stdout;
    if (!stdout) return;
    const rl = createInterface({ input: stdout, crlfDelay: Infinity });
    // readline ends on the stream's end, not on its destruction (`stopGroup`'s last resort).
    const onClose = () => rl.close();
    stdout.once("close", onClose);
    try {
      for await (const line of rl) yield line;
    } finally {
      stdout.removeListener("close", onClose);
      rl.close();
    }
  }

  /** Wait for the process to exit and be reaped. */
  async wait(): Promise<ProcessEnd> {
    const { code, signal } = await this.exited;
    if (this.terminating) await this.terminating;
    return { code, signal, reason: this.reason, stderr: this.stderrBuf, spawnError: this.spawnError };
  }

  /**
   * End the whole process group — also when its leader has already exited — and resolve once the
   * process is reaped and its pipes are closed. Idempotent; nothing to do once it has closed.
   */
  terminate(reason: "timeout" | "aborted"): Promise<void> {
    if (this.terminating) return this.terminating;
    if (this.closed) return Promise.resolve();
    if (this.reason === "exit") this.reason = reason;
    this.terminating = this.stopGroup();
    return this.terminating;
  }

  /** SIGTERM the group, SIGKILL it after the grace period, then let go of the pipes if still held. */
  private stopGroup(): Promise<void> {
    this.stopping ??= (async () => {
      if (this.closed) return;
      this.killGroup("SIGTERM");
      if (await this.closedWithin(this.killGraceMs)) return;
      this.killGroup("SIGKILL");
      if (await this.closedWithin(PIPE_RELEASE_MS)) return;
      // Everything in the group is dead, yet a pipe is still open: held by a process that left
      // the group. Stop reading it (the rest of its output is not this turn's).
      this.child.stdout?.destroy();
      this.child.stderr?.destroy();
      await this.exited;
    })();
    return this.stopping;
  }

  private async closedWithin(ms: number): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    const closed = await Promise.race([
      this.exited.then(() => true),
      new Promise<false>((r) => {
        timer = setTimeout(() => r(false), ms);
      }),
    ]);
    if (timer) clearTimeout(timer);
    return closed;
  }

  private killGroup(sig: NodeJS.Signals): void {
    const pid = this.child.pid;
    if (!pid) return;
    if (this.child.exitCode !== null || this.child.signalCode !== null) {
      // The leader is gone. Its pid is not handed out again while anything is left in its group,
      // so a process holding that pid with another start time means our group has ended.
      const now = startTime(pid);
      if (now !== undefined && now !== this.leaderStart) return;
    }
    try {
      process.kill(-pid, sig);
    } catch {
      try {
        this.child.kill(sig);
      } catch {
        /* already gone */
      }
    }
  }
}

/** Resolve an executable name against PATH (no shell involved). */
export async function findOnPath(name: string, envPath = process.env.PATH ?? ""): Promise<string | undefined> {
  const { access, constants } = await import("node:fs/promises");
  const path = await import("node:path");
  const candidates = name.includes("/")
    ? [name]
    : envPath
        .split(path.delimiter)
        .filter(Boolean)
        .map((d) => path.join(d, name));
  for (const c of candidates) {
    try {
      await access(c, constants.X_OK);
      return path.resolve(c);
    } catch {
      /* next */
    }
  }
  return undefined;
}
