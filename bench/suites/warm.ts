/**
 * Suite "warm": every CLI backend cold (a process per turn) against warm (src/backends/warm: a process kept
 * per conversation, or one `opencode serve` per backend), in the same run, against a fake model API
 * that answers at once (bench/suites/warm/clis.ts). The bridge runs as its own process
 * (`node bin/clawbridge.js serve`) with, per CLI, a cold and a warm backend on the same fake.
 *
 * Per CLI and mode, over CONVERSATIONS conversations of TURNS turns (cold and warm turns
 * alternate, so both see the same machine load):
 * - request → first content chunk through the bridge, turn 1 and later turns (p50, max);
 * - content chunks per answer (OpenCode's cold `run` prints whole parts: one chunk);
 * - bridge CPU per turn (/proc of the bridge process; the CLIs are not counted);
 * - RSS of each warm process (its process group) after the turns, from /health.
 * Targets (issue 16): a later turn's first token within 100 ms for Claude Code, OpenCode and Gemini
 * CLI warm; OpenCode warm delivering more than one content delta for a multi-token answer.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { cpuMs, startService, type Service } from "../procs.js";
import type { BenchContext, BenchSuite, SuiteResult, TargetCheck } from "../suite.js";
import { ms, percentile, table } from "../stats.js";
import { warmClis, type WarmCli } from "./warm/clis.js";
import { readChatStream } from "../chat-stream.js";

const CONVERSATIONS = 2;
const TURNS = 4;
const LATER_TURN_TARGET_MS = 100;
const TARGET_CLIS = new Set(["claude", "opencode", "gemini"]);

interface Turn {
  /** Request → the CLI's model request reached the fake (the CLI's own share before the model). */
  modelMs?: number;
  firstMs: number;
  chunks: number;
  text: string;
}

/** One streamed turn through the bridge: time to the first content chunk, chunk count. */
async function turn(
  origin: string,
  model: string,
  key: string,
  messages: Array<{ role: string; content: string }>,
  modelAt: () => number,
): Promise<Turn> {
  const t0 = performance.now();
  const res = await fetch(`${origin}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-session-id": key },
    body: JSON.stringify({ model, messages, stream: true }),
    signal: AbortSignal.timeout(180_000),
  });
  const { text, chunks, firstAt: first } = await readChatStream(res, model, () => performance.now());
  const at = modelAt();
  return { firstMs: first - t0, chunks, text, ...(at >= t0 ? { modelMs: at - t0 } : {}) };
}

interface ModeResult {
  first: number[];
  later: number[];
  /** Later turns: request → model request at the fake. */
  laterModel: number[];
  chunks: number[];
  cpuPerTurnMs: number;
}

interface CliResult {
  cli: WarmCli;
  cold: ModeResult;
  warm: ModeResult;
  warmRss: number[];
  error?: string;
}

async function runCli(ctx: BenchContext, cli: WarmCli, base: string): Promise<CliResult> {
  const home = path.join(base, cli.id, "home");
  mkdirSync(home, { recursive: true });
  const fake = await cli.start(home);
  const configFile = path.join(base, cli.id, "clawbridge.json");
  const backend = (warm: boolean) => ({
    type: cli.type,
    command: cli.bin,
    env: fake.env,
    timeoutSeconds: 180,
    killGraceSeconds: 1,
    warm: { enabled: warm },
  });
  const model = (mode: "cold" | "warm") => ({
    id: `${cli.id}/${mode}`,
    backend: `${cli.id}-${mode}`,
    model: cli.id === "opencode" ? "fake/m1" : "default",
    session: { mode: cli.mode },
  });
  writeFileSync(
    configFile,
    JSON.stringify({
      server: { host: "127.0.0.1", port: 0, heartbeatSeconds: 15 },
      logging: { level: "warn" },
      dataDir: path.join(base, cli.id, "data"),
      intents: { enabled: false },
      backends: { [`${cli.id}-cold`]: backend(false), [`${cli.id}-warm`]: backend(true) },
      models: [model("cold"), model("warm")],
    }),
  );
  let bridge: Service | undefined;
  const empty = (): ModeResult => ({ first: [], later: [], laterModel: [], chunks: [], cpuPerTurnMs: 0 });
  const result: CliResult = { cli, cold: empty(), warm: empty(), warmRss: [] };
  try {
    bridge = await startService({
      name: "clawbridge",
      command: process.execPath,
      args: [path.join(ctx.root, "bin", "clawbridge.js"), "serve", "--config", configFile],
      cwd: ctx.root,
      env: { ...process.env, CLAWBRIDGE_CONFIG: "" },
      readyPattern: /listening on (http:\/\/[^\s]+)/,
    });
    const origin = bridge.ready;
    const cpu = { cold: 0, warm: 0 };
    for (let c = 0; c < CONVERSATIONS; c++) {
      const history: Record<"cold" | "warm", Array<{ role: string; content: string }>> = { cold: [], warm: [] };
      for (let t = 0; t < TURNS; t++) {
        for (const mode of ["cold", "warm"] as const) {
          history[mode].push({
            role: "user",
            content: `question ${t + 1} of conversation ${c + 1}: tell me something short`,
          });
          const before = cpuMs(bridge.pid);
          const r = await turn(
            origin,
            `${cli.id}/${mode}`,
            `bench-${cli.id}-${mode}-${c}`,
            history[mode],
            fake.lastModelRequestAt,
          );
          cpu[mode] += cpuMs(bridge.pid) - before;
          history[mode].push({ role: "assistant", content: r.text });
          const m = result[mode];
          (t === 0 ? m.first : m.later).push(r.firstMs);
          if (t > 0 && r.modelMs !== undefined) m.laterModel.push(r.modelMs);
          m.chunks.push(r.chunks);
        }
      }
      ctx.log(`${cli.name}: conversation ${c + 1} done`);
    }
    result.cold.cpuPerTurnMs = cpu.cold / (CONVERSATIONS * TURNS);
    result.warm.cpuPerTurnMs = cpu.warm / (CONVERSATIONS * TURNS);
    const health = (await (await fetch(`${origin}/health`)).json()) as {
      warm?: { list?: Array<{ backend: string; rssBytes?: number }> };
    };
    result.warmRss = (health.warm?.list ?? [])
      .filter((w) => w.backend === `${cli.id}-warm` && w.rssBytes)
      .map((w) => w.rssBytes!);
  } catch (err) {
    result.error = (err as Error).message.slice(0, 400);
    ctx.log(`${cli.name}: ${result.error}`);
  } finally {
    await bridge?.stop(5000);
    await fake.close();
  }
  return result;
}

const p50 = (xs: number[]) => (xs.length ? ms(percentile(xs, 50)) : "–");
const max = (xs: number[]) => (xs.length ? ms(Math.max(...xs)) : "–");
const mbOf = (b: number) => `${Math.round(b / 1048576)} MB`;

const suite: BenchSuite = {
  name: "warm",
  description:
    "Warm CLI processes against cold ones, per CLI: first token on turn 1 and later turns, deltas, bridge CPU per turn, RSS per warm process",
  async run(ctx: BenchContext): Promise<SuiteResult> {
    const base = mkdtempSync(path.join(tmpdir(), "cb-bench-warm-"));
    const results: CliResult[] = [];
    try {
      for (const cli of warmClis(ctx.root)) {
        if (ctx.scenarios && !ctx.scenarios.includes(cli.id)) continue;
        ctx.log(`${cli.name}: cold and warm…`);
        results.push(await runCli(ctx, cli, base));
      }
    } finally {
      rmSync(base, { recursive: true, force: true });
    }
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
    const targets: TargetCheck[] = [];
    for (const r of results) {
      if (!TARGET_CLIS.has(r.cli.id)) continue;
      const later = r.warm.later.length ? percentile(r.warm.later, 50) : Infinity;
      targets.push({
        name: `${r.cli.name} warm: later turn's first token`,
        goal: `≤ ${LATER_TURN_TARGET_MS} ms (p50)`,
        measured: r.error ? `failed: ${r.error}` : ms(later),
        pass: !r.error && later <= LATER_TURN_TARGET_MS,
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
    const failures = results.filter((r) => r.error).map((r) => `- ${r.cli.name}: ${r.error}`);
    const markdown = [
      `Each CLI from node_modules/.bin against its fake model API (testkit/fakes, answering at once with ${6} chunks); the bridge as its own process with a cold and a warm backend per CLI; ${CONVERSATIONS} conversations × ${TURNS} turns per mode, cold and warm turns alternating. Times are request → first content chunk at the client.`,
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
      ...(failures.length ? ["Failures:", ...failures, ""] : []),
      "`request → model request` is when the CLI's call reached the fake model API: the time before it is the bridge's and the CLI's own work before asking the model (process start, session load, prompt building); the rest is the model's stream passing through the CLI and the bridge.",
      "",
      "Bridge CPU per turn is the bridge process's user+system time over all turns of that mode divided by the turns (10 ms /proc ticks, so small values are coarse); the CLIs' own CPU is not in it.",
    ].join("\n");
    return { markdown, targets };
  },
};

export default suite;
