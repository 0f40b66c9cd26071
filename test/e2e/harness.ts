/**
 * Driving the REAL OpenClaw from tests: a private HOME with a minimal openclaw.json, its CLI run
 * with the generation's own Node, the gateway as a foreground child process, and small probes
 * (ports, processes). Only 127.0.0.1; every process is bounded in time and reaped.
 */
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import net from "node:net";
import path from "node:path";
import type { RecordedRequest, Reply } from "../../testkit/fakes/openai-api.js";
import { eventually, pidsWithEnv, tempDir } from "../helpers/bridge.js";
import { ensureOpenClaw, GENERATIONS, type Generation, type OpenClawInstall } from "./setup.js";

/**
 * A generation's OpenClaw (installed when missing) and a private HOME for it (a temporary folder
 * `cb-e2e-<name><gen>-…`) with its environment and an empty `workspace` folder.
 */
export async function openclawHome(
  gen: Generation,
  name: string,
): Promise<{ install: OpenClawInstall; home: string; env: NodeJS.ProcessEnv; workspace: string }> {
  const install = await ensureOpenClaw(gen);
  const home = tempDir(`cb-e2e-${name}${gen.gen.replace(".", "")}-`);
  const env = openclawEnv(install, home);
  const workspace = path.join(home, "workspace");
  mkdirSync(workspace, { recursive: true });
  return { install, home, env, workspace };
}

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

/**
 * The generations a file drives: the one CLAWBRIDGE_E2E_GEN names (e.g. 2026.5), or else all of them
 * (`byDefault: "all"`) or only the newest (`"newest"`, for long scenarios). Throws on an unknown name.
 */
export function selectedGenerations(byDefault: "all" | "newest" = "all"): Generation[] {
  const only = process.env.CLAWBRIDGE_E2E_GEN?.trim();
  const newest = [...GENERATIONS].sort((a, b) => a.gen.localeCompare(b.gen, undefined, { numeric: true })).at(-1)!;
  const selected = only
    ? GENERATIONS.filter((g) => g.gen === only)
    : byDefault === "newest"
      ? [newest]
      : [...GENERATIONS];
  if (!selected.length)
    throw new Error(`CLAWBRIDGE_E2E_GEN=${only}: known generations are ${GENERATIONS.map((g) => g.gen).join(", ")}`);
  return selected;
}

export interface RunResult {
  code: number | null;
  signal: string | null;
  stdout: string;
  stderr: string;
  ms: number;
}

/** `openclaw <args>` with the generation's Node; resolves (never rejects) when it ends or times out. */
export function runOpenClaw(
  install: OpenClawInstall,
  env: NodeJS.ProcessEnv,
  args: string[],
  timeoutMs = 180_000,
): Promise<RunResult> {
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

/**
 * One person's message in an OpenClaw session, sent to the running gateway (`startAgentGateway`),
 * whose agent runs it: `openclaw agent --agent main --session-key <key> --message <message> --json`
 * (150 s for the agent, 240 s in all). The CLI finds the gateway's port and token in openclaw.json.
 * A gateway loads OpenClaw's agent once: measured on 2026.9, a turn costs ~1.5 s and ~2.5 s of CPU
 * against ~13 s and ~18 s of CPU for `agent --local`, which loads it in a new process every turn.
 */
export function runAgent(
  install: OpenClawInstall,
  env: NodeJS.ProcessEnv,
  sessionKey: string,
  message: string,
): Promise<RunResult> {
  return runOpenClaw(
    install,
    env,
    ["agent", "--agent", "main", "--session-key", sessionKey, "--message", message, "--json", "--timeout", "150"],
    240_000,
  );
}

/**
 * A gateway for `runAgent`: adds a `gateway` section (a free loopback port, a token) to
 * `<home>/.openclaw/openclaw.json` (written before), starts `openclaw gateway run` and waits for it
 * to be ready; throws with its output when it is not within 240 s. For `after()`: `stop()` it, then
 * `reapHome(home)`.
 */
export async function startAgentGateway(
  install: OpenClawInstall,
  env: NodeJS.ProcessEnv,
  home: string,
): Promise<Gateway> {
  const file = path.join(home, ".openclaw", "openclaw.json");
  const port = await freePort();
  writeJson(file, {
    ...JSON.parse(readFileSync(file, "utf8")),
    gateway: { mode: "local", port, bind: "loopback", auth: { mode: "token", token: "e2e-agent-gateway-token-0123" } },
  });
  const gateway = Gateway.start(install, env, port);
  if (await gateway.ready(240_000)) return gateway;
  await gateway.stop(10_000);
  throw new Error(`the OpenClaw gateway on port ${port} was not ready in 240 s:\n${gateway.output().slice(-4000)}`);
}

/** A run's exit, time and the tails of its output, for failure messages. */
export function describeRun(r: RunResult): string {
  return `exit ${r.code}${r.signal ? ` (${r.signal})` : ""} after ${Math.round(r.ms / 1000)} s\n--- stdout ---\n${r.stdout.slice(-3000)}\n--- stderr ---\n${r.stderr.slice(-3000)}`;
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
  const texts: string[] = Array.isArray(r?.payloads)
    ? r.payloads.map((p: any) => (typeof p?.text === "string" ? p.text : "")).filter(Boolean)
    : [];
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
    // A connection to itself (the kernel picked the very port as the source port) is not a listener.
    sock.once("connect", () => done(sock.localPort !== port));
    sock.once("error", () => done(false));
  });
}

/** Whether a clawbridge answers on the port (its `server` header), not just anything listening there. */
export async function bridgeAnswers(port: number, timeoutMs = 1000): Promise<boolean> {
  if (!(await portOpen(port, timeoutMs))) return false;
  try {
    const res = await fetch(`http://127.0.0.1:${port}/health`, { signal: AbortSignal.timeout(timeoutMs) });
    await res.body?.cancel();
    return (res.headers.get("server") ?? "").startsWith("clawbridge");
  } catch {
    return false;
  }
}

/**
 * Watches a port while something runs: did a bridge ever answer there? (Only a clawbridge counts:
 * the port came from the ephemeral range, and another test's server may be handed the same number.)
 */
export class PortWatcher {
  everOpen = false;
  private timer: NodeJS.Timeout;
  private busy = false;

  constructor(
    readonly port: number,
    everyMs = 150,
  ) {
    this.timer = setInterval(() => {
      if (this.busy) return;
      this.busy = true;
      void bridgeAnswers(port, 500).then((open) => {
        if (open) this.everOpen = true;
        this.busy = false;
      });
    }, everyMs);
  }

  async stop(): Promise<boolean> {
    clearInterval(this.timer);
    if (await bridgeAnswers(this.port, 500)) this.everOpen = true;
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
    const child = spawn(
      install.node,
      [install.openclawMjs, "gateway", "run", "--port", String(port), "--bind", "loopback", "--allow-unconfigured"],
      {
        env,
        cwd: env.HOME,
        detached: true,
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
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
    if (this.child.exitCode !== null || this.child.signalCode !== null)
      return { code: this.child.exitCode, signal: this.child.signalCode, killed: false };
    try {
      process.kill(this.pid, "SIGTERM");
    } catch {
      /* already gone */
    }
    let timer: NodeJS.Timeout | undefined;
    const r = await Promise.race([
      this.exited,
      new Promise<"timeout">((res) => (timer = setTimeout(() => res("timeout"), timeoutMs))),
    ]);
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

/** A model entry of an OpenClaw provider. */
export function openclawModel(id: string) {
  return { id, name: id, contextWindow: 200_000, maxTokens: 4096 };
}

/** An OpenClaw provider for an OpenAI-compatible endpoint (a clawbridge) serving `models`. */
export function openclawProvider(baseUrl: string, apiKey: string, models: string[]) {
  return { baseUrl, apiKey, api: "openai-completions", models: models.map(openclawModel) };
}

/**
 * Writes `<home>/.openclaw/openclaw.json`: the given providers (merged with OpenClaw's own), the
 * default model and workspace, and OpenClaw's file log inside `home` (it would go to the shared
 * /tmp/openclaw otherwise). Returns the file's path.
 */
export function writeOpenClawConfig(
  home: string,
  opts: { providers: Record<string, unknown>; primary: string; workspace: string },
): string {
  const file = path.join(home, ".openclaw", "openclaw.json");
  writeJson(file, {
    logging: { file: path.join(home, "openclaw.log") },
    models: { mode: "merge", providers: opts.providers },
    agents: { defaults: { model: { primary: opts.primary }, workspace: opts.workspace } },
  });
  return file;
}

/** The openclaw.json for one clawbridge (provider `clawbridge`) whose `model` is OpenClaw's default model. */
export function openclawConfigForBridge(
  home: string,
  opts: { baseURL: string; apiKey: string; model: string; workspace: string },
): string {
  return writeOpenClawConfig(home, {
    providers: { clawbridge: openclawProvider(opts.baseURL, opts.apiKey, [opts.model]) },
    primary: `clawbridge/${opts.model}`,
    workspace: opts.workspace,
  });
}

/**
 * For `after()`: waits (up to 15 s) for the processes running with HOME=<one of dirs> to end, then
 * SIGKILLs those left.
 */
export async function reapHome(...dirs: string[]): Promise<void> {
  const left = () => dirs.flatMap((dir) => pidsWithEnv(`HOME=${dir}`));
  const gone = await eventually(() => left().length === 0, 15_000);
  for (const pid of gone ? [] : left()) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      /* gone */
    }
  }
}

// ---- What the fake model APIs see of OpenClaw's requests ----

/** The text of a message's content (a string or an array of parts). */
export function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) return content.map((p: any) => (typeof p?.text === "string" ? p.text : "")).join("\n");
  return "";
}

/** The system text of a recorded request (its system and developer messages). */
export function systemText(req: RecordedRequest): string {
  const messages: any[] = req.body?.messages ?? [];
  return messages
    .filter((m) => m?.role === "system" || m?.role === "developer")
    .map((m) => textOf(m.content))
    .join("\n");
}

/**
 * What the router's classifier or the builder's Supervisor is asked about: the text after the last
 * "Message:" line of its user text (both prompts end that way; recent turns come before it).
 */
export function classifiedMessage(req: RecordedRequest): string {
  const u = req.lastUser;
  const i = u.lastIndexOf("Message:\n");
  return i < 0 ? "" : u.slice(i + "Message:\n".length).trim();
}

const INTERNAL = "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>";

/** The last user message a person wrote (2026.9 appends internal-context user messages). */
export function lastHumanText(messages: any[]): string {
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i];
    if (m?.role !== "user") continue;
    const t = textOf(m.content);
    if (!t.includes(INTERNAL)) return t;
  }
  return "";
}

/** The tool message after the person's message `human` in `messages`, if OpenClaw has sent one. */
export function toolResultAfter(messages: any[], human: string): any {
  const asked = messages.findLastIndex((m) => m?.role === "user" && textOf(m.content) === human);
  return messages.slice(asked + 1).find((m) => m?.role === "tool");
}

/** A call to OpenClaw's `read` tool for `file`, with the parameter name the request's `read` declares. */
export function readToolCall(req: RecordedRequest, id: string, file: string): Reply {
  const read = (req.body?.tools ?? []).find((t: any) => t?.function?.name === "read");
  const props = Object.keys(read?.function?.parameters?.properties ?? {});
  const param = props.includes("path") ? "path" : props.includes("file_path") ? "file_path" : (props[0] ?? "path");
  return { kind: "tool_calls", calls: [{ id, name: "read", arguments: { [param]: file } }] };
}
