/**
 * Driving the REAL OpenClaw from tests: a private HOME with a minimal openclaw.json, its CLI run
 * with the generation's own Node, the gateway as a foreground child process, and small probes
 * (ports, processes). Only 127.0.0.1; every process is bounded in time and reaped.
 */
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import net from "node:net";
import path from "node:path";
import type { OpenClawInstall } from "./setup.js";

/** Environment for openclaw processes: nothing of the developer's own (keys, providers, channels). */
export function openclawEnv(install: OpenClawInstall, home: string): NodeJS.ProcessEnv {
  const tmp = path.join(home, "tmp");
  mkdirSync(tmp, { recursive: true });
  return {
    HOME: home,
    TMPDIR: tmp,
    PATH: `${path.dirname(install.node)}${path.delimiter}${process.env.PATH ?? "/usr/bin:/bin"}`,
    LANG: "C.UTF-8",
    TZ: "UTC",
    NO_COLOR: "1",
    FORCE_COLOR: "0",
    // One process (no self-respawn), nothing that reaches out or listens beyond the gateway port.
    OPENCLAW_NO_RESPAWN: "1",
    OPENCLAW_NO_AUTO_UPDATE: "1",
    OPENCLAW_DISABLE_BONJOUR: "1",
    OPENCLAW_SKIP_CHANNELS: "1",
    OPENCLAW_SKIP_GMAIL_WATCHER: "1",
    OPENCLAW_SKIP_BROWSER_CONTROL_SERVER: "1",
    OPENCLAW_SKIP_CANVAS_HOST: "1",
    OPENCLAW_SKIP_STARTUP_MODEL_PREWARM: "1",
    OPENCLAW_SKIP_CRON: "1",
  };
}

export function stripAnsi(s: string): string {
  return s.replace(/\x1b\[[0-9;?]*[A-Za-z]/g, "");
}

export interface RunResult {
  code: number | null;
  signal: string | null;
  stdout: string;
  stderr: string;
  ms: number;
}

/** `openclaw <args>` with the generation's Node; resolves (never rejects) when it ends or times out. */
export function runOpenClaw(install: OpenClawInstall, env: NodeJS.ProcessEnv, args: string[], timeoutMs = 180_000): Promise<RunResult> {
  const t0 = Date.now();
  return new Promise((resolve) => {
    execFile(
      install.node,
      [install.openclawMjs, ...args],
      { env, timeout: timeoutMs, killSignal: "SIGKILL", maxBuffer: 32 * 1024 * 1024, cwd: env.HOME },
      (err, stdout, stderr) => {
        const e = err as (Error & { code?: number | string; signal?: string }) | null;
        resolve({
          code: e ? (typeof e.code === "number" ? e.code : null) : 0,
          signal: e?.signal ?? null,
          stdout: String(stdout),
          stderr: stripAnsi(String(stderr)),
          ms: Date.now() - t0,
        });
      },
    ).stdin?.end();
  });
}

/** The JSON document an `openclaw ... --json` command printed (logs around it are ignored). */
export function parseJsonOutput(stdout: string): any {
  const s = stdout.trim();
  try {
    return JSON.parse(s);
  } catch {
    const start = s.indexOf("{");
    const end = s.lastIndexOf("}");
    if (start < 0 || end < start) throw new Error(`no JSON in output: ${s.slice(0, 500)}`);
    return JSON.parse(s.slice(start, end + 1));
  }
}

export interface AgentReply {
  texts: string[];
  text: string;
  sessionId?: string;
  raw: any;
}

/** Reply of `openclaw agent ... --json` (gateway form `{result:{payloads,meta}}` or local `{payloads,meta}`). */
export function agentReply(stdout: string): AgentReply {
  const raw = parseJsonOutput(stdout);
  const r = raw?.result ?? raw;
  const texts: string[] = Array.isArray(r?.payloads) ? r.payloads.map((p: any) => (typeof p?.text === "string" ? p.text : "")).filter(Boolean) : [];
  return { texts, text: texts.join("\n"), sessionId: r?.meta?.agentMeta?.sessionId, raw };
}

/** A free loopback port (closed again at once; good enough for a test). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const port = (srv.address() as net.AddressInfo).port;
      srv.close(() => resolve(port));
    });
  });
}

/** Is something accepting connections on 127.0.0.1:port? */
export function portOpen(port: number, timeoutMs = 1000): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = net.connect({ host: "127.0.0.1", port });
    const done = (v: boolean) => {
      sock.destroy();
      resolve(v);
    };
    sock.setTimeout(timeoutMs, () => done(false));
    sock.once("connect", () => done(true));
    sock.once("error", () => done(false));
  });
}

/** Watches a port while something runs: was it ever open? */
export class PortWatcher {
  everOpen = false;
  private timer: NodeJS.Timeout;
  private busy = false;

  constructor(readonly port: number, everyMs = 150) {
    this.timer = setInterval(() => {
      if (this.busy) return;
      this.busy = true;
      void portOpen(port, 500).then((open) => {
        if (open) this.everOpen = true;
        this.busy = false;
      });
    }, everyMs);
  }

  async stop(): Promise<boolean> {
    clearInterval(this.timer);
    if (await portOpen(this.port, 500)) this.everOpen = true;
    return this.everOpen;
  }
}

const MAX_LOG = 8 * 1024 * 1024;

/** `openclaw gateway run` in the foreground as a child process (its own process group). */
export class Gateway {
  private log = "";
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;

  private constructor(readonly child: ChildProcess) {
    const add = (b: Buffer) => {
      this.log += stripAnsi(b.toString("utf8"));
      if (this.log.length > MAX_LOG) this.log = this.log.slice(-MAX_LOG / 2);
    };
    child.stdout?.on("data", add);
    child.stderr?.on("data", add);
    this.exited = new Promise((resolve) => child.once("exit", (code, signal) => resolve({ code, signal })));
  }

  static start(install: OpenClawInstall, env: NodeJS.ProcessEnv, port: number): Gateway {
    const child = spawn(install.node, [install.openclawMjs, "gateway", "run", "--port", String(port), "--bind", "loopback", "--allow-unconfigured"], {
      env,
      cwd: env.HOME,
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
    });
    return new Gateway(child);
  }

  get pid(): number {
    return this.child.pid ?? -1;
  }

  output(): string {
    return this.log;
  }

  /** Wait for the "[gateway] ready" line (or the process to end). */
  async ready(timeoutMs: number): Promise<boolean> {
    const end = Date.now() + timeoutMs;
    let exited = false;
    void this.exited.then(() => (exited = true));
    for (let i = 0; i < 100_000 && Date.now() < end && !exited; i++) {
      if (/\[gateway\] ready\s*$/m.test(this.log)) return true;
      await new Promise((r) => setTimeout(r, 200));
    }
    return /\[gateway\] ready\s*$/m.test(this.log);
  }

  /**
   * SIGTERM (a clean stop, as systemd or Ctrl-C would), wait; SIGKILL to the whole group only if it
   * did not end in time. Returns how it ended and whether it had to be killed.
   */
  async stop(timeoutMs: number): Promise<{ code: number | null; signal: NodeJS.Signals | null; killed: boolean }> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return { code: this.child.exitCode, signal: this.child.signalCode, killed: false };
    try {
      process.kill(this.pid, "SIGTERM");
    } catch {
      /* already gone */
    }
    let timer: NodeJS.Timeout | undefined;
    const r = await Promise.race([this.exited, new Promise<"timeout">((res) => (timer = setTimeout(() => res("timeout"), timeoutMs)))]);
    clearTimeout(timer);
    if (r !== "timeout") return { ...r, killed: false };
    try {
      process.kill(-this.pid, "SIGKILL");
    } catch {
      /* gone */
    }
    const after = await this.exited;
    return { ...after, killed: true };
  }

  /** Last resort in `after()`: the whole process group, no questions. */
  kill(): void {
    try {
      process.kill(-this.pid, "SIGKILL");
    } catch {
      /* gone */
    }
  }
}

/** Write JSON (pretty) creating folders. */
export function writeJson(file: string, value: unknown): void {
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, JSON.stringify(value, null, 2) + "\n");
}
