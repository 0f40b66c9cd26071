/**
 * Suite "fallback" (issue 28): what a fallback chain costs before the first token.
 * - `direct`: the fallback model asked directly (an `openai` backend in front of the bench's
 *   instant fake upstream).
 * - `fallback`: a model whose backend is down (nothing listens on its port: the connection is
 *   refused at once) with that model as its fallback: the turn fails before any output and the
 *   chain hands it over in the same request.
 * - `skipped`: a model whose backend is at its limit (noted in the data dir's limits.json before
 *   the start) with the same fallback: skipped without being tried.
 * The three alternate in rounds (c=1, streaming) so a shared machine's drift falls on all alike.
 * Targets: fallback − direct under 50 ms (p50); and the skip itself under 1 ms — measured in
 * process as the decision the pipeline makes per request (the chain resolved and every backend's
 * limit looked up), with the end-to-end difference skipped − direct shown beside it.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { stringify } from "yaml";
import { LimitBook } from "../../src/core/store/limits.js";
import { resolveConfig } from "../../src/core/config/load.js";
import { allExhausted, chainOf } from "../../src/request/pipeline/fallback.js";
import type { Route } from "../../src/request/models/routes.js";
import { loadClient, runLoad } from "../load.js";
import { startService, type Service } from "../procs.js";
import { ms, percentile, table } from "../stats.js";
import type { BenchContext, BenchSuite, SuiteResult, TargetCheck } from "../suite.js";

const ROUNDS = 5;
const KINDS = ["direct", "fallback", "skipped"] as const;
type Kind = (typeof KINDS)[number];
const MODEL: Record<Kind, string> = { direct: "backup", fallback: "main", skipped: "limited" };

const body = (model: string) =>
  JSON.stringify({ model, stream: true, messages: [{ role: "user", content: "Tell me about the fox." }] });

function configFor(dataDir: string, upstream: string) {
  return {
    server: { host: "127.0.0.1", port: 0, maxConcurrent: 16 },
    logging: { level: "warn" },
    intents: { enabled: false },
    dataDir,
    backends: {
      // Port 9 (discard): nothing listens on loopback, the connection is refused at once.
      down: { type: "openai", baseUrl: "http://127.0.0.1:9/v1", apiKey: "x", discovery: { enabled: false } },
      spent: { type: "openai", baseUrl: upstream, apiKey: "x", discovery: { enabled: false } },
      up: { type: "openai", baseUrl: upstream, apiKey: "x", maxConnections: 8, discovery: { enabled: false } },
    },
    models: [
      { id: "backup", backend: "up" },
      { id: "main", backend: "down", fallback: ["backup"] },
      { id: "limited", backend: "spent", fallback: ["backup"] },
    ],
  };
}

/** The skip decision per request, in process: chain resolved, each backend's limit looked up (µs). */
function skipDecisionMicros(dataDir: string, upstream: string): number {
  const config = resolveConfig(configFor(dataDir, upstream), "bench");
  const byId = new Map(config.models.map((m) => [m.id, m]));
  const backend = {
    name: "",
    type: "openai",
    run: () => (async function* () {})(),
    health: async () => ({ usable: true, detail: "" }),
  };
  const resolve = (id: string): Route | undefined => {
    const model = byId.get(id);
    return model ? { model, backend: { ...backend, name: model.backend } } : undefined;
  };
  const limits = new LimitBook(dataDir);
  const route = resolve("limited")!;
  const N = 200_000;
  let sink = 0;
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < N; i++) {
    const chain = chainOf(route, resolve);
    if (!allExhausted(chain, limits)) sink++;
    for (const r of chain) if (limits.exhausted(r.backend.name)) sink++;
  }
  const micros = Number(process.hrtime.bigint() - t0) / 1000 / N;
  if (sink < 0) throw new Error("unreachable");
  return micros;
}

const suite: BenchSuite = {
  name: "fallback",
  description: "a fallback chain before the first token: a backend down, a backend at its limit (skipped)",
  async run(ctx: BenchContext): Promise<SuiteResult> {
    const tmp = mkdtempSync(path.join(tmpdir(), "cb-bench-fallback-"));
    let fake: Service | undefined;
    let bridge: Service | undefined;
    try {
      fake = await startService({
        name: "fake upstream",
        command: process.execPath,
        args: ["--import", "tsx", path.join(ctx.root, "bench", "fake-upstream.ts"), "--chunks", "20"],
        cwd: ctx.root,
        readyPattern: /PORT (\d+)/,
      });
      const upstream = `http://127.0.0.1:${fake.ready}/v1`;
      const dataDir = path.join(tmp, "data");
      mkdirSync(dataDir, { recursive: true });
      // `spent` is at its limit for the next day.
      writeFileSync(
        path.join(dataDir, "limits.json"),
        JSON.stringify({
          spent: { until: Date.now() + 86_400_000, message: "bench: at its limit", since: Date.now() },
        }),
      );
      const configFile = path.join(tmp, "clawbridge.yaml");
      writeFileSync(configFile, stringify(configFor(dataDir, upstream)));
      bridge = await startService({
        name: "clawbridge",
        command: process.execPath,
        args: [path.join(ctx.root, "bin", "clawbridge.js"), "serve", "--config", configFile, "--port", "0"],
        cwd: ctx.root,
        readyPattern: /listening on (http:\/\/[^\s]+)/,
      });
      const origin = bridge.ready;
      const pool = loadClient(origin, 1);
      const samples: Record<Kind, number[]> = { direct: [], fallback: [], skipped: [] };
      let errors = 0;
      let firstError: string | undefined;
      const spec = (kind: Kind) => ({
        origin,
        path: "/v1/chat/completions",
        body: body(MODEL[kind]),
        concurrency: 1,
        sessionPerWorker: true,
        check: (status: number, text: string) =>
          status !== 200 ? `HTTP ${status}: ${text.slice(0, 200)}` : text.includes("[DONE]") ? undefined : "no [DONE]",
      });
      for (const kind of KINDS) {
        ctx.log(`fallback: warming up ${kind}`);
        await runLoad(
          { ...spec(kind), warmup: Math.min(200, ctx.limits.warmup), maxRequests: 0, maxSeconds: 30 },
          pool,
        );
      }
      const perRound = Math.max(50, Math.floor(ctx.limits.maxRequests / ROUNDS / KINDS.length));
      for (let round = 0; round < ROUNDS; round++) {
        const order = round % 2 ? [...KINDS].reverse() : KINDS;
        for (const kind of order) {
          const res = await runLoad({ ...spec(kind), warmup: 0, maxRequests: perRound, maxSeconds: 20 }, pool);
          samples[kind].push(...res.ttfc);
          errors += res.errors;
          firstError ??= res.firstError;
        }
        ctx.log(`fallback: round ${round + 1} of ${ROUNDS}`);
      }
      await pool.close();
      const micros = skipDecisionMicros(path.join(tmp, "micro"), upstream);
      return report(samples, micros, errors, firstError);
    } finally {
      await bridge?.stop();
      await fake?.stop();
      rmSync(tmp, { recursive: true, force: true });
    }
  },
};

function report(samples: Record<Kind, number[]>, micros: number, errors: number, firstError?: string): SuiteResult {
  const p = (k: Kind, q: number) => percentile(samples[k], q);
  const added = p("fallback", 50) - p("direct", 50);
  const skippedE2e = p("skipped", 50) - p("direct", 50);
  const targets: TargetCheck[] = [
    {
      name: "a fallback before the first token (primary refused at once, instant fakes), over the fallback model's own",
      goal: "< 50 ms (p50)",
      measured: `${ms(added)} ms (p90 ${ms(p("fallback", 90) - p("direct", 90))} ms)`,
      pass: errors === 0 && added < 50,
    },
    {
      name: "an exhausted backend skipped: the pipeline's decision per request",
      goal: "< 1 ms",
      measured: `${micros.toFixed(2)} µs (end to end, skipped − direct p50: ${ms(skippedE2e)} ms)`,
      pass: errors === 0 && micros < 1000,
    },
  ];
  const rows = KINDS.map((k) => [
    k,
    `\`${MODEL[k]}\``,
    ms(p(k, 50)),
    ms(p(k, 90)),
    ms(p(k, 99)),
    String(samples[k].length),
  ]);
  const markdown = [
    "Streaming, c=1, request → first content chunk at the client. `direct`: the fallback model asked directly; `fallback`: a model whose backend's port refuses the connection, falling back to it; `skipped`: a model whose backend is at its limit (limits.json), skipped without being tried. The three alternate in rounds.",
    "",
    table(["kind", "model asked", "p50 (ms)", "p90 (ms)", "p99 (ms)", "n"], rows),
    "",
    `Errors: ${errors}${firstError ? ` (first: ${firstError})` : ""}.`,
  ].join("\n");
  return { markdown, targets };
}

export default suite;
