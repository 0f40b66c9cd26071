/**
 * Suite "opencode-turn": a warm OpenCode turn's first token, later turns of a conversation, through
 * the bridge (issue 34 item 5: within 100 ms). The bridge runs as its own process with two warm
 * OpenCode backends on one instant fake OpenAI API (testkit/fakes/openai-api.ts): one in session
 * mode `stateless` (the shared `opencode serve`, a new OpenCode session per turn — what the "warm"
 * suite measures) and one in `resume` (the conversation's own server, its session going on).
 *
 * Before and after in ONE run: with `OPENCODE_TURN_BASELINE=<git ref>`, a second bridge runs beside
 * this tree's: a copy of this tree whose OpenCode backend (src/backends/opencode) is that ref's, so
 * the two differ in nothing else. They take turns (which one goes first rotates every round), so
 * both see the same machine load.
 *
 *   OPENCODE_TURN_BASELINE=<ref> npm run bench -- --suite opencode-turn
 *
 * Each OpenCode server's first instance installs OpenCode's plugin package into its fresh config
 * directory (a background `npm install`, seconds of CPU, once per HOME); the suite waits for the
 * servers to be idle before it measures. Per bridge and mode, over CONVERSATIONS × TURNS: request →
 * first content chunk (turn 1, later turns), request → the model request reaching the fake (the
 * bridge's and OpenCode's share before the model), model request → first chunk, and the CPU of
 * the bridge and of its `opencode serve` processes per turn.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { startFakeOpenAI, type FakeOpenAI } from "../../testkit/fakes/openai-api.js";
import { opencodeEnv } from "../../testkit/fakes/opencode-env.js";
import { readChatStream } from "../chat-stream.js";
import { cpuMs, startService, type Service } from "../procs.js";
import { ms, percentile, table } from "../stats.js";
import type { BenchContext, BenchSuite, SuiteResult, TargetCheck } from "../suite.js";
import { buildState } from "../../scripts/build-state.mjs";

/** Conversations and turns per conversation (env OPENCODE_TURN_CONVERSATIONS / OPENCODE_TURN_TURNS). */
const CONVERSATIONS = envCount("OPENCODE_TURN_CONVERSATIONS", 8);
const TURNS = envCount("OPENCODE_TURN_TURNS", 6);
const TARGET_MS = 100;
/** Pause before each measured turn. */
const PAUSE_MS = 250;
const MODES = ["stateless", "resume"] as const;
type Mode = (typeof MODES)[number];
/** The reply the fake streams at once: several chunks. */
const CHUNKS = ["The ", "warm ", "answer ", "comes ", "in ", "pieces."];

function envCount(name: string, fallback: number): number {
  const n = Number(process.env[name]);
  return Number.isInteger(n) && n > 0 ? n : fallback;
}

interface Side {
  name: string;
  /** Repository root whose bin/clawbridge.js runs. */
  root: string;
  bridge?: Service;
  origin?: string;
  /** Compiled dist/ or the sources through tsx (bin/clawbridge.js picks). */
  runs?: string;
}

interface Sample {
  first: number;
  /** Request → the model request at the fake. */
  model: number;
  /** First chunk → end of the answer. */
  rest: number;
  bridgeCpu: number;
  serveCpu: number;
}

interface WarmEntry {
  backend: string;
  pid?: number;
}

/** The part of the tree the baseline takes from its ref: the OpenCode backend. */
const BACKEND_DIR = "src/backends/opencode";

/**
 * This tree (sources, scripts, settings; node_modules linked in) in a temporary directory, with
 * BACKEND_DIR as it is at `ref`, compiled as `npm run build` compiles (so both sides run compiled
 * JavaScript): the only difference between the two bridges is the OpenCode backend.
 */
function baselineTree(root: string, ref: string, base: string): string {
  const dir = path.join(base, "baseline");
  mkdirSync(dir, { recursive: true });
  for (const entry of ["bin", "scripts", "src", "package.json", "tsconfig.json", "tsconfig.build.json"])
    cpSync(path.join(root, entry), path.join(dir, entry), { recursive: true });
  symlinkSync(path.join(root, "node_modules"), path.join(dir, "node_modules"), "dir");
  rmSync(path.join(dir, BACKEND_DIR), { recursive: true, force: true });
  const tar = path.join(base, "baseline.tar");
  execFileSync("git", ["archive", "--format=tar", "-o", tar, ref, BACKEND_DIR], { cwd: root });
  execFileSync("tar", ["-xf", tar, "-C", dir]);
  rmSync(tar);
  // As scripts/build.mjs: a failed compile (another change in progress) leaves the sources to tsx.
  const built = spawnSync(
    process.execPath,
    [path.join(root, "node_modules", "typescript", "bin", "tsc"), "-p", "tsconfig.build.json"],
    { cwd: dir, stdio: "ignore" },
  );
  if (built.status === 0) writeFileSync(path.join(dir, "dist", ".build-stamp"), `${new Date().toISOString()}\n`);
  return dir;
}

function config(bin: string, home: string, fake: FakeOpenAI, dataDir: string): unknown {
  const backend = () => ({
    type: "opencode",
    command: bin,
    env: opencodeEnv(fake.url, home),
    timeoutSeconds: 60,
    killGraceSeconds: 1,
    warm: { enabled: true },
  });
  return {
    server: { host: "127.0.0.1", port: 0, heartbeatSeconds: 15 },
    logging: { level: "warn" },
    dataDir,
    intents: { enabled: false },
    backends: { "oc-stateless": backend(), "oc-resume": backend() },
    models: MODES.map((mode) => ({
      id: `opencode/${mode}`,
      backend: `oc-${mode}`,
      model: "fake/m1",
      session: { mode },
    })),
  };
}

async function warmPids(origin: string): Promise<number[]> {
  const health = (await (await fetch(`${origin}/health`)).json()) as { warm?: { list?: WarmEntry[] } };
  return (health.warm?.list ?? []).map((w) => w.pid).filter((p): p is number => typeof p === "number");
}

const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);

/** Wait (bounded) until the sides' `opencode serve` processes use under 5% of a core. */
async function settle(ctx: BenchContext, sides: Side[]): Promise<void> {
  const pids = (await Promise.all(sides.map((s) => warmPids(s.origin!)))).flat();
  for (let i = 0; i < 60; i++) {
    const before = sum(pids.map(cpuMs));
    await new Promise((r) => setTimeout(r, 1000));
    const used = sum(pids.map(cpuMs)) - before;
    if (used < 50 * Math.max(1, pids.length)) return;
    if (i % 10 === 0) ctx.log(`opencode serve still busy (${Math.round(used)} ms CPU in 1 s); waiting`);
  }
}

async function turn(
  side: Side,
  mode: Mode,
  key: string,
  messages: Array<{ role: string; content: string }>,
  modelAt: () => number,
): Promise<{ sample: Sample; text: string }> {
  const pids = await warmPids(side.origin!);
  const bridge0 = cpuMs(side.bridge!.pid);
  const serve0 = sum(pids.map(cpuMs));
  const t0 = performance.now();
  const res = await fetch(`${side.origin}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-session-id": key },
    body: JSON.stringify({ model: `opencode/${mode}`, messages, stream: true }),
    signal: AbortSignal.timeout(60_000),
  });
  const answer = await readChatStream(res, `${side.name} ${mode}`, () => performance.now());
  const end = performance.now();
  const at = modelAt();
  const after = await warmPids(side.origin!);
  return {
    text: answer.text,
    sample: {
      first: answer.firstAt - t0,
      model: at >= t0 ? at - t0 : NaN,
      rest: end - answer.firstAt,
      bridgeCpu: cpuMs(side.bridge!.pid) - bridge0,
      serveCpu: sum(after.map(cpuMs)) - serve0,
    },
  };
}

const p50 = (xs: number[]) => (xs.length ? ms(percentile(xs, 50)) : "–");

const suite: BenchSuite = {
  name: "opencode-turn",
  resultSlug: "opencode-warm-turn",
  description:
    "A warm OpenCode turn's first token (stateless on the shared opencode serve, resume on the conversation's own), later turns p50, optionally against a baseline git ref in the same run",
  async run(ctx: BenchContext): Promise<SuiteResult> {
    const base = mkdtempSync(path.join(tmpdir(), "cb-bench-octurn-"));
    const bin = path.join(ctx.root, "node_modules", ".bin", "opencode");
    const ref = process.env.OPENCODE_TURN_BASELINE?.trim();
    let stamp = 0;
    const fake = await startFakeOpenAI((req) => {
      if (!req.side) stamp = performance.now();
      return { kind: "text", chunks: CHUNKS, usage: { prompt_tokens: 20, completion_tokens: 6 } };
    });
    const sides: Side[] = [];
    const samples = new Map<string, { first: Sample[]; later: Sample[] }>();
    try {
      if (ref) {
        const commit = execFileSync("git", ["rev-parse", "--short", ref], { cwd: ctx.root, encoding: "utf8" }).trim();
        ctx.log(`baseline: this tree with ${BACKEND_DIR} of ${commit}, compiling`);
        sides.push({ name: `before (${BACKEND_DIR} of ${commit})`, root: baselineTree(ctx.root, ref, base) });
      }
      const head = execFileSync("git", ["rev-parse", "--short", "HEAD"], { cwd: ctx.root, encoding: "utf8" }).trim();
      sides.push({ name: `after (this tree, ${head})`, root: ctx.root });
      for (const [i, side] of sides.entries()) {
        const dir = path.join(base, `side${i}`);
        const home = path.join(dir, "home");
        mkdirSync(home, { recursive: true });
        const configFile = path.join(dir, "clawbridge.json");
        writeFileSync(configFile, JSON.stringify(config(bin, home, fake, path.join(dir, "data"))));
        side.runs = buildState(side.root).fresh ? "dist" : "tsx";
        ctx.log(`${side.name}: starting the bridge (${side.runs})`);
        side.bridge = await startService({
          name: `clawbridge ${side.name}`,
          command: process.execPath,
          args: [path.join(side.root, "bin", "clawbridge.js"), "serve", "--config", configFile],
          cwd: side.root,
          env: { ...process.env, CLAWBRIDGE_CONFIG: "" },
          readyPattern: /listening on (http:\/\/[^\s]+)/,
          timeoutMs: 60_000,
        });
        side.origin = side.bridge.ready;
        for (const mode of MODES) samples.set(`${side.name}\0${mode}`, { first: [], later: [] });
      }
      // Warm-up: each backend's server started and its first turns served (not counted).
      for (const side of sides)
        for (const mode of MODES)
          for (let t = 0; t < 2; t++)
            await turn(side, mode, `warmup-${mode}`, [{ role: "user", content: `warm-up ${t}` }], () => stamp);
      await settle(ctx, sides);
      ctx.log(`measuring ${CONVERSATIONS} conversations × ${TURNS} turns per side and mode`);
      const history = new Map<string, Array<{ role: string; content: string }>>();
      for (let c = 0; c < CONVERSATIONS; c++) {
        for (let t = 0; t < TURNS; t++) {
          const round = c * TURNS + t;
          const order = sides.map((_, i) => sides[(i + round) % sides.length]!);
          for (const side of order) {
            for (const mode of MODES) {
              const key = `bench-${mode}-${c}`;
              const h = history.get(`${side.name}\0${key}`) ?? [];
              h.push({ role: "user", content: `question ${t + 1} of conversation ${c + 1}: tell me something short` });
              // What a server does after a turn (OpenCode's own summary and pruning, the next
              // session made ahead) settles before the next measured turn, whichever side it is on.
              await new Promise((r) => setTimeout(r, PAUSE_MS));
              const { sample, text } = await turn(side, mode, key, h, () => stamp);
              h.push({ role: "assistant", content: text });
              history.set(`${side.name}\0${key}`, h);
              const s = samples.get(`${side.name}\0${mode}`)!;
              (t === 0 ? s.first : s.later).push(sample);
            }
          }
        }
        ctx.log(`conversation ${c + 1} of ${CONVERSATIONS} done`);
      }
    } finally {
      await Promise.all(sides.map((s) => s.bridge?.stop(5000)));
      await fake.close();
      rmSync(base, { recursive: true, force: true });
    }
    const rows: string[][] = [];
    const targets: TargetCheck[] = [];
    for (const side of sides) {
      for (const mode of MODES) {
        const s = samples.get(`${side.name}\0${mode}`)!;
        const later = s.later;
        rows.push([
          `${side.name}, ${side.runs}`,
          mode,
          p50(s.first.map((x) => x.first)),
          `${p50(later.map((x) => x.first))} (n=${later.length})`,
          p50(later.map((x) => x.model)),
          p50(later.map((x) => x.first - x.model)),
          p50(later.map((x) => x.rest)),
          ms(sum(later.map((x) => x.bridgeCpu)) / Math.max(1, later.length)),
          ms(sum(later.map((x) => x.serveCpu)) / Math.max(1, later.length)),
        ]);
      }
    }
    // Paired: the two sides' turns of the same round (same conversation and turn, moments apart),
    // after minus before; the median of those differences is steadier than a difference of p50s
    // when other processes load the machine unevenly over the run.
    const paired: string[][] = [];
    if (sides.length === 2) {
      for (const mode of MODES) {
        const [b, a] = sides.map((side) => samples.get(`${side.name}\0${mode}`)!.later);
        const diff = (f: (x: Sample) => number) => a!.map((x, i) => f(x) - f(b![i]!));
        const signed = (v: number) => `${v > 0 ? "+" : ""}${ms(v)}`;
        const first = diff((x) => x.first);
        paired.push([
          mode,
          signed(percentile(first, 50)),
          `${signed(percentile(first, 25))} / ${signed(percentile(first, 75))}`,
          signed(
            percentile(
              diff((x) => x.model),
              50,
            ),
          ),
          signed(
            percentile(
              diff((x) => x.first - x.model),
              50,
            ),
          ),
          `${first.filter((d) => d < 0).length} of ${first.length}`,
        ]);
      }
    }
    const current = sides[sides.length - 1]!;
    for (const mode of MODES) {
      const later = samples.get(`${current.name}\0${mode}`)!.later.map((x) => x.first);
      const v = later.length ? percentile(later, 50) : Infinity;
      targets.push({
        name: `OpenCode warm (${mode}): later turn's first token, ${current.name}`,
        goal: `≤ ${TARGET_MS} ms (p50)`,
        measured: ms(v),
        pass: v <= TARGET_MS,
      });
    }
    const markdown = [
      ...(ref
        ? [
            `Baseline: \`OPENCODE_TURN_BASELINE=${ref}\` — ${sides[0]!.name}; after: ${current.name}. To repeat: \`OPENCODE_TURN_BASELINE=${ref} npm run bench -- --suite opencode-turn\`.`,
            "",
          ]
        : []),
      `The bridge as its own process${sides.length > 1 ? " per side (the baseline's sources and this tree's, turns alternating, the first side rotating every round)" : ""}, two warm OpenCode backends on one instant fake OpenAI API (${CHUNKS.length} chunks at once): \`stateless\` (the shared \`opencode serve\`, a new OpenCode session per turn, the whole history in the prompt) and \`resume\` (the conversation's own \`opencode serve\`, its session going on). ${CONVERSATIONS} conversations × ${TURNS} turns per side and mode after a warm-up and after OpenCode's one-time background plugin install has finished, ${PAUSE_MS} ms between turns. Times in ms, request → first content chunk at the client.`,
      "",
      table(
        [
          "bridge",
          "mode",
          "turn 1 first token (p50)",
          "later turns first token (p50)",
          "later: request → model request (p50)",
          "later: model request → first token (p50)",
          "later: first token → end (p50)",
          "bridge CPU per later turn",
          "opencode serve CPU per later turn",
        ],
        rows,
      ),
      "",
      ...(paired.length
        ? [
            "After minus before, turn by turn (each later turn paired with the other side's same turn of the same round):",
            "",
            table(
              [
                "mode",
                "first token (median difference)",
                "first token (p25 / p75 difference)",
                "request → model request (median difference)",
                "model request → first token (median difference)",
                "turns faster after",
              ],
              paired,
            ),
            "",
          ]
        : []),
      "CPU from /proc (10 ms ticks, so per-turn values are coarse): the bridge process, and the `opencode serve` processes the bridge lists as warm.",
    ].join("\n");
    return { markdown, targets };
  },
};

export default suite;
