/**
 * Suite "doors" (issue 29): what each turn-taking door costs the bridge. The same fake upstream
 * answer (20 chunks, bench/fake-upstream.ts) is asked for through `/v1/chat/completions`,
 * `/v1/responses` and `/v1/messages`, each in its own API (bench/suites/doors/apis.ts), streaming,
 * at concurrency 1 and 32, through ONE bridge (an `openai` backend in passthrough mode on the fake,
 * an API key). Measured: the bridge process's CPU per request of each door, warm-up excluded, and
 * its ratio to Chat Completions' at the same concurrency. Target: every door within 1.3× of Chat
 * Completions'.
 *
 * The doors alternate in rounds (each round runs every door once, in an order that rotates) so that
 * drift on a busy machine hits all of them alike; every path is warmed up first. A door the bridge
 * does not serve yet (Fastify's 404) or that answers wrongly is reported as such, not measured.
 * With `--profile` the bridge runs under `node --cpu-prof`; its samples are split by the windows in
 * which each door ran (bench/suites/doors/windows.ts), so each door's time is read against Chat
 * Completions' by part of the path and by function.
 */
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { request } from "undici";
import { stringify } from "yaml";
import { entryFile } from "../../scripts/build-state.mjs";
import { FAKE_MODEL } from "../fake-upstream.js";
import { loadClient, mergeResults, runLoad, type LoadResult } from "../load.js";
import { cpuSplit, memory, startService, type Memory, type Service } from "../procs.js";
import { summariseProfile } from "../profile.js";
import { int, mb, ms, percentile, table } from "../stats.js";
import type { BenchContext, BenchSuite, SuiteResult, TargetCheck } from "../suite.js";
import { CHUNKS, DOOR_APIS, doorState, type DoorApi, type DoorId, type DoorState } from "./doors/apis.js";
import { doorPart } from "./doors/parts.js";
import { compareProfiles, nowUs, profileByWindow, type Window } from "./doors/windows.js";

const BRIDGE_MODEL = "bench/local";
const API_KEY = "bench-doors-key-0123456789";
const CONCURRENCIES = [1, 32] as const;
/** Rounds per concurrency; each runs every door once, the order rotating (6 = each of 3 doors twice in each place). */
const ROUNDS = 6;
/** Requests (× `--warmup`, 1000 by default) that warm each door up before its concurrency is measured. */
const WARMUP_FACTOR = 5;
/** c=32 measures this many times `--requests` (thousands of requests per second; `--seconds` still bounds it). */
const THROUGHPUT_FACTOR = 10;
/** A door's CPU per request may be at most this multiple of Chat Completions' (issue 29). */
const RATIO_GOAL = 1.3;
const BASE: DoorId = "chat";

const scenarioId = (door: DoorId, c: number) => `${door}-c${c}`;
const ALL_SCENARIOS = CONCURRENCIES.flatMap((c) => DOOR_APIS.map((d) => scenarioId(d.id, c)));

/** One door's runs at one concurrency. */
interface DoorRuns {
  api: DoorApi;
  parts: LoadResult[];
  /** Bridge CPU (ms) and requests sent, per round (NaN when the door did not run that round). */
  cpu: number[];
  sys: number[];
  sent: number[];
  /** Set when a run failed its full check (the door is left out of the later rounds). */
  failed?: string;
}

interface ConcurrencyResult {
  concurrency: number;
  doors: DoorRuns[];
}

const p50 = (xs: number[]) => percentile(xs, 50);
const p99 = (xs: number[]) => percentile(xs, 99);
const sum = (xs: number[]) => xs.reduce((a, b) => a + (Number.isFinite(b) ? b : 0), 0);
const cpuPerReq = (d: DoorRuns) => sum(d.cpu) / sum(d.sent);

async function startFake(ctx: BenchContext): Promise<Service> {
  return startService({
    name: "fake upstream",
    command: process.execPath,
    args: ["--import", "tsx", path.join(ctx.root, "bench", "fake-upstream.ts"), "--chunks", String(CHUNKS)],
    cwd: ctx.root,
    readyPattern: /PORT (\d+)/,
  });
}

async function startBridge(ctx: BenchContext, configFile: string, profileDir?: string): Promise<Service> {
  return startService({
    name: "clawbridge",
    command: process.execPath,
    args: [
      ...(profileDir ? ["--cpu-prof", "--cpu-prof-dir", profileDir] : []),
      path.join(ctx.root, "bin", "clawbridge.js"),
      "serve",
      "--config",
      configFile,
      "--port",
      "0",
    ],
    cwd: ctx.root,
    readyPattern: /listening on (http:\/\/[^\s]+)/,
  });
}

/** One request to a door: is it served, and is its answer right? */
async function probe(origin: string, api: DoorApi): Promise<DoorState> {
  try {
    const res = await request(`${origin}${api.path}`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-session-id": "bench-probe", ...api.headers(API_KEY) },
      body: api.body(BRIDGE_MODEL),
      headersTimeout: 30_000,
      bodyTimeout: 30_000,
    });
    return doorState(api, res.statusCode, await res.body.text());
  } catch (err) {
    return { kind: "broken", detail: `request failed: ${(err as Error).message}` };
  }
}

const suite: BenchSuite = {
  name: "doors",
  description:
    "the same streamed answer through /v1/chat/completions, /v1/responses and /v1/messages: bridge CPU per request of each door",
  async run(ctx: BenchContext): Promise<SuiteResult> {
    const unknown = (ctx.scenarios ?? []).filter((id) => !ALL_SCENARIOS.includes(id));
    if (unknown.length)
      throw new Error(`unknown scenario ${unknown.join(", ")}; the doors suite has ${ALL_SCENARIOS.join(", ")}`);
    const chosen = (door: DoorId, c: number) => !ctx.scenarios || ctx.scenarios.includes(scenarioId(door, c));
    const tmp = mkdtempSync(path.join(tmpdir(), "cb-bench-doors-"));
    const profileDir = ctx.profile ? path.join(tmp, "profile") : undefined;
    let fake: Service | undefined;
    let bridge: Service | undefined;
    try {
      fake = await startFake(ctx);
      const fakeOrigin = `http://127.0.0.1:${fake.ready}`;
      const configFile = path.join(tmp, "clawbridge.yaml");
      writeFileSync(
        configFile,
        stringify({
          server: { host: "127.0.0.1", port: 0, maxConcurrent: 64, maxQueue: 256, apiKeys: [API_KEY] },
          logging: { level: "warn" },
          dataDir: path.join(tmp, "data"),
          backends: { local: { type: "openai", baseUrl: `${fakeOrigin}/v1`, maxConnections: 64 } },
          models: [{ id: BRIDGE_MODEL, backend: "local", model: FAKE_MODEL }],
        }),
      );
      // bin/clawbridge.js runs dist/ only while it is current with src/ (others may edit the tree).
      const how = entryFile(ctx.root, "ops/commands/main").endsWith(".ts")
        ? "**its TypeScript sources through tsx** (dist/ was not current with src/ when it started; `npm run bench` builds it first)"
        : "the compiled build in dist/";
      bridge = await startBridge(ctx, configFile, profileDir);
      const origin = bridge.ready;
      ctx.log(
        `fake upstream pid ${fake.pid} at ${fakeOrigin}; bridge pid ${bridge.pid} at ${origin}${profileDir ? " (under --cpu-prof)" : ""}`,
      );
      const memStart: Memory = memory(bridge.pid);

      // Which doors are there at all.
      const states = new Map<DoorId, DoorState>();
      for (const api of DOOR_APIS) {
        if (!CONCURRENCIES.some((c) => chosen(api.id, c))) continue;
        const state = await probe(origin, api);
        states.set(api.id, state);
        ctx.log(`${api.path}: ${state.kind === "ready" ? "answers correctly" : `${state.kind}: ${state.detail}`}`);
      }

      const results: ConcurrencyResult[] = [];
      const windows: Window[] = [];
      for (const c of CONCURRENCIES) {
        const apis = DOOR_APIS.filter((a) => chosen(a.id, c) && states.get(a.id)?.kind === "ready");
        if (!apis.length) continue;
        const doors: DoorRuns[] = apis.map((api) => ({ api, parts: [], cpu: [], sys: [], sent: [] }));
        const pools = new Map(apis.map((a) => [a.id, loadClient(origin, c)]));
        const spec = (d: DoorRuns) => ({
          origin,
          path: d.api.path,
          body: d.api.body(BRIDGE_MODEL),
          headers: d.api.headers(API_KEY),
          concurrency: c,
          sessionPerWorker: true,
          check: (status: number, body: string) => d.api.check(status, body),
          verify: (status: number, body: string) => d.api.verify(status, body),
        });
        try {
          // Each door warmed up alike, outside the measurement (the JIT optimises after many runs).
          for (const d of doors) {
            try {
              await runLoad(
                { ...spec(d), warmup: WARMUP_FACTOR * ctx.limits.warmup, maxRequests: 0, maxSeconds: 30 },
                pools.get(d.api.id),
              );
            } catch (err) {
              d.failed = `warm-up: ${(err as Error).message}`;
            }
          }
          // The doors alternate in rounds, the order rotating, so drift hits them alike.
          for (let round = 0; round < ROUNDS; round++) {
            const order = doors.map((_, i) => doors[(i + round) % doors.length]!);
            for (const d of doors) {
              d.cpu[round] = NaN;
              d.sys[round] = NaN;
              d.sent[round] = NaN;
            }
            for (const d of order) {
              if (d.failed) continue;
              // Paths are warm already: a round's own warm-up opens connections and checks one answer in full.
              const warmup = Math.min(ctx.limits.warmup, 2 * c);
              const from = nowUs();
              const b0 = cpuSplit(bridge.pid);
              let r: LoadResult;
              try {
                r = await runLoad(
                  {
                    ...spec(d),
                    warmup,
                    maxRequests: Math.ceil(((c > 1 ? THROUGHPUT_FACTOR : 1) * ctx.limits.maxRequests) / ROUNDS),
                    maxSeconds: ctx.limits.maxSeconds / ROUNDS,
                  },
                  pools.get(d.api.id),
                );
              } catch (err) {
                d.failed = `round ${round + 1}: ${(err as Error).message}`;
                continue;
              }
              const b1 = cpuSplit(bridge.pid);
              windows.push({ key: `${d.api.id} c=${c}`, fromUs: from, toUs: nowUs() });
              d.parts.push(r);
              d.cpu[round] = b1.user + b1.sys - b0.user - b0.sys;
              d.sys[round] = b1.sys - b0.sys;
              // CPU is read around whole runs (their warm-up included): divide by every request sent.
              d.sent[round] = r.requests + r.errors + warmup;
            }
          }
        } finally {
          await Promise.all([...pools.values()].map((p) => p.close().catch(() => p.destroy())));
        }
        for (const d of doors) {
          if (d.failed) ctx.log(`${d.api.path} c=${c}: FAILED ${d.failed}`);
          else {
            const m = mergeResults(d.parts);
            ctx.log(
              `${d.api.path} c=${c}: ${int(m.rps)} req/s, ${ms(cpuPerReq(d))} ms bridge CPU/req${m.errors ? `, ${m.errors} errors (${m.firstError})` : ""}`,
            );
          }
        }
        results.push({ concurrency: c, doors });
      }
      const memEnd = memory(bridge.pid);
      await bridge.stop(10_000);

      let profileMd = "";
      if (profileDir) {
        const files = readdirSync(profileDir).filter((f) => f.endsWith(".cpuprofile"));
        if (!files.length) profileMd = "(the bridge wrote no .cpuprofile — did it exit cleanly?)";
        else {
          const file = path.join(profileDir, files[0]!);
          const byWindow = profileByWindow(file, ctx.root, windows, doorPart);
          const sections: string[] = [];
          for (const r of results) {
            const keys = r.doors.filter((d) => !d.failed).map((d) => `${d.api.id} c=${r.concurrency}`);
            const requests = new Map(
              r.doors.filter((d) => !d.failed).map((d) => [`${d.api.id} c=${r.concurrency}`, sum(d.sent)]),
            );
            sections.push(
              `### Streaming, c=${r.concurrency}`,
              "",
              compareProfiles(keys, `${BASE} c=${r.concurrency}`, byWindow, requests),
              "",
            );
          }
          profileMd = [
            ...sections,
            "### The whole run (start-up and warm-up included)",
            "",
            summariseProfile(
              file,
              ctx.root,
              25,
              doorPart,
              "The bridge's CPU by part of the path (each sample counted once, in the innermost part of its stack; bench/suites/doors/parts.ts)",
            ).markdown,
          ].join("\n");
        }
      }
      return build(ctx, how, states, results, { start: memStart, end: memEnd }, profileMd);
    } finally {
      await bridge?.stop(5000);
      await fake?.stop(5000);
      rmSync(tmp, { recursive: true, force: true });
    }
  },
};

/** A door's CPU per request ÷ Chat Completions', pooled and per round (min–max). */
function ratios(d: DoorRuns, base: DoorRuns): { pooled: number; min: number; max: number } {
  const perRound = d.cpu
    .map((cpu, i) => cpu / d.sent[i]! / (base.cpu[i]! / base.sent[i]!))
    .filter((x) => Number.isFinite(x));
  return {
    pooled: cpuPerReq(d) / cpuPerReq(base),
    min: perRound.length ? Math.min(...perRound) : NaN,
    max: perRound.length ? Math.max(...perRound) : NaN,
  };
}

function build(
  ctx: BenchContext,
  how: string,
  states: Map<DoorId, DoorState>,
  results: ConcurrencyResult[],
  mem: { start: Memory; end: Memory },
  profileMd: string,
): SuiteResult {
  const targets: TargetCheck[] = [];
  const rows: string[][] = [];
  for (const c of CONCURRENCIES) {
    const r = results.find((x) => x.concurrency === c);
    const base = r?.doors.find((d) => d.api.id === BASE && !d.failed);
    for (const api of DOOR_APIS) {
      if (!ctx.scenarios || ctx.scenarios.includes(scenarioId(api.id, c))) {
        const state = states.get(api.id);
        const d = r?.doors.find((x) => x.api.id === api.id);
        const name = `${api.label} CPU / req ÷ Chat Completions' (streaming, c=${c})`;
        const goal = `≤ ${RATIO_GOAL}×`;
        if (!d || d.failed || state?.kind !== "ready") {
          const why =
            state && state.kind !== "ready"
              ? `${state.kind === "absent" ? "not served" : "answers wrongly"}: ${state.detail}`
              : `failed: ${d?.failed ?? "not run"}`;
          rows.push([`c=${c}`, api.label, why, "", "", "", "", "", ""]);
          if (api.id !== BASE) targets.push({ name, goal, measured: why, pass: false });
          continue;
        }
        const m = mergeResults(d.parts);
        const cpu = cpuPerReq(d);
        const sysShare = sum(d.sys) / sum(d.cpu);
        const ratio = base ? ratios(d, base) : undefined;
        rows.push([
          `c=${c}`,
          api.label,
          int(m.requests),
          m.errors ? `${m.errors} (${(m.firstError ?? "").slice(0, 60)})` : "0",
          int(m.rps),
          `${ms(p50(m.ttfb))} / ${ms(p99(m.ttfb))}`,
          `${ms(p50(m.total))} / ${ms(p99(m.total))}`,
          `${ms(cpu)} ms (${Number.isFinite(sysShare) ? (100 * sysShare).toFixed(0) : "–"}% system)`,
          ratio ? `${ratio.pooled.toFixed(2)}× (${ratio.min.toFixed(2)}–${ratio.max.toFixed(2)})` : "–",
        ]);
        if (api.id === BASE) continue;
        targets.push(
          ratio
            ? {
                name,
                goal,
                measured: `${ratio.pooled.toFixed(2)}× (${ms(cpu)} vs ${ms(cpuPerReq(base!))} ms; rounds ${ratio.min.toFixed(2)}–${ratio.max.toFixed(2)}×)${m.errors ? `; ${m.errors} errors` : ""}`,
                pass: ratio.pooled <= RATIO_GOAL && m.errors === 0,
              }
            : { name, goal, measured: "Chat Completions was not measured: no ratio", pass: false },
        );
      }
    }
  }
  const absent = [...states.entries()].flatMap(([id, s]) => (s.kind === "ready" ? [] : [{ id, ...s }]));
  const { warmup, maxRequests, maxSeconds } = ctx.limits;
  const markdown = [
    "## Set-up",
    "",
    `- Fake upstream (bench/fake-upstream.ts, its own process): every streamed answer is ${CHUNKS} content chunks + finish + usage + [DONE], precomputed, back-to-back, no delay.`,
    `- Bridge: \`node bin/clawbridge.js serve --config <tmp>.yaml --port 0\` (its own process; it ran ${how}), one \`type: openai\` backend on the fake (passthrough, its default), \`server.apiKeys\` set, \`logging.level: warn\`, \`server.maxConcurrent: 64\`. One bridge serves every door.`,
    "- The same question in each door's API, streamed (bench/suites/doors/apis.ts): Chat Completions `{model, stream, messages, max_completion_tokens}` with a bearer key; Responses `{model, input, stream, max_output_tokens}` with a bearer key (`store` left at its default, true: every response is kept in the response store); Messages `{model, max_tokens, messages, stream}` with `x-api-key` and `anthropic-version`. Each worker sends its own `x-session-id`.",
    "- Checks: every answer ends as its API ends a completed stream (chat: `[DONE]`; responses: a `response.completed` event; messages: `message_stop`) with no error frame; the first answer of every run is parsed in full: the text joined from the API's own deltas (`delta.content`, `response.output_text.delta`, `text_delta`) is the fake's exact text in 20 deltas, plus the API's framing (sequence numbers, `response.completed`'s output, `stop_reason`).",
    `- Load: undici Pool, keep-alive, one connection per worker, closed loop. Per concurrency, each door is first warmed up with ${WARMUP_FACTOR * warmup} requests outside the measurement, then measured in ${ROUNDS} rounds; each round runs every door once (2 × concurrency warm-up requests, then min(${Math.ceil(maxRequests / ROUNDS)} requests (${Math.ceil((THROUGHPUT_FACTOR * maxRequests) / ROUNDS)} at c=32), ${(maxSeconds / ROUNDS).toFixed(2)} s)), in an order that rotates from round to round, so background load hits every door alike.`,
    "- bridge CPU / req: user + system CPU of the bridge process (/proc/<pid>/stat) over each run, per request sent (the share spent in the kernel in brackets). The ratio is the door's CPU per request ÷ Chat Completions' at the same concurrency, pooled over the rounds; in brackets the lowest and highest ratio of a single round (the noise).",
    "",
    ...(absent.length
      ? [
          "## Doors not measured",
          "",
          ...absent.map(
            (s) => `- **${s.id}**: ${s.kind === "absent" ? "not served" : "answers wrongly"} — ${s.detail}`,
          ),
          "",
        ]
      : []),
    "## Results (streaming)",
    "",
    table(
      [
        "concurrency",
        "door",
        "requests",
        "errors",
        "req/s",
        "first byte p50 / p99 (ms)",
        "full response p50 / p99 (ms)",
        "bridge CPU / req",
        "÷ Chat Completions (rounds min–max)",
      ],
      rows,
    ),
    "",
    "## Memory",
    "",
    table(
      ["bridge process", "VmRSS", "VmHWM (peak)"],
      [
        ["after start-up", mb(mem.start.rssKb), mb(mem.start.hwmKb)],
        ["after the suite", mb(mem.end.rssKb), mb(mem.end.hwmKb)],
      ],
    ),
    ...(profileMd
      ? [
          "",
          "## CPU profile of the bridge (node --cpu-prof; timings above include the profiler's overhead)",
          "",
          profileMd,
        ]
      : []),
  ].join("\n");
  return { markdown, targets };
}

export default suite;
