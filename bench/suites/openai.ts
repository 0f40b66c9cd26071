/**
 * Suite "openai": the `type: openai` upstream backend. The same load goes straight to a fake
 * OpenAI-compatible upstream ("direct") and through clawbridge to that upstream ("bridge"), side by
 * side in one run. Fake upstream, bridge and load generator are three processes.
 */
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { stringify } from "yaml";
import { openclawRequest } from "../../testkit/openclaw-request.js";
import { answerText, FAKE_MODEL } from "../fake-upstream.js";
import { loadClient, mergeResults, runLoad, type LoadResult } from "../load.js";
import { cpuMs, cpuSplit, memory, startService, type Memory, type Service } from "../procs.js";
import { summariseProfile } from "../profile.js";
import { bridgePart } from "./openai/parts.js";
import type { BenchContext, BenchSuite, SuiteResult, TargetCheck } from "../suite.js";
import { deltaMs, int, mb, ms, percentile, table } from "../stats.js";

const CHUNKS = 20;
/** Direct and bridge alternate this many times per scenario (each round a share of the limits). */
const ROUNDS = 3;
const BRIDGE_MODEL = "bench/local";
const TEXT = answerText(CHUNKS);

interface Scenario {
  id: string;
  label: string;
  stream: boolean;
  concurrency: number;
  /** Request body for a model name. */
  body(model: string): string;
  /**
   * The minimal proxy measured in the same rounds as direct and the bridge: `json`
   * (bench/minimal-proxy.mjs) or `stream` (bench/minimal-stream-proxy.mjs).
   */
  reference?: ReferenceKind;
}

type ReferenceKind = "json" | "stream";

const small = (stream: boolean) => (model: string) =>
  JSON.stringify({
    model,
    stream,
    messages: [
      { role: "system", content: "You are terse." },
      { role: "user", content: "Tell me about the fox." },
    ],
    max_completion_tokens: 256,
  });

const openclaw = (model: string) =>
  JSON.stringify(openclawRequest(model, [{ role: "user", text: "Tell me about the fox." }], "2026.5"));

const SCENARIOS: Scenario[] = [
  { id: "stream-c1", label: "streaming, c=1", stream: true, concurrency: 1, body: small(true), reference: "stream" },
  { id: "stream-c32", label: "streaming, c=32", stream: true, concurrency: 32, body: small(true), reference: "stream" },
  { id: "json-c1", label: "non-streaming, c=1", stream: false, concurrency: 1, body: small(false) },
  {
    id: "json-c32",
    label: "non-streaming, c=32",
    stream: false,
    concurrency: 32,
    body: small(false),
    reference: "json",
  },
  {
    id: "openclaw-c1",
    label: `OpenClaw-size request (${(openclaw("m").length / 1024).toFixed(0)} KB, 20 tools), streaming, c=1`,
    stream: true,
    concurrency: 1,
    body: openclaw,
  },
];

function sseContents(body: string): string[] {
  const out: string[] = [];
  for (const block of body.split("\n\n")) {
    if (!block.startsWith("data: ") || block === "data: [DONE]") continue;
    const obj = JSON.parse(block.slice(6)) as { choices?: Array<{ delta?: { content?: string } }> };
    const c = obj.choices?.[0]?.delta?.content;
    if (c) out.push(c);
  }
  return out;
}

const checkStream = (status: number, body: string) =>
  status !== 200
    ? `HTTP ${status}: ${body.slice(0, 200)}`
    : !body.endsWith("data: [DONE]\n\n") || body.includes('{"error"')
      ? `bad stream: ${body.slice(-200)}`
      : undefined;
const expectJson = `"content":${JSON.stringify(TEXT)}`;
const checkJson = (status: number, body: string) =>
  status !== 200
    ? `HTTP ${status}: ${body.slice(0, 200)}`
    : body.includes(expectJson)
      ? undefined
      : `bad body: ${body.slice(0, 200)}`;

function verifyStream(status: number, body: string): string | undefined {
  const bad = checkStream(status, body);
  if (bad) return bad;
  const parts = sseContents(body);
  if (parts.join("") !== TEXT) return `streamed text differs: ${JSON.stringify(parts.join(""))}`;
  if (parts.length !== CHUNKS) return `${parts.length} content deltas, expected ${CHUNKS}`;
  return undefined;
}
function verifyJson(status: number, body: string): string | undefined {
  const bad = checkJson(status, body);
  if (bad) return bad;
  const j = JSON.parse(body) as { choices?: Array<{ message?: { content?: string } }> };
  return j.choices?.[0]?.message?.content === TEXT ? undefined : `content differs: ${body.slice(0, 200)}`;
}

interface Row {
  scenario: Scenario;
  direct: LoadResult;
  bridge: LoadResult;
  /** Bridge process CPU per measured request (ms), warm-up excluded. */
  bridgeCpuPerReq: number;
  /** Share of the bridge's CPU spent in the kernel. */
  bridgeSysShare: number;
  upstreamCpuPerReqDirect: number;
  upstreamCpuPerReqBridge: number;
  /**
   * The minimal Node.js proxy of the scenario (bench/minimal-proxy.mjs for non-streaming c=32,
   * bench/minimal-stream-proxy.mjs for streaming c=1 and c=32), measured in the same rounds.
   */
  reference?: { kind: ReferenceKind; result: LoadResult; cpuPerReq: number; sysShare: number };
}

/** The scenario the throughput target is about; the minimal proxy runs in it as a reference. */
const REFERENCE_SCENARIO = "json-c32";
/**
 * Requests (× `--warmup`, so 5000 by default) that warm up every path of the reference scenario
 * (direct, bridge, minimal proxy) before it is measured: the JIT optimises a process's code only after it has run many times,
 * and each path must be compared at its steady state.
 */
const REFERENCE_WARMUP_FACTOR = 25;
/**
 * Requests (× `--warmup`, so 1000 by default) that warm up both paths of every other scenario
 * before it is measured. 200 were too few for the JIT: with `--requests 300`, the first scenario
 * used to measure a bridge whose streaming path was still half cold.
 */
const SCENARIO_WARMUP_FACTOR = 5;
/**
 * Throughput scenarios (concurrency > 1) measure this many times `--requests`: at tens of
 * thousands of requests per second, 3000 requests last a few tens of milliseconds, too short for
 * a stable rate. `--seconds` still bounds them.
 */
const THROUGHPUT_FACTOR = 10;

/** The bridge's CPU per request may be at most this multiple of the minimal proxy's (issue 19). */
const CPU_MULTIPLE_GOAL = 1.5;

const p50 = (xs: number[]) => percentile(xs, 50);
const p99 = (xs: number[]) => percentile(xs, 99);

async function startFake(ctx: BenchContext): Promise<Service> {
  return startService({
    name: "fake upstream",
    command: process.execPath,
    args: ["--import", "tsx", path.join(ctx.root, "bench", "fake-upstream.ts"), "--chunks", String(CHUNKS)],
    cwd: ctx.root,
    readyPattern: /PORT (\d+)/,
  });
}

const REFERENCE_FILE: Record<ReferenceKind, string> = { json: "minimal-proxy.mjs", stream: "minimal-stream-proxy.mjs" };

async function startReference(ctx: BenchContext, kind: ReferenceKind, upstream: string): Promise<Service> {
  return startService({
    name: kind === "json" ? "minimal proxy" : "minimal streaming proxy",
    command: process.execPath,
    args: [path.join(ctx.root, "bench", REFERENCE_FILE[kind]), "--upstream", upstream],
    cwd: ctx.root,
    readyPattern: /PORT (\d+)/,
  });
}

async function startBridge(
  ctx: BenchContext,
  configFile: string,
  profileDir?: string,
): Promise<{ service: Service; origin: string }> {
  const service = await startService({
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
  return { service, origin: service.ready };
}

const suite: BenchSuite = {
  name: "openai",
  resultSlug: "openai-upstream",
  description: "OpenAI-compatible upstream backend: direct vs through clawbridge (latency, req/s, memory)",
  async run(ctx: BenchContext): Promise<SuiteResult> {
    const unknown = (ctx.scenarios ?? []).filter((id) => !SCENARIOS.some((sc) => sc.id === id));
    if (unknown.length)
      throw new Error(
        `unknown scenario ${unknown.join(", ")}; the openai suite has ${SCENARIOS.map((sc) => sc.id).join(", ")}`,
      );
    const tmp = mkdtempSync(path.join(tmpdir(), "cb-bench-"));
    const profileDir = ctx.profile ? path.join(tmp, "profile") : undefined;
    let fake: Service | undefined;
    let bridge: Service | undefined;
    const references: Partial<Record<ReferenceKind, Service>> = {};
    try {
      fake = await startFake(ctx);
      const fakeOrigin = `http://127.0.0.1:${fake.ready}`;
      const configFile = path.join(tmp, "clawbridge.yaml");
      writeFileSync(
        configFile,
        stringify({
          server: { host: "127.0.0.1", port: 0, maxConcurrent: 64, maxQueue: 256 },
          logging: { level: "warn" },
          dataDir: path.join(tmp, "data"),
          backends: { local: { type: "openai", baseUrl: `${fakeOrigin}/v1`, maxConnections: 64 } },
          models: [{ id: BRIDGE_MODEL, backend: "local", model: FAKE_MODEL }],
        }),
      );
      const started = await startBridge(ctx, configFile, profileDir);
      bridge = started.service;
      ctx.log(
        `fake upstream pid ${fake.pid} at ${fakeOrigin}; bridge pid ${bridge.pid} at ${started.origin}${profileDir ? " (under --cpu-prof)" : ""}`,
      );
      const memStart: Memory = memory(bridge.pid);
      references.json = await startReference(ctx, "json", fakeOrigin);
      references.stream = await startReference(ctx, "stream", fakeOrigin);

      const rows: Row[] = [];
      let memAfterWarm: Memory | undefined;
      for (const sc of SCENARIOS.filter((x) => !ctx.scenarios || ctx.scenarios.includes(x.id))) {
        const directPool = loadClient(fakeOrigin, sc.concurrency);
        const bridgePool = loadClient(started.origin, sc.concurrency);
        const reference = sc.reference ? references[sc.reference] : undefined;
        const referenceOrigin = reference ? `http://127.0.0.1:${reference.ready}` : "";
        const referencePool = reference ? loadClient(referenceOrigin, sc.concurrency) : undefined;
        const parts = { direct: [] as LoadResult[], bridge: [] as LoadResult[], reference: [] as LoadResult[] };
        let referenceCpu = 0;
        let referenceSys = 0;
        let sentReference = 0;
        let bridgeCpu = 0;
        let bridgeSys = 0;
        let fakeCpuDirect = 0;
        let fakeCpuBridge = 0;
        let sentDirect = 0;
        let sentBridge = 0;
        try {
          {
            // Every path of the scenario is warmed up alike, outside the measurement and its CPU count.
            const requests =
              ctx.limits.warmup * (sc.id === REFERENCE_SCENARIO ? REFERENCE_WARMUP_FACTOR : SCENARIO_WARMUP_FACTOR);
            const warm = (origin: string, model: string, pool: ReturnType<typeof loadClient>) =>
              runLoad(
                {
                  origin,
                  path: "/v1/chat/completions",
                  body: sc.body(model),
                  concurrency: sc.concurrency,
                  warmup: requests,
                  maxRequests: 0,
                  maxSeconds: 30,
                  sessionPerWorker: true,
                  check: sc.stream ? checkStream : checkJson,
                },
                pool,
              );
            await warm(fakeOrigin, FAKE_MODEL, directPool);
            await warm(started.origin, BRIDGE_MODEL, bridgePool);
            if (referencePool) await warm(referenceOrigin, BRIDGE_MODEL, referencePool);
          }
          // Direct and bridge alternate in ROUNDS rounds so that both see the same background load.
          for (let round = 0; round < ROUNDS; round++) {
            // The paths are warm already: a round's own warm-up only opens its connections and
            // checks the first answer in full.
            const warmup = Math.min(ctx.limits.warmup, 2 * sc.concurrency);
            const base = {
              warmup,
              maxRequests: Math.ceil(((sc.concurrency > 1 ? THROUGHPUT_FACTOR : 1) * ctx.limits.maxRequests) / ROUNDS),
              maxSeconds: ctx.limits.maxSeconds / ROUNDS,
              concurrency: sc.concurrency,
              sessionPerWorker: true,
              check: sc.stream ? checkStream : checkJson,
              verify: sc.stream ? verifyStream : verifyJson,
              path: "/v1/chat/completions",
            };
            const f0 = cpuMs(fake.pid);
            const d = await runLoad({ ...base, origin: fakeOrigin, body: sc.body(FAKE_MODEL) }, directPool);
            const f1 = cpuMs(fake.pid);
            const b0 = cpuSplit(bridge.pid);
            const b = await runLoad({ ...base, origin: started.origin, body: sc.body(BRIDGE_MODEL) }, bridgePool);
            const b1 = cpuSplit(bridge.pid);
            const f2 = cpuMs(fake.pid);
            parts.direct.push(d);
            parts.bridge.push(b);
            fakeCpuDirect += f1 - f0;
            fakeCpuBridge += f2 - f1;
            bridgeCpu += b1.user + b1.sys - b0.user - b0.sys;
            bridgeSys += b1.sys - b0.sys;
            // CPU is read around whole runs (warm-up included): divide by every request sent.
            sentDirect += d.requests + d.errors + warmup;
            sentBridge += b.requests + b.errors + warmup;
            if (referencePool && reference) {
              const r0 = cpuSplit(reference.pid);
              const r = await runLoad({ ...base, origin: referenceOrigin, body: sc.body(BRIDGE_MODEL) }, referencePool);
              const r1 = cpuSplit(reference.pid);
              referenceCpu += r1.user + r1.sys - r0.user - r0.sys;
              referenceSys += r1.sys - r0.sys;
              sentReference += r.requests + r.errors + warmup;
              parts.reference.push(r);
            }
          }
        } finally {
          await Promise.all([directPool.close(), bridgePool.close(), referencePool?.close()]).catch(() => {});
        }
        memAfterWarm ??= memory(bridge.pid);
        const direct = mergeResults(parts.direct);
        const viaBridge = mergeResults(parts.bridge);
        rows.push({
          scenario: sc,
          direct,
          bridge: viaBridge,
          bridgeCpuPerReq: bridgeCpu / sentBridge,
          bridgeSysShare: bridgeCpu > 0 ? bridgeSys / bridgeCpu : NaN,
          upstreamCpuPerReqDirect: fakeCpuDirect / sentDirect,
          upstreamCpuPerReqBridge: fakeCpuBridge / sentBridge,
          ...(parts.reference.length && sc.reference
            ? {
                reference: {
                  kind: sc.reference,
                  result: mergeResults(parts.reference),
                  cpuPerReq: referenceCpu / sentReference,
                  sysShare: referenceCpu > 0 ? referenceSys / referenceCpu : NaN,
                },
              }
            : {}),
        });
        ctx.log(
          `${sc.label}: direct ${direct.rps.toFixed(0)} req/s (first content p50 ${ms(p50(direct.ttfc))} ms), bridge ${viaBridge.rps.toFixed(0)} req/s (first content p50 ${ms(p50(viaBridge.ttfc))} ms, ${ms(bridgeCpu / sentBridge)} ms CPU/req)${sentReference ? `, minimal proxy ${ms(referenceCpu / sentReference)} ms CPU/req` : ""}`,
        );
      }
      const memEnd = memory(bridge.pid);
      await bridge.stop(10_000);
      let profileMd = "";
      if (profileDir) {
        const files = readdirSync(profileDir).filter((f) => f.endsWith(".cpuprofile"));
        profileMd = files.length
          ? summariseProfile(
              path.join(profileDir, files[0]!),
              ctx.root,
              25,
              bridgePart,
              "The bridge's CPU by part of the path (each sample counted once, in the innermost part of its stack; bench/suites/openai/parts.ts)",
            ).markdown
          : "(the bridge wrote no .cpuprofile — did it exit cleanly?)";
      }
      return build(ctx, rows, { start: memStart, afterFirst: memAfterWarm ?? memEnd, end: memEnd }, profileMd);
    } finally {
      await bridge?.stop(5000);
      await Promise.all(Object.values(references).map((r) => r.stop(5000)));
      await fake?.stop(5000);
      rmSync(tmp, { recursive: true, force: true });
    }
  },
};

function build(
  ctx: BenchContext,
  rows: Row[],
  mem: { start: Memory; afterFirst: Memory; end: Memory },
  profileMd: string,
): SuiteResult {
  // With `--scenario`, only the targets of the scenarios that ran.
  const byId = (id: string) => rows.find((r) => r.scenario.id === id);
  const s1 = byId("stream-c1");
  const j1 = byId("json-c1");
  const j32 = byId("json-c32");

  const targets: TargetCheck[] = [];
  if (s1) {
    const addedFirstByte = p50(s1.bridge.ttfb) - p50(s1.direct.ttfb);
    const addedFirstContent = p50(s1.bridge.ttfc) - p50(s1.direct.ttfc);
    targets.push(
      {
        name: "added time to first byte, p50 (streaming c=1; the bridge's role chunk)",
        goal: "< 1 ms",
        measured: `${deltaMs(addedFirstByte)} ms`,
        pass: addedFirstByte < 1,
      },
      {
        name: "added time to first CONTENT delta, p50 (streaming c=1)",
        goal: "< 1 ms",
        measured: `${deltaMs(addedFirstContent)} ms`,
        pass: addedFirstContent < 1,
      },
    );
  }
  if (j1) {
    const addedJson = p50(j1.bridge.total) - p50(j1.direct.total);
    targets.push({
      name: "added time to the full response, p50 (non-streaming c=1; first byte = whole answer)",
      goal: "< 1 ms",
      measured: `${deltaMs(addedJson)} ms`,
      pass: addedJson < 1,
    });
  }
  if (j32) {
    const ratio = j32.bridge.rps / j32.direct.rps;
    targets.push({
      name: "non-streaming c=32 throughput, bridge / direct",
      goal: "≥ 50%",
      measured: `${(ratio * 100).toFixed(0)}% (${int(j32.bridge.rps)} vs ${int(j32.direct.rps)} req/s)${j32.reference ? `; the minimal Node.js proxy: ${((100 * j32.reference.result.rps) / j32.direct.rps).toFixed(0)}%` : ""}`,
      pass: ratio >= 0.5,
    });
  }
  targets.push(
    ...rows
      .filter((r) => r.reference)
      .map((r): TargetCheck => {
        const ref = r.reference!;
        const x = r.bridgeCpuPerReq / ref.cpuPerReq;
        return {
          name: `bridge CPU / req as a multiple of the minimal ${ref.kind === "stream" ? "streaming " : ""}proxy's (${r.scenario.label})`,
          goal: `≤ ${CPU_MULTIPLE_GOAL}×`,
          measured: `${x.toFixed(2)}× (${ms(r.bridgeCpuPerReq)} vs ${ms(ref.cpuPerReq)} ms)`,
          pass: x <= CPU_MULTIPLE_GOAL,
        };
      }),
  );

  const results = table(
    [
      "scenario",
      "path",
      "requests",
      "errors",
      "req/s",
      "first byte p50 / p99 (ms)",
      "first content p50 / p99 (ms)",
      "full response p50 / p99 (ms)",
      "bridge CPU / req",
    ],
    rows.flatMap((r) =>
      (["direct", "bridge"] as const).map((k) => {
        const x = r[k];
        return [
          k === "direct" ? r.scenario.label : "",
          k,
          int(x.requests),
          x.errors ? `${x.errors} (${(x.firstError ?? "").slice(0, 60)})` : "0",
          int(x.rps),
          `${ms(p50(x.ttfb))} / ${ms(p99(x.ttfb))}`,
          `${ms(p50(x.ttfc))} / ${ms(p99(x.ttfc))}`,
          `${ms(p50(x.total))} / ${ms(p99(x.total))}`,
          k === "bridge"
            ? `${ms(r.bridgeCpuPerReq)} ms (${Number.isFinite(r.bridgeSysShare) ? (100 * r.bridgeSysShare).toFixed(0) : "–"}% system)`
            : "",
        ];
      }),
    ),
  );
  const added = table(
    [
      "scenario",
      "Δ first byte p50 / p99",
      "Δ first content p50 / p99",
      "Δ full response p50 / p99",
      "req/s bridge / direct",
      "upstream CPU / req (direct → via bridge)",
    ],
    rows.map((r) => [
      r.scenario.label,
      `${deltaMs(p50(r.bridge.ttfb) - p50(r.direct.ttfb))} / ${deltaMs(p99(r.bridge.ttfb) - p99(r.direct.ttfb))}`,
      `${deltaMs(p50(r.bridge.ttfc) - p50(r.direct.ttfc))} / ${deltaMs(p99(r.bridge.ttfc) - p99(r.direct.ttfc))}`,
      `${deltaMs(p50(r.bridge.total) - p50(r.direct.total))} / ${deltaMs(p99(r.bridge.total) - p99(r.direct.total))}`,
      `${((100 * r.bridge.rps) / r.direct.rps).toFixed(0)}%`,
      `${ms(r.upstreamCpuPerReqDirect)} → ${ms(r.upstreamCpuPerReqBridge)} ms`,
    ]),
  );
  const memory = table(
    ["bridge process", "VmRSS", "VmHWM (peak)"],
    [
      ["after start-up (before any request)", mb(mem.start.rssKb), mb(mem.start.hwmKb)],
      ["after the first scenario", mb(mem.afterFirst.rssKb), mb(mem.afterFirst.hwmKb)],
      ["after all scenarios", mb(mem.end.rssKb), mb(mem.end.hwmKb)],
    ],
  );
  const ref = j32?.reference;
  const referenceMd =
    j32 && ref
      ? [
          "## Reference: the smallest Node.js proxy (non-streaming, c=32)",
          "",
          "bench/minimal-proxy.mjs, its own process, measured in the same rounds: node:http → JSON.parse → undici dispatch → JSON answer, with none of the bridge's validation, routing, queue, timeouts or error handling. It does the least a Node.js proxy of this route must do, so the share it keeps is a practical ceiling for a Node.js bridge on this machine.",
          "",
          table(
            ["path", "req/s", "% of direct", "full response p50 / p99 (ms)", "CPU / req"],
            [
              [
                "direct",
                int(j32.direct.rps),
                "100%",
                `${ms(p50(j32.direct.total))} / ${ms(p99(j32.direct.total))}`,
                `${ms(j32.upstreamCpuPerReqDirect)} ms (upstream)`,
              ],
              [
                "minimal proxy",
                int(ref.result.rps),
                `${((100 * ref.result.rps) / j32.direct.rps).toFixed(0)}%`,
                `${ms(p50(ref.result.total))} / ${ms(p99(ref.result.total))}`,
                `${ms(ref.cpuPerReq)} ms`,
              ],
              [
                "bridge",
                int(j32.bridge.rps),
                `${((100 * j32.bridge.rps) / j32.direct.rps).toFixed(0)}%`,
                `${ms(p50(j32.bridge.total))} / ${ms(p99(j32.bridge.total))}`,
                `${ms(j32.bridgeCpuPerReq)} ms`,
              ],
            ],
          ),
          "",
          `The bridge keeps ${((100 * j32.bridge.rps) / ref.result.rps).toFixed(0)}% of the minimal proxy's throughput.`,
        ]
      : [];
  const cpuMultiples = table(
    [
      "scenario",
      "minimal proxy",
      "minimal proxy CPU / req",
      "bridge CPU / req",
      "bridge ÷ minimal proxy",
      "req/s minimal proxy / bridge / direct",
    ],
    rows
      .filter((r) => r.reference)
      .map((r) => {
        const ref = r.reference!;
        const sys = (v: number) => (Number.isFinite(v) ? `${(100 * v).toFixed(0)}% system` : "–");
        return [
          r.scenario.label,
          `bench/${REFERENCE_FILE[ref.kind]}`,
          `${ms(ref.cpuPerReq)} ms (${sys(ref.sysShare)})`,
          `${ms(r.bridgeCpuPerReq)} ms (${sys(r.bridgeSysShare)})`,
          `${(r.bridgeCpuPerReq / ref.cpuPerReq).toFixed(2)}×`,
          `${int(ref.result.rps)} / ${int(r.bridge.rps)} / ${int(r.direct.rps)}`,
        ];
      }),
  );
  const { warmup, maxRequests, maxSeconds } = ctx.limits;
  const markdown = [
    "## Set-up",
    "",
    `- Fake upstream (bench/fake-upstream.ts, its own process): every answer is ${CHUNKS} content chunks + finish + usage + [DONE], precomputed, each frame its own write, back-to-back, no delay; \`stream: false\` gets the same text as one JSON body.`,
    `- Bridge: \`node bin/clawbridge.js serve --config <tmp>.yaml --port 0\` (its own process; the compiled build in dist/, as \`npm start\` runs it — \`npm run bench\` builds it first), one \`type: openai\` backend on the fake, \`logging.level: warn\`, \`server.maxConcurrent: 64\`. The upstream is asked for a stream only when the client streams (\`streamUpstream: when-client-streams\`, the default).`,
    `- Load: undici Pool with keep-alive, one connection per worker, closed loop (next request when the previous answer is read). Each worker sends its own \`x-session-id\` (the bridge runs one turn at a time per conversation). Per scenario and path, in each round: 2 × concurrency warm-up requests (the first answer is checked in full), then min(${maxRequests} requests (${THROUGHPUT_FACTOR * maxRequests} at c=32), ${maxSeconds} s), measured in ${ROUNDS} rounds that alternate direct and bridge (so both see the same background load); the latency columns pool all rounds.`,
    "- first byte: request sent → first body byte. The bridge writes its `delta.role` chunk at once, before the upstream answers, so its first byte can come EARLIER than direct. first content: → first body chunk with non-empty `delta.content` (or the JSON body). full response: → last byte.",
    `- Before each scenario is measured, each of its paths is warmed up with ${SCENARIO_WARMUP_FACTOR * warmup} requests of it (${REFERENCE_WARMUP_FACTOR * warmup} for non-streaming c=32, the throughput target, where the minimal proxy is warmed up too), outside the measurement: the JIT optimises code only after many runs, and each path is compared at its steady state.`,
    "- bridge CPU / req: user+system CPU of the bridge process (/proc/<pid>/stat) over the run, per request sent (share spent in the kernel in brackets).",
    "",
    "## Results",
    "",
    results,
    "",
    "## Added by the bridge (bridge − direct)",
    "",
    added,
    "",
    ...(referenceMd.length ? [...referenceMd, ""] : []),
    "## CPU per request: the bridge against the minimal proxies",
    "",
    "Each minimal proxy runs as its own process, measured in the same rounds as direct and the bridge (direct → bridge → minimal proxy in every round), its CPU read from /proc/<pid>/stat like the bridge's. bench/minimal-stream-proxy.mjs reads the upstream's event stream as it arrives and, per frame, parses the JSON, rewrites `id` and `model`, re-serialises it and writes it as one SSE frame (one `res.write` per frame); it has none of the bridge's validation, routing, queue, timeouts, heartbeats, tool-call extraction, special-token stripping or error handling.",
    "",
    cpuMultiples,
    "",
    "## Memory",
    "",
    memory,
    ...(profileMd
      ? [
          "",
          `## CPU profile of the bridge (node --cpu-prof over ${ctx.scenarios ? `the scenarios run (${ctx.scenarios.join(", ")})` : "the whole suite"}; timings above include the profiler's overhead)`,
          "",
          profileMd,
        ]
      : []),
  ].join("\n");
  return { markdown, targets };
}

export default suite;
