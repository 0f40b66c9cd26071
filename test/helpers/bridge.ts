/** Start a real clawbridge in-process (real server, real backends) on an ephemeral loopback port. */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { resolveConfig } from "../../src/core/config/load.js";
import { createLogger } from "../../src/core/log/logger.js";
import { startBridge, type Bridge, type StartOptions } from "../../src/request/http/start.js";

export function tempDir(prefix = "cb-test-"): string {
  return mkdtempSync(path.join(tmpdir(), prefix));
}

export interface TestBridge extends Bridge {
  baseURL: string;
  dataDir: string;
}

/** `raw` is config data as a user would write it (dataDir and port filled in). */
export async function startTestBridge(raw: Record<string, any>, opts: StartOptions = {}): Promise<TestBridge> {
  const dataDir = raw.dataDir ?? tempDir("cb-data-");
  // Listing a backend's models spawns its CLI at every start (`opencode models`: ~2 s of CPU): off
  // unless a test configures it (test/unit/model-catalog.test.ts, models-discovery.test.ts).
  const backends = Object.fromEntries(
    Object.entries((raw.backends ?? {}) as Record<string, Record<string, unknown>>).map(([name, b]) => [
      name,
      b && typeof b === "object" && !("discovery" in b) ? { ...b, discovery: { enabled: false } } : b,
    ]),
  );
  raw = raw.backends ? { ...raw, backends } : raw;
  // Standby CLI processes (src/backends/warm/pool.ts) would start one more CLI after every
  // backend's first warm turn: none unless a test asks (test/integration/warm-standby.test.ts).
  // The memory budget (default: 40% of the machine's memory) would make a test's outcome depend on
  // the machine it runs on (a third warm CLI running cold on a small CI runner): a budget no test
  // reaches unless it sets its own (test/integration/warm-standby.test.ts).
  raw = { ...raw, warm: { standby: 0, maxMemoryMB: 1_000_000, ...(raw.warm ?? {}) } };
  // Probing the backends in the background runs every CLI's `--version` at start-up (processes a
  // test would see, a hanging fake CLI hangs on it): off unless a test configures it (the dashboard's tests).
  // Tool pre-execution would reach the internet: off unless a test configures it (with local fakes).
  const cfg = resolveConfig(
    {
      intents: { enabled: false },
      ...raw,
      dataDir,
      server: { port: 0, backendProbes: { enabled: false }, ...(raw.server ?? {}) },
    },
    "test",
  );
  const logger = opts.logger ?? createLogger(process.env.CB_TEST_LOG ?? "silent");
  const bridge = await startBridge(cfg, { ...opts, logger });
  return Object.assign(bridge, { baseURL: `${bridge.url}/v1`, dataDir });
}

export function cleanup(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
}

/** PIDs of processes whose environment contains `needle` (e.g. HOME=<a test's private home>). */
export function pidsWithEnv(needle: string): number[] {
  const out: number[] = [];
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d) || Number(d) === process.pid) continue;
    try {
      const env = readFileSync(`/proc/${d}/environ`, "utf8");
      if (env.split("\0").includes(needle)) out.push(Number(d));
    } catch {
      /* gone or not ours */
    }
  }
  return out;
}

/** Poll `check` every 50 ms until it is true or `ms` passed; returns the last result. */
export async function eventually(check: () => boolean | Promise<boolean>, ms = 10_000): Promise<boolean> {
  const end = Date.now() + ms;
  for (let i = 0; i < 10_000 && Date.now() < end; i++) {
    if (await check()) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return check();
}

/** `p`, or a failure after `ms` (a hang fails fast instead of at the test's timeout). */
export async function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      p,
      new Promise<never>(
        (_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms)),
      ),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** Read a raw SSE response into its `data:` payloads (strings), bounded. */
export async function readSse(res: Response, maxFrames = 10_000): Promise<{ frames: string[]; raw: string }> {
  const text = await res.text();
  const frames: string[] = [];
  for (const block of text.split("\n\n")) {
    if (frames.length >= maxFrames) break;
    const data = block
      .split("\n")
      .filter((l) => l.startsWith("data:"))
      .map((l) => l.slice(5).trimStart())
      .join("\n");
    if (data) frames.push(data);
  }
  return { frames, raw: text };
}
