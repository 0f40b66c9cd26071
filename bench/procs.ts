/** Child processes for benchmarks: start, wait until ready, measure (/proc), stop and reap. */
import { spawn, execFileSync, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";

export interface Service {
  name: string;
  pid: number;
  child: ChildProcess;
  /** The capture of the ready pattern (e.g. the port). */
  ready: string;
  /** Everything the process wrote to stderr (bounded), for error messages. */
  stderr(): string;
  /** SIGTERM, then SIGKILL after `graceMs`; resolves once the process is reaped. */
  stop(graceMs?: number): Promise<number | null>;
}

const live = new Set<Service>();

/** Stop every service still running (on errors and signals). */
export async function stopAll(): Promise<void> {
  await Promise.all([...live].map((s) => s.stop(2000)));
}

export interface StartOptions {
  name: string;
  command: string;
  args: string[];
  cwd: string;
  env?: NodeJS.ProcessEnv;
  /** A pattern on stdout or stderr that means "ready"; its first capture group is returned. */
  readyPattern: RegExp;
  timeoutMs?: number;
}

export function startService(opts: StartOptions): Promise<Service> {
  const child = spawn(opts.command, opts.args, {
    cwd: opts.cwd,
    env: opts.env ?? process.env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  let err = "";
  const MAX = 64 * 1024;
  let exited: Promise<number | null> | undefined;
  const exitPromise = () =>
    (exited ??= new Promise((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) resolve(child.exitCode);
      else child.once("exit", (code) => resolve(code));
    }));
  exitPromise();

  return new Promise((resolve, reject) => {
    let done = false;
    const timer = setTimeout(
      () =>
        finish(
          new Error(`${opts.name} did not start within ${opts.timeoutMs ?? 30_000} ms. stderr:\n${err.slice(-2000)}`),
        ),
      opts.timeoutMs ?? 30_000,
    );
    const service: Service = {
      name: opts.name,
      pid: child.pid ?? -1,
      child,
      ready: "",
      stderr: () => err,
      async stop(graceMs = 5000) {
        live.delete(service);
        if (child.exitCode === null && child.signalCode === null) {
          child.kill("SIGTERM");
          const killer = setTimeout(() => child.kill("SIGKILL"), graceMs);
          const code = await exitPromise();
          clearTimeout(killer);
          return code;
        }
        return exitPromise();
      },
    };
    const check = () => {
      if (done) return;
      const m = opts.readyPattern.exec(out) ?? opts.readyPattern.exec(err);
      if (m) {
        service.ready = m[1] ?? m[0];
        finish();
      }
    };
    const finish = (e?: Error) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      if (e) {
        void service.stop(1000).finally(() => reject(e));
      } else {
        live.add(service);
        resolve(service);
      }
    };
    child.stdout!.setEncoding("utf8").on("data", (c: string) => {
      if (out.length < MAX) out += c;
      check();
    });
    child.stderr!.setEncoding("utf8").on("data", (c: string) => {
      if (err.length < MAX) err += c;
      check();
    });
    child.once("error", (e) => finish(new Error(`${opts.name} could not be started: ${e.message}`)));
    child.once("exit", (code, sig) =>
      finish(new Error(`${opts.name} exited (${code ?? sig}) before it was ready. stderr:\n${err.slice(-2000)}`)),
    );
  });
}

export interface Memory {
  rssKb: number;
  hwmKb: number;
}

/** VmRSS and VmHWM of a process (kB), from /proc/<pid>/status. */
export function memory(pid: number): Memory {
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8");
    const get = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+)\\s+kB`, "m").exec(status)?.[1] ?? NaN);
    return { rssKb: get("VmRSS"), hwmKb: get("VmHWM") };
  } catch {
    return { rssKb: NaN, hwmKb: NaN };
  }
}

let clockTicks: number | undefined;
function ticksPerSecond(): number {
  if (clockTicks === undefined) {
    try {
      clockTicks = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;
    } catch {
      clockTicks = 100;
    }
  }
  return clockTicks;
}

/** User and system CPU time a process has used so far, in ms (from /proc/<pid>/stat). */
export function cpuSplit(pid: number): { user: number; sys: number } {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // Fields after the command name (which may contain spaces) start after the last ')'.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const tick = 1000 / ticksPerSecond();
    return { user: Number(fields[11]) * tick, sys: Number(fields[12]) * tick };
  } catch {
    return { user: NaN, sys: NaN };
  }
}

/** User+system CPU time a process has used so far, in ms. */
export function cpuMs(pid: number): number {
  const c = cpuSplit(pid);
  return c.user + c.sys;
}
