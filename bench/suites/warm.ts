/**
 * Suite "warm": every CLI backend cold (a process per turn) against warm (src/backends/warm: a
 * process kept per conversation, or one `opencode serve` per backend) and against warm with a
 * standby (a started process waiting for the next NEW conversation), in the same run, against a
 * fake model API that answers at once (bench/suites/warm/clis.ts). The bridge runs as its own
 * process (`node bin/clawbridge.js serve`) with, per CLI, a cold, a warm (`warm.standby: 0`) and a
 * standby backend (`warm.standby: 1`; not for OpenCode, whose shared `opencode serve` serves new
 * conversations at once) on the same fake.
 *
 * Per CLI:
 * - CONVERSATIONS conversations of TURNS turns per mode, cold and warm turns alternating (both see
 *   the same machine load): request → first content chunk, turn 1 and later turns (p50, max),
 *   content chunks per answer, bridge CPU per turn, RSS of each warm process (/health);
 * - a new conversation on a READY standby (one up for STANDBY_READY_MS, STANDBY_CONVERSATIONS
 *   times, two turns each) against one without (the warm backend's turn 1: the cost of none);
 * - what a turn costs the bridge (issue 34 items 3 and 4, measured here, fixed elsewhere): its CPU
 *   per warm later turn over CPU_TURNS turns of one conversation (/proc of the bridge, read before
 *   the first counted turn and after the last one plus a pause, so work moved after the answer is
 *   counted too), and a cold turn's last content chunk → `[DONE]` at the client.
 * Then, with Claude Code: MEMORY_CONVERSATIONS conversations opened one after another (two turns
 * each) on a bridge whose `warm.maxMemoryMB` is what 3 warm Claude processes held in this run,
 * while this process samples the CLIs' resident memory every 100 ms from /proc.
 * Targets (issues 16 and 34): see `targetsOf`.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { cpuMs, startService, type Service } from "../procs.js";
import type { BenchContext, BenchSuite, SuiteResult, TargetCheck } from "../suite.js";
import { ms, percentile, table } from "../stats.js";
import { CHUNKS, warmClis, type WarmCli } from "./warm/clis.js";
import {
  groupCpuMs,
  MemorySampler,
  standbyOf,
  standbyReady,
  streamedTurn,
  warmEvents,
  warmHealth,
} from "./warm/bridge.js";

const CONVERSATIONS = 2;
const TURNS = 4;
/** New conversations measured on a ready standby, per CLI. */
const STANDBY_CONVERSATIONS = 4;
/** A standby counts as ready once it has been listed this long (past its CLI's own start-up). */
const STANDBY_READY_MS = 3000;
/** Warm later turns whose bridge CPU is summed (one conversation). */
const CPU_TURNS = 20;
/** Pause after the last counted turn before the CPU is read (work moved after the answer). */
const CPU_SETTLE_MS = 300;
const MEMORY_CONVERSATIONS = 10;
const MEMORY_TURNS = 2;

const NEW_CONVERSATION_TARGET_MS = 150;
const STANDBY_TARGET_CLIS = new Set(["claude", "gemini", "qwen", "codex"]);
const LATER_TURN_TARGET_MS: Record<string, number> = { claude: 60, opencode: 100, gemini: 100 };
const CPU_TARGET_MS = 5;
const DONE_TARGET_MS = 15;

type Mode = "cold" | "warm";

interface ModeResult {
  first: number[];
  later: number[];
  /** Later turns: request → model request at the fake. */
  laterModel: number[];
  chunks: number[];
  cpuPerTurnMs: number;
  /** Last content chunk → [DONE] (cold turns). */
  lastToDone: number[];
}

interface CliResult {
  cli: WarmCli;
  cold: ModeResult;
  warm: ModeResult;
  warmRss: number[];
  /** New conversations on a ready standby: first and second turn; standbys taken; conversations whose standby was not ready in time. */
  standby?: {
    first: number[];
    /** Their first turns: request → the CLI's model request at the fake. */
    firstModel: number[];
    second: number[];
    taken: number;
    notReady: number;
    /** What starting a standby cost: its process group's CPU (ms) and resident memory when ready. */
    startCpuMs: number[];
    readyRss: number[];
  };
  /** Bridge CPU per warm later turn (CPU_TURNS turns of one conversation). */
  cpuPerWarmTurnMs?: number;
  error?: string;
}

interface MemoryResult {
  budgetMB: number;
  perClaudeMB: number;
  maxWarm: number;
  /** The plain RSS sum, forks before their exec counted twice. */
  maxWarmRaw: number;
  /** The warm groups' sizes at the highest sample. */
  atMaxWarm: string;
  maxAll: number;
  samples: number;
  answered: number;
  turns: number;
  first: number[];
  events: Record<string, number>;
  /** What the bridge learned of a Claude process: the start-up peak a new one needs room for, the most a started one held. */
  learned: string;
  error?: string;
}

const user = (c: string, t: number) => ({
  role: "user",
  content: `question ${t + 1} of conversation ${c}: tell me something short`,
});

async function startBridge(ctx: BenchContext, base: string, name: string, config: object): Promise<Service> {
  const configFile = path.join(base, `${name}.json`);
  writeFileSync(configFile, JSON.stringify(config));
  return startService({
    name: "clawbridge",
    command: process.execPath,
    args: [path.join(ctx.root, "bin", "clawbridge.js"), "serve", "--config", configFile],
    cwd: ctx.root,
    env: { ...process.env, CLAWBRIDGE_CONFIG: "" },
    readyPattern: /listening on (http:\/\/[^\s]+)/,
  });
}

async function runCli(ctx: BenchContext, cli: WarmCli, base: string): Promise<CliResult> {
  const home = path.join(base, cli.id, "home");
  mkdirSync(home, { recursive: true });
  const fake = await cli.start(home);
  const withStandby = cli.id !== "opencode";
  // The standby backend keeps every measured conversation's process and still has room for a
  // standby (standbys count towards maxProcesses and never end a conversation's process).
  const backend = (warm: boolean, standby = 0) => ({
    type: cli.type,
    command: cli.bin,
    env: fake.env,
    timeoutSeconds: 180,
    killGraceSeconds: 1,
    warm: {
      enabled: warm,
      ...(warm ? { standby } : {}),
      ...(standby ? { maxProcesses: STANDBY_CONVERSATIONS + 2 } : {}),
    },
  });
  const model = (mode: string) => ({
    id: `${cli.id}/${mode}`,
    backend: `${cli.id}-${mode}`,
    model: cli.id === "opencode" ? "fake/m1" : "default",
    session: { mode: cli.mode },
  });
  let bridge: Service | undefined;
  const empty = (): ModeResult => ({
    first: [],
    later: [],
    laterModel: [],
    chunks: [],
    cpuPerTurnMs: 0,
    lastToDone: [],
  });
  const result: CliResult = { cli, cold: empty(), warm: empty(), warmRss: [] };
  try {
    bridge = await startBridge(ctx, path.join(base, cli.id), "clawbridge", {
      server: { host: "127.0.0.1", port: 0, heartbeatSeconds: 15 },
      logging: { level: "warn" },
      dataDir: path.join(base, cli.id, "data"),
      intents: { enabled: false },
      // The warm backend has no standby (its turn 1 is the cost of none); the standby backend says so itself.
      warm: { standby: 0 },
      backends: {
        [`${cli.id}-cold`]: backend(false),
        [`${cli.id}-warm`]: backend(true),
        ...(withStandby ? { [`${cli.id}-standby`]: backend(true, 1) } : {}),
      },
      models: [model("cold"), model("warm"), ...(withStandby ? [model("standby")] : [])],
    });
    const origin = bridge.ready;
    const pid = bridge.pid;
    const turn = (mode: string, key: string, messages: Array<{ role: string; content: string }>) =>
      streamedTurn(origin, `${cli.id}/${mode}`, key, messages, fake.lastModelRequestAt);

    // Cold against warm, turns alternating.
    const cpu = { cold: 0, warm: 0 };
    for (let c = 0; c < CONVERSATIONS; c++) {
      const history: Record<Mode, Array<{ role: string; content: string }>> = { cold: [], warm: [] };
      for (let t = 0; t < TURNS; t++) {
        for (const mode of ["cold", "warm"] as const) {
          history[mode].push(user(`${c + 1}`, t));
          const before = cpuMs(pid);
          const r = await turn(mode, `bench-${cli.id}-${mode}-${c}`, history[mode]);
          cpu[mode] += cpuMs(pid) - before;
          history[mode].push({ role: "assistant", content: r.text });
          const m = result[mode];
          (t === 0 ? m.first : m.later).push(r.firstMs);
          if (t > 0 && r.modelMs !== undefined) m.laterModel.push(r.modelMs);
          if (r.lastToDoneMs !== undefined) m.lastToDone.push(r.lastToDoneMs);
          m.chunks.push(r.chunks);
        }
      }
      ctx.log(`${cli.name}: conversation ${c + 1} done`);
    }
    result.cold.cpuPerTurnMs = cpu.cold / (CONVERSATIONS * TURNS);
    result.warm.cpuPerTurnMs = cpu.warm / (CONVERSATIONS * TURNS);
    result.warmRss = (await warmHealth(origin)).list
      .filter((w) => w.backend === `${cli.id}-warm` && w.rssBytes)
      .map((w) => w.rssBytes!);

    // The bridge's CPU per warm later turn: one conversation, its first turn not counted.
    {
      const history = [user("cpu", 0)];
      history.push({ role: "assistant", content: (await turn("warm", `bench-${cli.id}-cpu`, history)).text });
      await new Promise((r) => setTimeout(r, CPU_SETTLE_MS));
      const before = cpuMs(pid);
      for (let t = 1; t <= CPU_TURNS; t++) {
        history.push(user("cpu", t));
        history.push({ role: "assistant", content: (await turn("warm", `bench-${cli.id}-cpu`, history)).text });
      }
      await new Promise((r) => setTimeout(r, CPU_SETTLE_MS));
      result.cpuPerWarmTurnMs = (cpuMs(pid) - before) / CPU_TURNS;
    }

    // New conversations on a ready standby (the first turn of the kind starts one: not measured).
    if (withStandby) {
      const sb = {
        first: [] as number[],
        firstModel: [] as number[],
        second: [] as number[],
        taken: 0,
        notReady: 0,
        startCpuMs: [] as number[],
        readyRss: [] as number[],
      };
      const lead = [user("lead", 0)];
      await turn("standby", `bench-${cli.id}-standby-lead`, lead);
      for (let c = 0; c < STANDBY_CONVERSATIONS; c++) {
        if (!(await standbyReady(origin, `${cli.id}-standby`, STANDBY_READY_MS, 60_000))) sb.notReady++;
        const ready = await standbyOf(origin, `${cli.id}-standby`);
        if (ready) {
          sb.startCpuMs.push(groupCpuMs(ready.pid));
          sb.readyRss.push(ready.rssBytes);
        }
        const key = `bench-${cli.id}-standby-${c}`;
        const history = [user(`new ${c + 1}`, 0)];
        const r1 = await turn("standby", key, history);
        sb.first.push(r1.firstMs);
        if (r1.modelMs !== undefined) sb.firstModel.push(r1.modelMs);
        history.push({ role: "assistant", content: r1.text }, user(`new ${c + 1}`, 1));
        sb.second.push((await turn("standby", key, history)).firstMs);
      }
      sb.taken = (await warmEvents(origin, `${cli.id}-standby`)).standbyTaken ?? 0;
      result.standby = sb;
      ctx.log(`${cli.name}: ${STANDBY_CONVERSATIONS} new conversations on standbys done`);
    }
  } catch (err) {
    result.error = (err as Error).message.slice(0, 400);
    ctx.log(`${cli.name}: ${result.error}`);
  } finally {
    await bridge?.stop(5000);
    await fake.close();
  }
  return result;
}

/** MEMORY_CONVERSATIONS new conversations in a row under a budget of 3 warm Claude processes. */
async function runMemory(ctx: BenchContext, cli: WarmCli, base: string, perClaude: number): Promise<MemoryResult> {
  const budgetMB = Math.ceil((3 * perClaude) / 1048576);
  const dir = path.join(base, "memory");
  const home = path.join(dir, "home");
  mkdirSync(home, { recursive: true });
  const fake = await cli.start(home);
  const r: MemoryResult = {
    budgetMB,
    perClaudeMB: Math.round(perClaude / 1048576),
    maxWarm: 0,
    maxWarmRaw: 0,
    atMaxWarm: "",
    maxAll: 0,
    samples: 0,
    answered: 0,
    turns: 0,
    first: [],
    events: {},
    learned: "",
  };
  let bridge: Service | undefined;
  let sampler: MemorySampler | undefined;
  try {
    bridge = await startBridge(ctx, dir, "clawbridge", {
      server: { host: "127.0.0.1", port: 0, heartbeatSeconds: 15 },
      logging: { level: "warn" },
      dataDir: path.join(dir, "data"),
      intents: { enabled: false },
      warm: { maxMemoryMB: budgetMB, standby: 1 },
      backends: {
        cc: { type: cli.type, command: cli.bin, env: fake.env, timeoutSeconds: 180, killGraceSeconds: 1 },
      },
      models: [{ id: "claude", backend: "cc", model: "default", session: { mode: "resume" } }],
    });
    sampler = new MemorySampler(bridge.pid, bridge.ready);
    sampler.start();
    for (let c = 0; c < MEMORY_CONVERSATIONS; c++) {
      const history: Array<{ role: string; content: string }> = [];
      for (let t = 0; t < MEMORY_TURNS; t++) {
        history.push(user(`budget ${c + 1}`, t));
        r.turns++;
        try {
          const a = await streamedTurn(bridge.ready, "claude", `bench-budget-${c}`, history, fake.lastModelRequestAt);
          if (a.text === CHUNKS.join("")) r.answered++;
          if (t === 0) r.first.push(a.firstMs);
          history.push({ role: "assistant", content: a.text });
        } catch (err) {
          ctx.log(`budget conversation ${c + 1}: ${(err as Error).message.slice(0, 200)}`);
        }
      }
    }
    // The replacement standby of the last conversation, if any fits, starts after its turn.
    await new Promise((res) => setTimeout(res, 3000));
    r.events = await warmEvents(bridge.ready, "cc");
    const peaks = (await warmHealth(bridge.ready)).memory.backends?.cc;
    if (peaks) r.learned = `start-up peak ${mbOf(peaks.startBytes)}, started ${mbOf(peaks.settledBytes)}`;
  } catch (err) {
    r.error = (err as Error).message.slice(0, 400);
    ctx.log(`memory budget: ${r.error}`);
  } finally {
    sampler?.stop();
    if (sampler)
      Object.assign(r, {
        maxWarm: sampler.maxWarm,
        maxWarmRaw: sampler.maxWarmRaw,
        atMaxWarm: sampler.atMaxWarm,
        maxAll: sampler.maxAll,
        samples: sampler.samples,
      });
    await bridge?.stop(5000);
    await fake.close();
  }
  return r;
}

const p50 = (xs: number[]) => (xs.length ? ms(percentile(xs, 50)) : "–");
const max = (xs: number[]) => (xs.length ? ms(Math.max(...xs)) : "–");
const mbOf = (b: number) => `${Math.round(b / 1048576)} MB`;

function targetsOf(results: CliResult[], memory: MemoryResult | undefined): TargetCheck[] {
  const targets: TargetCheck[] = [];
  const failed = (r: CliResult) => (r.error ? `failed: ${r.error}` : undefined);
  for (const r of results) {
    if (!STANDBY_TARGET_CLIS.has(r.cli.id)) continue;
    const xs = r.standby?.first ?? [];
    const v = xs.length ? percentile(xs, 50) : Infinity;
    targets.push({
      name: `${r.cli.name}: a new conversation's first token on a ready standby`,
      goal: `≤ ${NEW_CONVERSATION_TARGET_MS} ms (p50)`,
      measured: failed(r) ?? `${ms(v)} (without one: ${p50(r.warm.first)})`,
      pass: !r.error && v <= NEW_CONVERSATION_TARGET_MS,
    });
  }
  for (const r of results) {
    const goal = LATER_TURN_TARGET_MS[r.cli.id];
    if (goal === undefined) continue;
    const v = r.warm.later.length ? percentile(r.warm.later, 50) : Infinity;
    targets.push({
      name: `${r.cli.name} warm: a later turn's first token`,
      goal: `≤ ${goal} ms (p50)`,
      measured: failed(r) ?? ms(v),
      pass: !r.error && v <= goal,
    });
  }
  const oc = results.find((r) => r.cli.id === "opencode");
  if (oc) {
    const chunks = oc.warm.chunks.length ? percentile(oc.warm.chunks, 50) : 0;
    targets.push({
      name: "OpenCode warm: content deltas per multi-token answer",
      goal: "> 1",
      measured: String(chunks),
      pass: chunks > 1,
    });
  }
  if (memory) {
    targets.push({
      name: `${MEMORY_CONVERSATIONS} conversations in a row, warm.maxMemoryMB = 3 warm Claude processes (${memory.budgetMB} MB): warm processes' RSS`,
      goal: `never above ${memory.budgetMB} MB (sampled every 100 ms)`,
      measured: memory.error ? `failed: ${memory.error}` : `max ${mbOf(memory.maxWarm)}`,
      pass: !memory.error && memory.samples > 0 && memory.maxWarm <= memory.budgetMB * 1048576,
    });
    targets.push({
      name: `${MEMORY_CONVERSATIONS} conversations in a row under the budget: every turn answered`,
      goal: `${memory.turns} of ${memory.turns}`,
      measured: `${memory.answered} of ${memory.turns}`,
      pass: !memory.error && memory.turns > 0 && memory.answered === memory.turns,
    });
  }
  const claude = results.find((r) => r.cli.id === "claude");
  if (claude) {
    const cpu = claude.cpuPerWarmTurnMs ?? Infinity;
    targets.push({
      name: "Claude Code: the bridge's CPU per warm turn",
      goal: `≤ ${CPU_TARGET_MS} ms`,
      measured: failed(claude) ?? ms(cpu),
      pass: !claude.error && cpu <= CPU_TARGET_MS,
    });
    const done = claude.cold.lastToDone.length ? percentile(claude.cold.lastToDone, 50) : Infinity;
    targets.push({
      name: "Claude Code: a cold turn's last token → [DONE]",
      goal: `≤ ${DONE_TARGET_MS} ms (p50)`,
      measured: failed(claude) ?? `${ms(done)} (max ${max(claude.cold.lastToDone)})`,
      pass: !claude.error && done <= DONE_TARGET_MS,
    });
  }
  return targets;
}

function report(results: CliResult[], memory: MemoryResult | undefined): string {
  const rows: string[][] = [];
  for (const r of results) {
    for (const mode of ["cold", "warm"] as const) {
      const m = r[mode];
      rows.push([
        r.cli.name,
        mode,
        p50(m.first),
        p50(m.later),
        max(m.later),
        p50(m.laterModel),
        m.chunks.length ? String(percentile(m.chunks, 50)) : "–",
        m.first.length ? ms(m.cpuPerTurnMs) : "–",
        mode === "warm" && r.warmRss.length ? r.warmRss.map(mbOf).join(", ") : "–",
      ]);
    }
  }
  const newRows = results.map((r) => [
    r.cli.name,
    p50(r.cold.first),
    p50(r.warm.first),
    r.standby
      ? `${p50(r.standby.first)} (max ${max(r.standby.first)}; model request at ${p50(r.standby.firstModel)})`
      : "– (no standby: one shared `opencode serve`)",
    r.standby ? p50(r.standby.second) : "–",
    r.standby?.startCpuMs.length
      ? `${ms(percentile(r.standby.startCpuMs, 50))} CPU, ${mbOf(percentile(r.standby.readyRss, 50))}`
      : "–",
    r.standby
      ? `${r.standby.taken} of ${STANDBY_CONVERSATIONS}${r.standby.notReady ? `, ${r.standby.notReady} not ready in time` : ""}`
      : "–",
  ]);
  const costRows = results.map((r) => [
    r.cli.name,
    r.cpuPerWarmTurnMs !== undefined ? ms(r.cpuPerWarmTurnMs) : "–",
    `${p50(r.cold.lastToDone)} (max ${max(r.cold.lastToDone)})`,
    `${p50(r.warm.lastToDone)}`,
  ]);
  const failures = results.filter((r) => r.error).map((r) => `- ${r.cli.name}: ${r.error}`);
  const out = [
    `Each CLI from node_modules/.bin against its fake model API (testkit/fakes, answering at once with ${CHUNKS.length} chunks); the bridge as its own process with a cold, a warm (\`warm.standby: 0\`) and a standby backend (\`warm.standby: 1\`) per CLI; ${CONVERSATIONS} conversations × ${TURNS} turns per mode, cold and warm turns alternating. Times are request → first content chunk at the client.`,
    "",
    table(
      [
        "CLI",
        "mode",
        "turn 1 first token (p50)",
        "later turns first token (p50)",
        "later turns (max)",
        "later turns: request → model request (p50)",
        "content chunks per answer (p50)",
        "bridge CPU per turn",
        "RSS per warm process",
      ],
      rows,
    ),
    "",
    "### A new conversation's first token",
    "",
    `Cold: a process per turn. Warm, no standby: the conversation's process starts with its first turn (the cost of having no standby). On a ready standby: ${STANDBY_CONVERSATIONS} new conversations, each started once the backend's standby had been up for ${STANDBY_READY_MS / 1000} s (the first conversation of the kind, which starts the first standby, is not counted); "taken": the standbys the backend handed to new conversations (from its \`clawbridge_warm_events_total\`).`,
    "",
    table(
      [
        "CLI",
        "cold turn 1 (p50)",
        "warm, no standby: turn 1 (p50)",
        "on a ready standby: turn 1 (p50)",
        "its turn 2 (p50)",
        "a standby's start: its CPU, its RSS when ready (p50)",
        "standbys taken",
      ],
      newRows,
    ),
    "",
    "### What a turn costs the bridge (issue 34 items 3 and 4: measured here)",
    "",
    `Bridge CPU per warm later turn: ${CPU_TURNS} later turns of one warm conversation, the bridge process's user+system time (/proc, 10 ms ticks) from before the first to ${CPU_SETTLE_MS} ms after the last (work moved after the answer included), divided by the turns; short requests (one user message and the history), \`intents.enabled: false\`. Last content chunk → \`[DONE]\` at the client, for every cold and warm turn of the first table.`,
    "",
    table(
      ["CLI", "bridge CPU per warm turn", "cold: last token → [DONE] (p50)", "warm: last token → [DONE] (p50)"],
      costRows,
    ),
    "",
  ];
  if (memory) {
    out.push(
      "### Memory budget: conversations opened one after another",
      "",
      `Claude Code, one backend with \`warm.standby: 1\` and \`warm.maxMemoryMB: ${memory.budgetMB}\` (3 × ${memory.perClaudeMB} MB, the largest warm Claude process of this run); ${MEMORY_CONVERSATIONS} new conversations one after another, ${MEMORY_TURNS} turns each. This process read the resident memory of every process group the bridge started from /proc every 100 ms (${memory.samples} samples): "warm" are the groups the bridge's /health lists (polled every 300 ms), "all" includes the cold turns' processes, which the budget does not cover. A child that is a fork of its parent which has not run another program yet (same name, executable and command line: Claude Code starts its helpers so, and on a loaded machine such a fork of a ~290 MB claude stays visible for a few hundred ms) holds its parent's pages copy-on-write: it is counted once, as the bridge counts it (src/backends/warm/rss.ts); the plain sum is shown beside it.`,
      "",
      table(
        [
          "budget",
          "max RSS, warm processes (what it was made of)",
          "the same, a fork before its exec counted twice",
          "max RSS, all CLI processes",
          "turns answered",
          "first token of each first turn (p50, max)",
          "warm events",
          "what the bridge counts a Claude process at",
        ],
        [
          [
            `${memory.budgetMB} MB`,
            `${mbOf(memory.maxWarm)} (${memory.atMaxWarm})`,
            mbOf(memory.maxWarmRaw),
            mbOf(memory.maxAll),
            `${memory.answered} of ${memory.turns}`,
            `${p50(memory.first)}, ${max(memory.first)}`,
            Object.entries(memory.events)
              .filter(([, n]) => n > 0)
              .map(([k, n]) => `${k} ${n}`)
              .join(", ") || "–",
            memory.learned || "–",
          ],
        ],
      ),
      "",
    );
  }
  out.push(
    ...(failures.length ? ["Failures:", ...failures, ""] : []),
    "`request → model request` is when the CLI's call reached the fake model API: the time before it is the bridge's and the CLI's own work before asking the model (process start, session load, prompt building); the rest is the model's stream passing through the CLI and the bridge.",
    "",
    "Bridge CPU per turn is the bridge process's user+system time over all turns of that mode divided by the turns (10 ms /proc ticks, so small values are coarse); the CLIs' own CPU is not in it.",
  );
  return out.join("\n");
}

const suite: BenchSuite = {
  name: "warm",
  description:
    "Warm CLI processes against cold ones and standbys, per CLI: first token of a new conversation and of later turns, bridge CPU per turn, last token → [DONE], RSS; conversations in a row under a memory budget",
  async run(ctx: BenchContext): Promise<SuiteResult> {
    const base = mkdtempSync(path.join(tmpdir(), "cb-bench-warm-"));
    const results: CliResult[] = [];
    let memory: MemoryResult | undefined;
    try {
      for (const cli of warmClis(ctx.root)) {
        if (ctx.scenarios && !ctx.scenarios.includes(cli.id)) continue;
        ctx.log(`${cli.name}: cold, warm and standbys…`);
        results.push(await runCli(ctx, cli, base));
      }
      const claude = warmClis(ctx.root).find((c) => c.id === "claude")!;
      const claudeRun = results.find((r) => r.cli.id === "claude");
      if (!ctx.scenarios || ctx.scenarios.includes("memory")) {
        // What one warm Claude process holds: measured above, or ~205 MB (bench/results/2026-11-25-warm.md).
        const per = claudeRun?.warmRss.length ? Math.max(...claudeRun.warmRss) : 205 * 1048576;
        ctx.log(`memory budget: ${MEMORY_CONVERSATIONS} conversations under 3 × ${mbOf(per)}…`);
        memory = await runMemory(ctx, claude, base, per);
      }
    } finally {
      rmSync(base, { recursive: true, force: true });
    }
    return { markdown: report(results, memory), targets: targetsOf(results, memory) };
  },
};

export default suite;
