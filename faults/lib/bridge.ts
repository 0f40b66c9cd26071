/**
 * The bridge under test: the BUILT bridge as its own process (`node bin/clawbridge.js serve
 * --config <tmp>.yaml --port 0`, as bench/suites/openai.ts starts it), its config, the fake CLIs it
 * runs, and the server options this version of the bridge knows (read from its config schema, so
 * that the suite uses a body timeout or a connection cap only when the bridge has one).
 */
import { chmodSync, copyFileSync, mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { stringify } from "yaml";
import { entryFile } from "../../scripts/build-state.mjs";
import { startService, type Service } from "../../bench/procs.js";
import { serverSchema } from "../../src/core/config/schema.js";
import { ROOT, sleep } from "./util.js";

/** Which entry `bin/clawbridge.js` runs: the compiled build, or the sources through tsx (a stale build). */
export function bridgeEntry(): string {
  const e = entryFile(ROOT, "ops/commands/main");
  return e.endsWith(".ts") ? "src/ through tsx (dist/ is stale)" : "dist/ (compiled build)";
}

export interface Knob {
  key: string;
  /** Value to write for `seconds` seconds (the key's unit read from its name). */
  value(seconds: number): number;
}

/** Server options of this bridge version that the suite can use (undefined: not configurable). */
export interface ServerKnobs {
  keys: string[];
  /** Body / request / idle / header timeouts (every key that looks like one). */
  timeouts: Knob[];
  connectionCap: string | undefined;
  perConversationQueue: string | undefined;
}

function unitKnob(key: string): Knob | undefined {
  if (/Seconds$/.test(key)) return { key, value: (s) => s };
  if (/Ms$/.test(key)) return { key, value: (s) => Math.round(s * 1000) };
  return undefined;
}

export function serverKnobs(): ServerKnobs {
  const keys = Object.keys((serverSchema as unknown as { shape: Record<string, unknown> }).shape ?? {});
  const timeouts = keys
    .filter(
      (k) =>
        /timeout/i.test(k) &&
        /(body|idle|request|header|read|client|socket|keepalive)/i.test(k) &&
        !/queue|shutdown|heartbeat/i.test(k),
    )
    .map(unitKnob)
    .filter((k): k is Knob => k !== undefined);
  const connectionCap = keys.find((k) => /^max\w*connections?$/i.test(k) || /connections?(cap|limit)$/i.test(k));
  const perConversationQueue = keys.find((k) => /conversation/i.test(k) && /(queue|wait|turns|pending)/i.test(k));
  return { keys, timeouts, connectionCap, perConversationQueue };
}

export interface Workspace {
  tmp: string;
  /** Directory of the fake CLIs' bookkeeping (FAULTS_DIR). */
  faultsDir: string;
  /** Marker in the fake CLIs' environment (FAULTS_MARK). */
  mark: string;
  dataDir: string;
  opencodeBin: string;
  claudeBin: string;
}

/** A part's private folder: data dir, fake CLI bookkeeping, and executable copies of the fake CLIs. */
export function workspace(root: string, part: string, runMark: string): Workspace {
  const tmp = path.join(root, part);
  const faultsDir = path.join(tmp, "faults");
  const bin = path.join(tmp, "bin");
  for (const d of [tmp, faultsDir, bin, path.join(faultsDir, "keys"), path.join(faultsDir, "sessions")])
    mkdirSync(d, { recursive: true });
  const copy = (name: string, as: string) => {
    const to = path.join(bin, as);
    copyFileSync(path.join(ROOT, "testkit", "fakes", name), to);
    chmodSync(to, 0o755);
    return to;
  };
  return {
    tmp,
    faultsDir,
    mark: `${runMark}:${part}`,
    dataDir: path.join(tmp, "data"),
    opencodeBin: copy("fake-opencode-cli.sh", "opencode"),
    claudeBin: copy("fake-claude-cli.sh", "claude"),
  };
}

export function cliEnv(ws: Workspace): Record<string, string> {
  return { FAULTS_DIR: ws.faultsDir, FAULTS_MARK: ws.mark };
}

/** Write the bridge's YAML config (logging at error level, tool pre-execution off, `systems` when given) and return its path. */
export function writeConfig(
  ws: Workspace,
  name: string,
  cfg: { server: Record<string, unknown>; backends: Record<string, unknown>; models: unknown[]; systems?: unknown[] },
): string {
  const file = path.join(ws.tmp, `${name}.yaml`);
  writeFileSync(
    file,
    stringify({
      server: { host: "127.0.0.1", port: 0, ...cfg.server },
      logging: { level: "error" },
      dataDir: ws.dataDir,
      intents: { enabled: false },
      backends: cfg.backends,
      models: cfg.models,
      ...(cfg.systems ? { systems: cfg.systems } : {}),
    }),
  );
  return file;
}

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** Date.now() when it exited. */
  at: number;
}

/** One running bridge process. An exit the harness did not cause is a crash. */
export class BridgeProc {
  readonly exited: Promise<Exit>;
  exit: Exit | undefined;
  private expected = false;
  /** Set when the process exited without the harness asking. */
  crash: { code: number | null; signal: NodeJS.Signals | null; stderr: string } | undefined;

  constructor(
    readonly service: Service,
    readonly origin: string,
    readonly port: number,
    /** ms from spawn to "listening". */
    readonly startMs: number,
  ) {
    const child = service.child;
    this.exited = new Promise((resolve) => {
      const done = (code: number | null, signal: NodeJS.Signals | null) => {
        this.exit = { code, signal, at: Date.now() };
        if (!this.expected) this.crash = { code, signal, stderr: service.stderr().slice(-3000) };
        resolve(this.exit);
      };
      if (child.exitCode !== null || child.signalCode !== null) done(child.exitCode, child.signalCode);
      else child.once("exit", done);
    });
  }

  get pid(): number {
    return this.service.pid;
  }

  get alive(): boolean {
    return this.exit === undefined;
  }

  signal(sig: NodeJS.Signals): void {
    this.expected = true;
    try {
      process.kill(this.pid, sig);
    } catch {
      /* gone */
    }
  }

  /** SIGTERM, SIGKILL after `graceMs`; resolves once reaped. */
  async stop(graceMs = 5000): Promise<void> {
    this.expected = true;
    await this.service.stop(graceMs);
  }

  /** The bridge's /health (turn and process counts), or undefined when it does not answer. */
  async health(
    timeoutMs = 3000,
  ): Promise<{ turns?: { running?: number; waiting?: number; processes?: number } } | undefined> {
    try {
      const res = await fetch(`${this.origin}/health`, { signal: AbortSignal.timeout(timeoutMs) });
      return (await res.json()) as { turns?: { running?: number; waiting?: number; processes?: number } };
    } catch {
      return undefined;
    }
  }
}

/** Start `node bin/clawbridge.js serve --config <file> --port 0`; resolves when it listens. */
export async function startBridge(configFile: string, timeoutMs = 60_000): Promise<BridgeProc> {
  const t0 = Date.now();
  const service = await startService({
    name: "clawbridge",
    command: process.execPath,
    args: [path.join(ROOT, "bin", "clawbridge.js"), "serve", "--config", configFile, "--port", "0"],
    cwd: ROOT,
    readyPattern: /listening on (http:\/\/[^\s]+)/,
    timeoutMs,
  });
  const startMs = Date.now() - t0;
  const origin = service.ready;
  return new BridgeProc(service, origin, Number(new URL(origin).port), startMs);
}

/** Wait until the bridge reports no running turn and no CLI process (or `ms` passes). */
export async function quiet(bridge: BridgeProc, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  for (let i = 0; i < 10_000 && Date.now() < deadline; i++) {
    const h = await bridge.health(Math.max(100, Math.min(2000, deadline - Date.now())));
    if (h?.turns && !h.turns.running && !h.turns.waiting && !h.turns.processes) return true;
    await sleep(100);
  }
  return false;
}
