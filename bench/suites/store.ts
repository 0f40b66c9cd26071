/**
 * Suite "store" (issue 36): what the PostgreSQL store costs a turn, and what a second instance buys.
 * Bridges are `bin/clawbridge.js serve` processes (the build in dist/), PostgreSQL is Debian's,
 * started for the run (testkit/postgres.ts: initdb in a temp dir, loopback, fsync off as in the
 * tests), each configuration on a fresh database.
 *
 * - **resume turns (CPU)**: the real Claude Code, warm, in resume mode against the instant fake
 *   Anthropic API (testkit/fakes): every turn reads and writes its conversation's binding and, on
 *   PostgreSQL, holds the conversation's advisory lock, writes the event log and the usage rows.
 *   CONVERSATIONS conversations of TURNS turns, two at a time; turn 1 of each starts the CLI and is
 *   not counted. Figures: the bridges' own CPU per later turn (/proc user + system of the bridge
 *   processes, not the CLIs'), and turns per second. SQLite, PostgreSQL with one instance, and two
 *   instances (each conversation stays on one, as a load balancer's affinity keeps it).
 * - **upstream-bound turns (throughput)**: an `openai` backend whose fake upstream takes
 *   UPSTREAM_MS per answer, `server.maxConcurrent` MAX_CONCURRENT per instance (what one instance
 *   may run at once: its subscription's or GPU's share), CLIENTS conversations sending turns back
 *   to back for SECONDS s. One instance is bound by its slots × the upstream's time; two instances
 *   have twice the slots.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { startFakeAnthropic } from "../../testkit/fakes/anthropic-api.js";
import { claudeEnv } from "../../testkit/fakes/cli-env.js";
import { startFakeOpenAI } from "../../testkit/fakes/openai-api.js";
import { openclawRequest, type OpenClawTurn } from "../../testkit/openclaw-request.js";
import { startPostgres, type TestPostgres } from "../../testkit/postgres.js";
import { cpuMs, type Service, startService } from "../procs.js";
import { ms, percentile, table } from "../stats.js";
import type { BenchContext, BenchSuite, SuiteResult, TargetCheck } from "../suite.js";

const CONVERSATIONS = 6;
const TURNS = 10;
const WARMUP_CONVERSATIONS = 2;
const UPSTREAM_MS = 200;
const MAX_CONCURRENT = 4;
const CLIENTS = 16;
const SECONDS = 8;
const CPU_RATIO_TARGET = 1.5;
const CHUNKS = ["The ", "stored ", "answer ", "comes ", "in ", "pieces."];

type Store = { kind: "sqlite" } | { kind: "postgres"; url: string };

interface Setup {
  label: string;
  store: "sqlite" | "postgres";
  instances: 1 | 2;
}
const SETUPS: Setup[] = [
  { label: "SQLite, 1 instance", store: "sqlite", instances: 1 },
  { label: "PostgreSQL, 1 instance", store: "postgres", instances: 1 },
  { label: "PostgreSQL, 2 instances", store: "postgres", instances: 2 },
];

/** One streamed answer; throws on an HTTP or stream error. */
async function ask(origin: string, body: unknown, headers: Record<string, string> = {}): Promise<string> {
  const res = await fetch(`${origin}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(120_000),
  });
  const raw = await res.text();
  if (res.status !== 200) throw new Error(`HTTP ${res.status}: ${raw.slice(0, 300)}`);
  let text = "";
  for (const line of raw.split("\n")) {
    if (!line.startsWith("data: ") || line === "data: [DONE]") continue;
    const obj = JSON.parse(line.slice(6)) as { choices?: Array<{ delta?: { content?: string } }>; error?: unknown };
    if (obj.error) throw new Error(`stream error: ${JSON.stringify(obj.error)}`);
    text += obj.choices?.[0]?.delta?.content ?? "";
  }
  if (!raw.includes("data: [DONE]")) throw new Error("no [DONE]");
  return text;
}

async function startBridges(
  ctx: BenchContext,
  base: string,
  name: string,
  n: number,
  config: (i: number) => Record<string, unknown>,
): Promise<Service[]> {
  const out: Service[] = [];
  for (let i = 0; i < n; i++) {
    const file = path.join(base, `${name}-${i}.json`);
    writeFileSync(file, JSON.stringify(config(i)));
    out.push(
      await startService({
        name: `clawbridge ${name} ${i}`,
        command: process.execPath,
        args: [path.join(ctx.root, "bin", "clawbridge.js"), "serve", "--config", file],
        cwd: ctx.root,
        env: { ...process.env, CLAWBRIDGE_CONFIG: "", CLAWBRIDGE_STORE_URL: undefined },
        readyPattern: /listening on (http:\/\/[^\s]+)/,
        timeoutMs: 60_000,
      }),
    );
  }
  return out;
}

const storeOf = async (s: Setup, pg: TestPostgres): Promise<Store> =>
  s.store === "sqlite" ? { kind: "sqlite" } : { kind: "postgres", url: await pg.database() };

interface Row {
  label: string;
  turns: number;
  seconds: number;
  cpuPerTurn: number;
  p50: number;
}

async function resumeTurns(ctx: BenchContext, base: string, pg: TestPostgres, s: Setup): Promise<Row> {
  const home = path.join(base, `home-${s.store}-${s.instances}`);
  mkdirSync(home, { recursive: true });
  const fake = await startFakeAnthropic(() => ({ kind: "text", chunks: CHUNKS }));
  const store = await storeOf(s, pg);
  const bridges = await startBridges(ctx, base, `resume-${s.store}-${s.instances}`, s.instances, (i) => ({
    server: { host: "127.0.0.1", port: 0 },
    logging: { level: "warn" },
    dataDir: path.join(base, `data-resume-${s.store}-${s.instances}-${i}`),
    intents: { enabled: false },
    store,
    backends: {
      claude: {
        type: "claude-code",
        command: path.join(ctx.root, "node_modules/.bin/claude"),
        env: claudeEnv({ baseUrl: fake.baseUrl, home }),
        timeoutSeconds: 120,
        killGraceSeconds: 1,
        warm: { enabled: true },
      },
    },
    models: [{ id: "claude/warm", backend: "claude", model: "default", session: { mode: "resume" } }],
  }));
  try {
    const done: number[] = [];
    let cpu = 0;
    let turns = 0;
    let wall = 0;
    /** A conversation on its instance: `turn(measured)` sends its next turn. */
    const conversation = (c: number) => {
      const origin = bridges[c % bridges.length]!.ready;
      const sessionId = `5e1c2a7e-${String(c).padStart(4, "0")}-4222-8333-${Date.now().toString(16).slice(-12).padStart(12, "0")}`;
      const history: OpenClawTurn[] = [];
      return async (measured: boolean) => {
        history.push({ role: "user", text: `question ${history.length / 2 + 1} of conversation ${c + 1}` });
        const at = performance.now();
        const text = await ask(origin, openclawRequest("claude/warm", history, "2026.9", { sessionId }));
        if (!text.includes("pieces")) throw new Error(`unexpected answer ${JSON.stringify(text)}`);
        if (measured) {
          done.push(performance.now() - at);
          turns++;
        }
        history.push({ role: "assistant", text });
      };
    };
    for (let c = 0; c < WARMUP_CONVERSATIONS; c++) {
      const turn = conversation(100 + c);
      for (let t = 0; t < TURNS; t++) await turn(false);
    }
    // Measured: two conversations at a time; the first turn of each (the CLI's start) outside the window.
    for (let c = 0; c < CONVERSATIONS; c += 2) {
      const pair = [conversation(c), conversation(c + 1)];
      await Promise.all(pair.map((turn) => turn(false)));
      const cpu0 = bridges.reduce((a, b) => a + cpuMs(b.pid), 0);
      const t0 = performance.now();
      await Promise.all(
        pair.map(async (turn) => {
          for (let t = 1; t < TURNS; t++) await turn(true);
        }),
      );
      wall += performance.now() - t0;
      cpu += bridges.reduce((a, b) => a + cpuMs(b.pid), 0) - cpu0;
    }
    ctx.log(`resume, ${s.label}: ${(cpu / turns).toFixed(2)} ms CPU per turn`);
    return { label: s.label, turns, seconds: wall / 1000, cpuPerTurn: cpu / turns, p50: percentile(done, 50) };
  } finally {
    await Promise.all(bridges.map((b) => b.stop(10_000)));
    await fake.close();
  }
}

async function upstreamBound(ctx: BenchContext, base: string, pg: TestPostgres, s: Setup): Promise<Row> {
  const fake = await startFakeOpenAI(() => ({ kind: "text", chunks: CHUNKS, firstDelayMs: UPSTREAM_MS }));
  const store = await storeOf(s, pg);
  const bridges = await startBridges(ctx, base, `upstream-${s.store}-${s.instances}`, s.instances, (i) => ({
    server: { host: "127.0.0.1", port: 0, maxConcurrent: MAX_CONCURRENT, maxQueue: 256, queueTimeoutSeconds: 60 },
    logging: { level: "warn" },
    dataDir: path.join(base, `data-upstream-${s.store}-${s.instances}-${i}`),
    intents: { enabled: false },
    store,
    backends: { up: { type: "openai", baseUrl: `${fake.url}/v1` } },
    models: [{ id: "m", backend: "up" }],
  }));
  try {
    const done: number[] = [];
    const client = async (c: number, until: number) => {
      const origin = bridges[c % bridges.length]!.ready;
      for (let t = 0; t < 10_000 && performance.now() < until; t++) {
        const at = performance.now();
        const text = await ask(
          origin,
          { model: "m", stream: true, messages: [{ role: "user", content: `turn ${t} of ${c}` }] },
          { "x-session-id": `bench-${c}` },
        );
        if (!text.includes("pieces")) throw new Error(`unexpected answer ${JSON.stringify(text)}`);
        done.push(performance.now() - at);
      }
    };
    // Warm-up: a second of the same load.
    const warmUntil = performance.now() + 1000;
    await Promise.all(Array.from({ length: CLIENTS }, (_, c) => client(c, warmUntil)));
    done.length = 0;
    const cpu0 = bridges.reduce((a, b) => a + cpuMs(b.pid), 0);
    const t0 = performance.now();
    await Promise.all(Array.from({ length: CLIENTS }, (_, c) => client(c, t0 + SECONDS * 1000)));
    const wall = performance.now() - t0;
    const cpu = bridges.reduce((a, b) => a + cpuMs(b.pid), 0) - cpu0;
    ctx.log(`upstream-bound, ${s.label}: ${(done.length / (wall / 1000)).toFixed(1)} turns/s`);
    return {
      label: s.label,
      turns: done.length,
      seconds: wall / 1000,
      cpuPerTurn: cpu / done.length,
      p50: percentile(done, 50),
    };
  } finally {
    await Promise.all(bridges.map((b) => b.stop(10_000)));
    await fake.close();
  }
}

const suite: BenchSuite = {
  name: "store",
  description:
    "SQLite vs PostgreSQL (1 and 2 instances): the bridges' CPU per resume turn (warm Claude Code), and turns/s when the upstream is the bottleneck",
  async run(ctx: BenchContext): Promise<SuiteResult> {
    const base = mkdtempSync(path.join(tmpdir(), "cb-bench-store-"));
    const pg = await startPostgres();
    try {
      const resume: Row[] = [];
      const bound: Row[] = [];
      for (const s of SETUPS) resume.push(await resumeTurns(ctx, base, pg, s));
      for (const s of SETUPS) bound.push(await upstreamBound(ctx, base, pg, s));
      const rate = (r: Row) => r.turns / r.seconds;
      const rows = (rs: Row[]) =>
        rs.map((r) => [r.label, String(r.turns), rate(r).toFixed(1), r.cpuPerTurn.toFixed(2), ms(r.p50)]);
      const header = ["store", "turns", "turns/s", "bridge CPU ms/turn", "turn p50"];
      const ratio = resume[1]!.cpuPerTurn / resume[0]!.cpuPerTurn;
      const targets: TargetCheck[] = [
        {
          name: "PostgreSQL CPU per resume turn vs SQLite",
          goal: `≤ ${CPU_RATIO_TARGET}×`,
          measured: `${ratio.toFixed(2)}× (${resume[1]!.cpuPerTurn.toFixed(2)} vs ${resume[0]!.cpuPerTurn.toFixed(2)} ms)`,
          pass: ratio <= CPU_RATIO_TARGET,
        },
        {
          name: "two instances vs one, upstream-bound",
          goal: "more turns/s",
          measured: `${rate(bound[2]!).toFixed(1)} vs ${rate(bound[1]!).toFixed(1)} turns/s`,
          pass: rate(bound[2]!) > rate(bound[1]!),
        },
      ];
      const markdown = [
        "## Resume turns: warm Claude Code, instant fake Anthropic API",
        "",
        `${CONVERSATIONS} conversations of ${TURNS} turns, two at a time, after ${WARMUP_CONVERSATIONS} not counted; turn 1 of each (the CLI's start) not counted. CPU: the bridge processes' own (/proc), not the CLIs'.`,
        "",
        table(header, rows(resume)),
        "",
        "## Upstream-bound turns: `openai` backend",
        "",
        `${CLIENTS} conversations sending streamed turns back to back for ${SECONDS} s; the fake upstream answers after ${UPSTREAM_MS} ms; \`server.maxConcurrent: ${MAX_CONCURRENT}\` per instance; each conversation stays on one instance.`,
        "",
        table(header, rows(bound)),
      ].join("\n");
      return { markdown, targets };
    } finally {
      await pg.stop();
      rmSync(base, { recursive: true, force: true });
    }
  },
};

export default suite;
