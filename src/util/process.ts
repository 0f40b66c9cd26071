/**
 * Running one CLI turn as a child process: argument array (never a shell), prompt on stdin, its own
 * process group so that everything it started can be terminated together (SIGTERM, then SIGKILL),
 * and always reaped. Every live child is tracked so shutdown can end them all.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { createInterface } from "node:readline";

export interface CliProcessOptions {
  command: string;
  args: string[];
  env: NodeJS.ProcessEnv;
  cwd?: string;
  /** Written to stdin, then stdin is closed. */
  stdin?: string;
  /** Aborting terminates the process group. */
  signal?: AbortSignal;
  /** Wall-clock limit for the whole process; 0 = none. */
  timeoutMs?: number;
  /** Time between SIGTERM and SIGKILL. */
  killGraceMs?: number;
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
 * Where running CLIs are recorded (one small file per process group), so that a bridge that was
 * killed with SIGKILL — and so could not reap its children — can end them when it starts again.
 */
let runDir: string | undefined;

export function setRunDir(dir: string | undefined): void {
  runDir = dir;
  if (dir) mkdirSync(dir, { recursive: true, mode: 0o700 });
}

/** Kernel start time of a process (field 22 of /proc/<pid>/stat), to tell a reused PID apart. */
function startTime(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19];
  } catch {
    return undefined;
  }
}

/**
 * End the process groups a previous bridge left behind (recorded in the run directory and still
 * alive with the same start time). Returns how many groups were ended.
 */
export async function reapOrphans(dir: string, graceMs = 2000): Promise<number> {
  let names: string[];
  try {
    names = readdirSync(dir).filter((n) => n.endsWith(".json"));
  } catch {
    return 0;
  }
  let ended = 0;
  for (const name of names) {
    const file = path.join(dir, name);
    try {
      const rec = JSON.parse(readFileSync(file, "utf8")) as { pid: number; start?: string };
      if (Number.isInteger(rec.pid) && rec.pid > 1 && rec.start && startTime(rec.pid) === rec.start) {
        try {
          process.kill(-rec.pid, "SIGTERM");
        } catch {
          /* gone */
        }
        for (let i = 0; i < graceMs / 50 && startTime(rec.pid) === rec.start; i++) await new Promise((r) => setTimeout(r, 50));
        try {
          process.kill(-rec.pid, "SIGKILL");
        } catch {
          /* gone */
        }
        ended++;
      }
    } catch {
      /* unreadable record: just remove it */
    }
    rmSync(file, { force: true });
  }
  return ended;
}

/** Processes still running (for health output and shutdown). */
export function liveProcessCount(): number {
  return live.size;
}

/** Terminate every running child (used on shutdown). */
export async function terminateAll(): Promise<void> {
  await Promise.all([...live].map((p) => p.terminate("aborted")));
}

const STDERR_KEEP = 8192;

export class CliProcess {
  readonly child: ChildProcess;
  private reason: ProcessEnd["reason"] = "exit";
  private stderrBuf = "";
  private spawnError: Error | undefined;
  private readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  private timer: NodeJS.Timeout | undefined;
  private terminating: Promise<void> | undefined;
  private readonly onAbort = () => void this.terminate("aborted");
  private readonly killGraceMs: number;

  constructor(opts: CliProcessOptions) {
    this.killGraceMs = opts.killGraceMs ?? 3000;
    this.child = spawn(opts.command, opts.args, {
      cwd: opts.cwd,
      env: opts.env,
      stdio: ["pipe", "pipe", "pipe"],
      detached: true, // own process group: kill(-pid) reaches the CLI's children too
      shell: false,
    });
    live.add(this);
    const pid = this.child.pid;
    const record = runDir && pid ? path.join(runDir, `${pid}.json`) : undefined;
    if (record && pid) {
      try {
        writeFileSync(record, JSON.stringify({ pid, start: startTime(pid), command: path.basename(opts.command) }), { mode: 0o600 });
      } catch {
        /* bookkeeping only */
      }
    }
    this.exited = new Promise((resolve) => {
      this.child.once("error", (err) => {
        this.spawnError = err;
        this.reason = "spawn_error";
        resolve({ code: null, signal: null });
      });
      this.child.once("close", (code, signal) => resolve({ code, signal }));
    });
    void this.exited.then(() => {
      live.delete(this);
      if (record) rmSync(record, { force: true });
      if (this.timer) clearTimeout(this.timer);
      opts.signal?.removeEventListener("abort", this.onAbort);
      // Leftover grandchildren in the group (a language server, a tool) must not outlive the turn.
      this.killGroup("SIGKILL");
    });
    this.child.stderr?.setEncoding("utf8");
    this.child.stderr?.on("data", (d: string) => {
      this.stderrBuf = (this.stderrBuf + d).slice(-STDERR_KEEP);
    });
    this.child.stdin?.on("error", () => {
      /* the CLI may exit before reading all of stdin; the exit tells why */
    });
    if (opts.stdin !== undefined) this.child.stdin?.end(opts.stdin);
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

  /** stdout, line by line, until the process closes it. */
  async *lines(): AsyncGenerator<string> {
    const stdout = this.child.stdout;
    if (!stdout) return;
    const rl = createInterface({ input: stdout, crlfDelay: Infinity });
    try {
      for await (const line of rl) yield line;
    } finally {
      rl.close();
    }
  }

  /** Wait for the process to exit and be reaped. */
  async wait(): Promise<ProcessEnd> {
    const { code, signal } = await this.exited;
    if (this.terminating) await this.terminating;
    return { code, signal, reason: this.reason, stderr: this.stderrBuf, spawnError: this.spawnError };
  }

  /** SIGTERM the whole group, SIGKILL it after the grace period, resolve once reaped. Idempotent. */
  terminate(reason: "timeout" | "aborted"): Promise<void> {
    if (this.terminating) return this.terminating;
    if (this.reason === "exit") this.reason = reason;
    this.terminating = (async () => {
      if (this.child.exitCode !== null || this.child.signalCode !== null || this.spawnError) {
        await this.exited;
        return;
      }
      this.killGroup("SIGTERM");
      let graceTimer: NodeJS.Timeout | undefined;
      const killed = await Promise.race([
        this.exited.then(() => true),
        new Promise<false>((r) => {
          graceTimer = setTimeout(() => r(false), this.killGraceMs);
        }),
      ]);
      if (graceTimer) clearTimeout(graceTimer);
      if (!killed) this.killGroup("SIGKILL");
      await this.exited;
    })();
    return this.terminating;
  }

  private killGroup(sig: NodeJS.Signals): void {
    const pid = this.child.pid;
    if (!pid) return;
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
  const candidates = name.includes("/") ? [name] : envPath.split(path.delimiter).filter(Boolean).map((d) => path.join(d, name));
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
