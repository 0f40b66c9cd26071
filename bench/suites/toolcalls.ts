/**
 * Suite "toolcalls": the CPU the text tool-call extractor (src/backends/openai/toolcalls/) costs per streamed
 * answer of 20 chunks, on prose without a call and on one reply per model family, in this process
 * (no server, no network); then what that adds to the bridge's own streaming CPU per request, taken
 * from the newest `openai` suite results file in bench/results/.
 */
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { ToolCallExtractor, type ExtractorOptions } from "../../src/backends/openai/toolcalls/extract.js";
import { newCallId } from "../../src/core/util/ids.js";
import { percentile, table } from "../stats.js";
import type { BenchContext, BenchSuite, SuiteResult, TargetCheck } from "../suite.js";
import { CHUNKS, type Sample, samples } from "./toolcalls/samples.js";

/** Target: prose without a call costs under this share of the bridge's CPU per streamed answer. */
const TARGET_SHARE = 0.05;
const ROUNDS = 5;

function optionsFor(s: Sample): ExtractorOptions {
  // As the bridge's openai backend builds it (src/backends/openai/translate.ts).
  return { tools: s.tools, maxCalls: 65, newId: newCallId, stripSpecialTokens: true };
}

/** One streamed answer through a new extractor; returns the number of calls found. */
function runOnce(s: Sample, opts: ExtractorOptions): number {
  const x = new ToolCallExtractor(opts);
  let calls = 0;
  for (const p of s.pieces) for (const e of x.push(p)) if (e.type === "call") calls++;
  for (const e of x.end()) if (e.type === "call") calls++;
  return calls;
}

interface Measured {
  sample: Sample;
  /** CPU µs per answer: median of the rounds, and the rounds' min / max. */
  us: number;
  min: number;
  max: number;
  answers: number;
}

function cpuUs(): number {
  const u = process.cpuUsage();
  return u.user + u.system;
}

function measure(s: Sample, seconds: number): Measured {
  const opts = optionsFor(s);
  const found = runOnce(s, opts);
  if (found !== s.calls) throw new Error(`sample ${s.id}: ${found} calls extracted, expected ${s.calls}`);
  // Warm-up: the JIT optimises after many runs.
  const warmEnd = Date.now() + Math.max(50, seconds * 200);
  while (Date.now() < warmEnd) for (let i = 0; i < 200; i++) runOnce(s, opts);
  const perRound: number[] = [];
  let answers = 0;
  for (let r = 0; r < ROUNDS; r++) {
    const end = Date.now() + (seconds * 1000) / ROUNDS;
    let n = 0;
    const c0 = cpuUs();
    while (Date.now() < end) {
      for (let i = 0; i < 200; i++) runOnce(s, opts);
      n += 200;
    }
    perRound.push((cpuUs() - c0) / n);
    answers += n;
  }
  return { sample: s, us: percentile(perRound, 50), min: Math.min(...perRound), max: Math.max(...perRound), answers };
}

interface BridgeRow {
  scenario: string;
  cpuMs: number;
}

/** The newest `*-openai-upstream.md` (not a profile) and its bridge CPU per request for the streaming scenarios. */
function bridgeStreamingCpu(resultsDir: string): { file: string; rows: BridgeRow[] } | null {
  let files: string[];
  try {
    files = readdirSync(resultsDir)
      .filter((f) => /^\d{4}-\d{2}-\d{2}-openai-upstream\.md$/.test(f))
      .sort();
  } catch {
    return null;
  }
  const file = files[files.length - 1];
  if (!file) return null;
  const rows: BridgeRow[] = [];
  let scenario = "";
  for (const line of readFileSync(path.join(resultsDir, file), "utf8").split("\n")) {
    if (!line.startsWith("|")) continue;
    const cells = line.split("|").map((c) => c.trim());
    if (cells[1]) scenario = cells[1];
    const m = cells[2] === "bridge" ? /([\d.]+) ms/.exec(cells[cells.length - 2] ?? "") : null;
    if (m && /streaming/.test(scenario) && !/non-streaming/.test(scenario))
      rows.push({ scenario, cpuMs: Number(m[1]) });
  }
  return rows.length ? { file, rows } : null;
}

const us = (v: number): string => (v < 10 ? v.toFixed(2) : v.toFixed(1));
const pct = (v: number): string => `${(v * 100).toFixed(v < 0.01 ? 2 : 1)}%`;

const suite: BenchSuite = {
  name: "toolcalls",
  description:
    "text tool-call extractor: CPU per streamed answer (prose and every model family) and its share of the bridge's streaming CPU",
  async run(ctx: BenchContext): Promise<SuiteResult> {
    const seconds = Math.min(1, ctx.limits.maxSeconds / 10);
    const measured: Measured[] = [];
    for (const s of samples()) {
      ctx.log(`toolcalls: ${s.id}`);
      measured.push(measure(s, seconds));
    }
    const prose = measured.find((m) => m.sample.id === "prose")!;
    const bridge = bridgeStreamingCpu(ctx.resultsDir);
    const targets: TargetCheck[] = [];
    const md: string[] = [];

    md.push("## Set-up", "");
    md.push(
      `- In this process (no server): each answer is cut into ${CHUNKS} pieces (the prose sample exactly as the fake upstream streams it, one word per chunk) and pushed through a new \`ToolCallExtractor\` with the bridge's options: the OpenClaw-size request's 20 tools offered (plus \`python\` for the python_tag sample), \`stripSpecialTokens: true\`, \`maxCalls: 65\`, the bridge's id maker. Each sample is checked first (the expected number of calls).`,
      `- CPU: \`process.cpuUsage()\` (user + system) over ${ROUNDS} rounds of ${((seconds * 1000) / ROUNDS).toFixed(0)} ms after a warm-up; the table gives the median round (min–max in brackets), per answer.`,
      `- The bridge's streaming CPU per request is read from the newest \`openai\` results file, not measured here${bridge ? ` (\`bench/results/${bridge.file}\`)` : ""}. Its OpenClaw-size scenario offers 20 tools, so the bridge already ran this extractor on that scenario's answer; the small-request scenarios offer none (no extraction).`,
      "",
    );

    md.push("## Extractor CPU per streamed answer (20 chunks)", "");
    md.push(
      table(
        ["reply", "bytes", "calls", "CPU / answer (µs)", "answers measured"],
        measured.map((m) => [
          m.sample.label,
          String(m.sample.pieces.join("").length),
          String(m.sample.calls),
          `${us(m.us)} (${us(m.min)}–${us(m.max)})`,
          m.answers.toLocaleString("en-US"),
        ]),
      ),
      "",
    );

    md.push("## What extraction adds to the bridge's streaming CPU per request", "");
    if (bridge) {
      const rows = bridge.rows.map((r) => [
        r.scenario,
        `${(r.cpuMs * 1000).toFixed(0)} µs`,
        `${us(prose.us)} µs`,
        pct(prose.us / (r.cpuMs * 1000)),
      ]);
      md.push(
        table(
          ["bridge scenario (openai suite)", "bridge CPU / request", "extraction on prose, no call", "share"],
          rows,
        ),
        "",
      );
      const worst = bridge.rows.reduce((a, b) => (b.cpuMs < a.cpuMs ? b : a));
      const share = prose.us / (worst.cpuMs * 1000);
      const families = measured.filter((m) => m.sample.calls > 0);
      const maxFamily = families.reduce((a, b) => (b.us > a.us ? b : a));
      md.push(
        `The share is taken against the CHEAPEST streamed request of that run (${worst.scenario}, ${(worst.cpuMs * 1000).toFixed(0)} µs), so it is the largest share. A reply with a call costs at most ${us(maxFamily.us)} µs (${maxFamily.sample.label}): ${pct(maxFamily.us / (worst.cpuMs * 1000))} of it.`,
        "",
      );
      targets.push({
        name: `prose with no call: extractor CPU per streamed answer / bridge streaming CPU per request (${worst.scenario})`,
        goal: `< ${pct(TARGET_SHARE)}`,
        measured: `${pct(share)} (${us(prose.us)} µs of ${(worst.cpuMs * 1000).toFixed(0)} µs)`,
        pass: share < TARGET_SHARE,
      });
    } else {
      md.push(
        "No `openai` results file in bench/results/: run `npm run bench -- --suite openai` first to get the bridge's streaming CPU per request.",
        "",
      );
      targets.push({
        name: "prose with no call: share of the bridge's streaming CPU per request",
        goal: `< ${pct(TARGET_SHARE)}`,
        measured: "no openai results file",
        pass: false,
      });
    }
    return { markdown: md.join("\n"), targets };
  },
};

export default suite;
