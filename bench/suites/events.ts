/**
 * Suite "events": does watching slow the pipeline down? The same requests through the bridge (an
 * `openai` backend in front of the bench's fake upstream) with 0 and with 10 subscribers reading
 * `GET /v1/events`, streamed and non-streamed, c=1 and c=8. Settings alternate in rounds so drift
 * of a shared machine falls on both alike.
 *
 * Measured per setting: the bridge's CPU per request (user + sys of its process over the round,
 * divided by the requests), p50 time to first content / to the end, and the events the subscribers
 * read (each turn publishes turn.started, turn.firstByte, turn.completed; every subscriber must see
 * them). Target: the difference in CPU per request between 10 and 0 subscribers within the noise —
 * the spread between the rounds of one setting (at least 5 %).
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { Client } from "undici";
import { stringify } from "yaml";
import { answerText } from "../fake-upstream.js";
import { loadClient, runLoad, type LoadResult } from "../load.js";
import { cpuMs, startService, type Service } from "../procs.js";
import { ms, percentile, table } from "../stats.js";
import type { BenchContext, BenchSuite, SuiteResult, TargetCheck } from "../suite.js";

const CHUNKS = 20;
const TEXT = answerText(CHUNKS);
const ROUNDS = 3;
const SUBSCRIBERS = 10;
const MODEL = "bench/local";
const NOISE_FLOOR = 0.05;

interface Scenario {
  id: string;
  label: string;
  stream: boolean;
  concurrency: number;
}

const SCENARIOS: Scenario[] = [
  { id: "stream-c1", label: "streaming, c=1", stream: true, concurrency: 1 },
  { id: "stream-c8", label: "streaming, c=8", stream: true, concurrency: 8 },
  { id: "json-c1", label: "non-streaming, c=1", stream: false, concurrency: 1 },
  { id: "json-c8", label: "non-streaming, c=8", stream: false, concurrency: 8 },
];

const body = (stream: boolean) =>
  JSON.stringify({
    model: MODEL,
    stream,
    messages: [
      { role: "system", content: "You are terse." },
      { role: "user", content: "Tell me about the fox." },
    ],
  });
const check = (stream: boolean) => (status: number, text: string) =>
  status !== 200
    ? `HTTP ${status}: ${text.slice(0, 200)}`
    : stream
      ? text.includes("[DONE]")
        ? undefined
        : "no [DONE]"
      : text.includes(JSON.stringify(TEXT))
        ? undefined
        : `bad body: ${text.slice(0, 200)}`;

/** N clients reading /v1/events to the end; counts the events they read. */
async function subscribe(origin: string, n: number): Promise<{ events(): number; close(): Promise<void> }> {
  let count = 0;
  const clients: Client[] = [];
  for (let i = 0; i < n; i++) {
    const c = new Client(origin);
    clients.push(c);
    const res = await c.request({
      path: "/v1/events?types=turn.*",
      method: "GET",
      headers: { accept: "text/event-stream" },
    });
    if (res.statusCode !== 200) throw new Error(`/v1/events answered ${res.statusCode}: ${await res.body.text()}`);
    void (async () => {
      try {
        for await (const chunk of res.body as AsyncIterable<Buffer>) {
          // Count `event:` lines (one per event).
          const s = chunk.toString("latin1");
          for (let at = s.indexOf("\nevent:"); at !== -1; at = s.indexOf("\nevent:", at + 1)) count++;
          if (s.startsWith("event:")) count++;
        }
      } catch {
        /* closed */
      }
    })();
  }
  return {
    events: () => count,
    async close() {
      await Promise.all(clients.map((c) => c.destroy().catch(() => {})));
    },
  };
}

interface Cell {
  cpuPerReq: number[];
  ttfc: number[];
  total: number[];
  requests: number;
  errors: number;
  events: number;
}

const emptyCell = (): Cell => ({ cpuPerReq: [], ttfc: [], total: [], requests: 0, errors: 0, events: 0 });

const suite: BenchSuite = {
  name: "events",
  description: "the pipeline with 0 and 10 subscribers on /v1/events (CPU per request, latency)",
  async run(ctx: BenchContext): Promise<SuiteResult> {
    const picked = SCENARIOS.filter((s) => !ctx.scenarios?.length || ctx.scenarios.includes(s.id));
    const tmp = mkdtempSync(path.join(tmpdir(), "cb-bench-events-"));
    let fake: Service | undefined;
    let bridge: Service | undefined;
    try {
      fake = await startService({
        name: "fake upstream",
        command: process.execPath,
        args: ["--import", "tsx", path.join(ctx.root, "bench", "fake-upstream.ts"), "--chunks", String(CHUNKS)],
        cwd: ctx.root,
        readyPattern: /PORT (\d+)/,
      });
      const configFile = path.join(tmp, "clawbridge.yaml");
      writeFileSync(
        configFile,
        stringify({
          server: { host: "127.0.0.1", port: 0, maxConcurrent: 64, maxQueue: 256 },
          logging: { level: "warn" },
          intents: { enabled: false },
          dataDir: path.join(tmp, "data"),
          backends: {
            bench: { type: "openai", baseUrl: `http://127.0.0.1:${fake.ready}/v1`, apiKey: "x", maxConnections: 16 },
          },
          models: [{ id: "local", backend: "bench" }],
        }),
      );
      bridge = await startService({
        name: "clawbridge",
        command: process.execPath,
        args: [path.join(ctx.root, "bin", "clawbridge.js"), "serve", "--config", configFile, "--port", "0"],
        cwd: ctx.root,
        readyPattern: /listening on (http:\/\/[^\s]+)/,
      });
      const origin = bridge.ready;
      const rows: Array<{ sc: Scenario; zero: Cell; ten: Cell }> = [];
      for (const sc of picked) {
        const pool = loadClient(origin, sc.concurrency);
        const spec = {
          origin,
          path: "/v1/chat/completions",
          body: body(sc.stream),
          concurrency: sc.concurrency,
          sessionPerWorker: true,
          check: check(sc.stream),
        };
        ctx.log(`events: ${sc.label}: warming up`);
        await runLoad({ ...spec, warmup: ctx.limits.warmup * 5, maxRequests: 0, maxSeconds: 60 }, pool);
        const row = { sc, zero: emptyCell(), ten: emptyCell() };
        for (let round = 0; round < ROUNDS; round++) {
          for (const [subs, cell] of [
            [0, row.zero],
            [SUBSCRIBERS, row.ten],
          ] as const) {
            const watchers = subs ? await subscribe(origin, subs) : undefined;
            const c0 = cpuMs(bridge.pid);
            const res: LoadResult = await runLoad(
              { ...spec, warmup: 0, maxRequests: ctx.limits.maxRequests, maxSeconds: ctx.limits.maxSeconds },
              pool,
            );
            const c1 = cpuMs(bridge.pid);
            // Let the last events reach the subscribers before counting them.
            await new Promise((r) => setTimeout(r, 200));
            cell.events += watchers?.events() ?? 0;
            await watchers?.close();
            cell.cpuPerReq.push((c1 - c0) / Math.max(1, res.requests));
            cell.ttfc.push(...res.ttfc);
            cell.total.push(...res.total);
            cell.requests += res.requests;
            cell.errors += res.errors;
            ctx.log(
              `events: ${sc.label}: round ${round + 1}, ${subs} subscribers: ${res.requests} requests, ${((c1 - c0) / Math.max(1, res.requests)).toFixed(3)} ms CPU each`,
            );
          }
        }
        await pool.close();
        rows.push(row);
      }
      return report(rows);
    } finally {
      await bridge?.stop();
      await fake?.stop();
      rmSync(tmp, { recursive: true, force: true });
    }
  },
};

const avg = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);
const spread = (xs: number[]) => (xs.length ? (Math.max(...xs) - Math.min(...xs)) / Math.max(1e-9, avg(xs)) : 0);

function report(rows: Array<{ sc: Scenario; zero: Cell; ten: Cell }>): SuiteResult {
  const targets: TargetCheck[] = [];
  const lines: string[][] = [];
  for (const { sc, zero, ten } of rows) {
    const a = avg(zero.cpuPerReq);
    const b = avg(ten.cpuPerReq);
    const diff = (b - a) / Math.max(1e-9, a);
    const noise = Math.max(NOISE_FLOOR, spread(zero.cpuPerReq), spread(ten.cpuPerReq));
    lines.push([
      sc.label,
      `${a.toFixed(3)} ms`,
      `${b.toFixed(3)} ms`,
      `${diff >= 0 ? "+" : ""}${(diff * 100).toFixed(1)} %`,
      `${(noise * 100).toFixed(1)} %`,
      `${ms(percentile(zero.ttfc, 50))} / ${ms(percentile(ten.ttfc, 50))}`,
      `${ms(percentile(zero.total, 50))} / ${ms(percentile(ten.total, 50))}`,
      `${ten.events} (${(ten.events / Math.max(1, ten.requests * SUBSCRIBERS)).toFixed(2)} per request per subscriber)`,
      String(zero.errors + ten.errors),
    ]);
    targets.push({
      name: `${sc.label}: CPU per request, 10 subscribers vs none`,
      goal: `within the noise (≤ ${(noise * 100).toFixed(1)} %)`,
      measured: `${diff >= 0 ? "+" : ""}${(diff * 100).toFixed(1)} %`,
      pass: diff <= noise && zero.errors + ten.errors === 0,
    });
  }
  const markdown = [
    `Bridge CPU per request (user + sys), mean of ${ROUNDS} alternating rounds per setting; noise = the larger spread between rounds of one setting (at least ${NOISE_FLOOR * 100} %).`,
    "",
    table(
      [
        "scenario",
        "CPU/req, 0 subs",
        "CPU/req, 10 subs",
        "difference",
        "noise",
        "p50 first content (0 / 10)",
        "p50 total (0 / 10)",
        "events read by the 10",
        "errors",
      ],
      lines,
    ),
    "",
    "Each turn publishes three events the subscribers ask for (`?types=turn.*`): turn.started, turn.firstByte, turn.completed; 3.00 per request per subscriber means none was lost.",
  ].join("\n");
  return { markdown, targets };
}

export default suite;
