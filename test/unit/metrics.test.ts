/**
 * src/ops/metrics/metrics.ts: a bus fed synthetic events of every kind the metrics count; the registry's
 * text parsed with a real Prometheus text-format parser; every family present, the right samples
 * moved, labels bounded.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { resolveConfig } from "../../src/core/config/load.js";
import { EventBus, type NewEvent } from "../../src/ops/events/bus.js";
import { BridgeMetrics, MAX_ERROR_CODES, metricsLabels } from "../../src/ops/metrics/metrics.js";
import { histogram, histogramSeries, parseMetrics, samples, value } from "../helpers/prometheus.js";

/** Every family of ours, with its Prometheus type. */
const FAMILIES: Record<string, "COUNTER" | "GAUGE" | "HISTOGRAM"> = {
  clawbridge_info: "GAUGE",
  clawbridge_turns_in_flight: "GAUGE",
  clawbridge_queue_depth: "GAUGE",
  clawbridge_queue_conversations: "GAUGE",
  clawbridge_queue_limit: "GAUGE",
  clawbridge_cli_processes: "GAUGE",
  clawbridge_warm_processes: "GAUGE",
  clawbridge_warm_memory_bytes: "GAUGE",
  clawbridge_warm_memory_budget_bytes: "GAUGE",
  clawbridge_warm_events_total: "COUNTER",
  clawbridge_turns_total: "COUNTER",
  clawbridge_turn_errors_total: "COUNTER",
  clawbridge_turn_first_byte_seconds: "HISTOGRAM",
  clawbridge_turn_duration_seconds: "HISTOGRAM",
  clawbridge_tokens_total: "COUNTER",
  clawbridge_queue_wait_seconds: "HISTOGRAM",
  clawbridge_queue_rejected_total: "COUNTER",
  clawbridge_session_heals_total: "COUNTER",
  clawbridge_session_resets_total: "COUNTER",
  clawbridge_toolcalls_extracted_total: "COUNTER",
  clawbridge_intent_executions_total: "COUNTER",
  clawbridge_intent_duration_seconds: "HISTOGRAM",
  clawbridge_router_decisions_total: "COUNTER",
  clawbridge_runs_started_total: "COUNTER",
  clawbridge_runs_total: "COUNTER",
  clawbridge_run_duration_seconds: "HISTOGRAM",
  clawbridge_steps_total: "COUNTER",
  clawbridge_step_retries_total: "COUNTER",
  clawbridge_builds_total: "COUNTER",
  clawbridge_build_steps_total: "COUNTER",
  clawbridge_backend_up: "GAUGE",
  clawbridge_fallbacks_total: "COUNTER",
  clawbridge_backend_limit_hits_total: "COUNTER",
};

/** Node's process metrics, as prom-client names them. */
const PROCESS_FAMILIES = [
  "process_cpu_seconds_total",
  "process_start_time_seconds",
  "process_resident_memory_bytes",
  "nodejs_heap_size_used_bytes",
  "nodejs_eventloop_lag_seconds",
  "nodejs_version_info",
];

const turn = { conversation: "c1", model: "m", backend: "up" };

/** One event of each kind the metrics count. */
const EVERY_EVENT: NewEvent[] = [
  { type: "turn.started", turnId: "t1", ...turn, mode: "passthrough", queuedMs: 1500 },
  { type: "turn.firstByte", turnId: "t1", ...turn, ms: 300 },
  {
    type: "turn.completed",
    turnId: "t1",
    ...turn,
    ms: 2000,
    firstByteMs: 300,
    promptTokens: 42,
    completionTokens: 7,
    finishReason: "stop",
  },
  { type: "turn.started", turnId: "t2", ...turn, mode: "passthrough", queuedMs: 0 },
  { type: "turn.failed", turnId: "t2", ...turn, ms: 100, code: "backend_timeout", message: "too slow" },
  { type: "turn.started", turnId: "t3", ...turn, mode: "passthrough", queuedMs: 0 },
  { type: "turn.aborted", turnId: "t3", ...turn, ms: 50, reason: "client went away" },
  { type: "queue.rejected", conversation: "c2", model: "m", scope: "bridge" },
  { type: "queue.rejected", conversation: "c2", model: "m", scope: "conversation" },
  { type: "session.healed", conversation: "c1", backend: "cli", reason: "session_not_found" },
  { type: "session.reset", conversation: "c1", backend: "cli", reason: "retried message" },
  { type: "toolcalls.extracted", ...turn, count: 3 },
  { type: "intent.executed", conversation: "c1", model: "m", tools: ["web_search"], ok: true, ms: 800 },
  {
    type: "intent.executed",
    conversation: "c1",
    model: "m",
    tools: ["web_fetch"],
    ok: false,
    ms: 200,
    error: "blocked",
  },
  { type: "decision", conversation: "c1", action: "run", system: "s", confidence: 0.9, source: "classifier" },
  { type: "decision", conversation: "c1", action: "answer", confidence: 0, source: "fallback" },
  { type: "run.started", runId: "r1", system: "s", conversation: "c1" },
  { type: "step.started", runId: "r1", step: "a", attempt: 1 },
  { type: "step.retry", runId: "r1", step: "a", attempt: 1, error: "503", delayMs: 1000 },
  { type: "step.completed", runId: "r1", step: "a", ms: 10 },
  { type: "step.failed", runId: "r1", step: "b", error: "boom", ms: 10 },
  { type: "step.skipped", runId: "r1", step: "c", reason: "b failed" },
  { type: "run.failed", runId: "r1", system: "s", step: "b", error: "boom", ms: 3000 },
  { type: "run.completed", runId: "r2", system: "s", ms: 500 },
  { type: "run.cancelled", runId: "r3", system: "s" },
  { type: "run.paused", runId: "r4", system: "s" },
  { type: "run.interrupted", runId: "r5", system: "s" },
  // A build is a run of origin builder: counted in runs and steps, and in builds and build steps.
  { type: "step.completed", runId: "b1", system: "s", origin: "builder", step: "x", ms: 5 },
  { type: "step.failed", runId: "b1", system: "s", origin: "builder", step: "y", error: "no", ms: 5 },
  { type: "run.failed", runId: "b1", system: "s", origin: "builder", step: "y", error: "no", ms: 10 },
  { type: "backend.health", backend: "up", usable: true, detail: "ok" },
  { type: "backend.health", backend: "cli", usable: false, detail: "not installed" },
];

function setup(
  stats = { running: 0, waiting: 0, conversations: 0, maxConcurrent: 4, maxQueue: 32 },
  processes = () => 0,
) {
  const bus = new EventBus((err) => {
    throw err;
  });
  const metrics = new BridgeMetrics({
    bus,
    scheduler: { stats: () => stats },
    processes,
    models: ["m", "n"],
    backends: ["up", "cli"],
  });
  const scrape = async () => parseMetrics(await metrics.text());
  return { bus, metrics, scrape, stats };
}

test("the exposition parses; every family is there with HELP and its type, and Node's process metrics too", async () => {
  const { metrics, scrape } = setup();
  try {
    assert.equal(metrics.contentType, "text/plain; version=0.0.4; charset=utf-8");
    const families = await scrape();
    for (const [name, type] of Object.entries(FAMILIES)) {
      const f = families.families.get(name);
      assert.ok(f, `family ${name} is exposed`);
      assert.equal(f.type, type, `${name} is a ${type}`);
      assert.ok(f.help.length > 10, `${name} has a HELP text`);
    }
    for (const name of PROCESS_FAMILIES)
      assert.ok(families.families.get(name)?.metrics.length, `process family ${name} is exposed`);
    const ours = [...families.families.keys()].filter((n) => n.startsWith("clawbridge_"));
    assert.deepEqual(ours.filter((n) => !(n in FAMILIES)).sort(), [], "no family of ours left out of this test");
    // Known label values exist at 0 before anything happened.
    assert.equal(samples(families, "clawbridge_queue_rejected_total", { model: "m", scope: "bridge" }).length, 1);
    assert.equal(samples(families, "clawbridge_session_heals_total", { backend: "cli" }).length, 1);
    assert.equal(value(families, "clawbridge_info"), 1);
  } finally {
    metrics.close();
  }
});

test("each event moves its family, with the right labels", async () => {
  const { bus, metrics, scrape } = setup();
  try {
    const before = await scrape();
    for (const e of EVERY_EVENT) bus.emit(e);
    const after = await scrape();

    const t = { model: "m", backend: "up" };
    assert.equal(value(after, "clawbridge_turns_total", { ...t, outcome: "completed" }), 1);
    assert.equal(value(after, "clawbridge_turns_total", { ...t, outcome: "failed" }), 1);
    assert.equal(value(after, "clawbridge_turns_total", { ...t, outcome: "aborted" }), 1);
    assert.equal(value(before, "clawbridge_turns_total"), 0);
    assert.equal(value(after, "clawbridge_turn_errors_total", { backend: "up", code: "backend_timeout" }), 1);

    assert.deepEqual(histogram(after, "clawbridge_turn_first_byte_seconds", t), { count: 1, sum: 0.3 });
    const fb = histogramSeries(after, "clawbridge_turn_first_byte_seconds", t)[0]!;
    assert.equal(fb.buckets["0.25"], 0, "300 ms is above the 0.25 s bucket");
    assert.equal(fb.buckets["0.5"], 1, "and inside the 0.5 s one");
    assert.deepEqual(histogram(after, "clawbridge_turn_duration_seconds", { ...t, outcome: "completed" }), {
      count: 1,
      sum: 2,
    });
    assert.equal(histogram(after, "clawbridge_turn_duration_seconds", t).count, 3);
    assert.equal(value(after, "clawbridge_tokens_total", { ...t, kind: "prompt" }), 42);
    assert.equal(value(after, "clawbridge_tokens_total", { ...t, kind: "completion" }), 7);

    assert.deepEqual(histogram(after, "clawbridge_queue_wait_seconds"), { count: 3, sum: 1.5 });
    assert.equal(value(after, "clawbridge_queue_rejected_total", { model: "m", scope: "bridge" }), 1);
    assert.equal(value(after, "clawbridge_queue_rejected_total", { model: "m", scope: "conversation" }), 1);
    assert.equal(value(before, "clawbridge_queue_rejected_total"), 0);

    assert.equal(value(after, "clawbridge_session_heals_total", { backend: "cli" }), 1);
    assert.equal(value(after, "clawbridge_session_resets_total", { backend: "cli" }), 1);
    assert.equal(value(after, "clawbridge_toolcalls_extracted_total", t), 3);
    assert.equal(value(after, "clawbridge_intent_executions_total", { model: "m", outcome: "ok" }), 1);
    assert.equal(value(after, "clawbridge_intent_executions_total", { model: "m", outcome: "failed" }), 1);
    assert.equal(histogram(after, "clawbridge_intent_duration_seconds").count, 2);

    assert.equal(value(after, "clawbridge_router_decisions_total", { action: "run", source: "classifier" }), 1);
    assert.equal(value(after, "clawbridge_router_decisions_total", { action: "answer", source: "fallback" }), 1);

    assert.equal(value(after, "clawbridge_runs_started_total"), 1);
    for (const outcome of ["completed", "cancelled", "paused", "interrupted"])
      assert.equal(value(after, "clawbridge_runs_total", { outcome }), 1, outcome);
    assert.equal(value(after, "clawbridge_runs_total", { outcome: "failed" }), 2);
    assert.deepEqual(histogram(after, "clawbridge_run_duration_seconds", { outcome: "failed" }), {
      count: 2,
      sum: 3.01,
    });
    for (const [outcome, n] of [
      ["completed", 2],
      ["failed", 2],
      ["skipped", 1],
    ] as const)
      assert.equal(value(after, "clawbridge_steps_total", { outcome }), n, outcome);
    assert.equal(value(after, "clawbridge_step_retries_total"), 1);
    assert.equal(value(after, "clawbridge_builds_total", { outcome: "failed" }), 1);
    assert.equal(value(after, "clawbridge_build_steps_total", { outcome: "completed" }), 1);
    assert.equal(value(after, "clawbridge_build_steps_total", { outcome: "failed" }), 1);
    assert.equal(value(after, "clawbridge_backend_up", { backend: "up" }), 1);
    assert.equal(value(after, "clawbridge_backend_up", { backend: "cli" }), 0);

    // Counters only go up: a second round doubles them.
    for (const e of EVERY_EVENT) bus.emit(e);
    const again = await scrape();
    assert.equal(value(again, "clawbridge_turns_total"), 6);
    assert.equal(value(again, "clawbridge_toolcalls_extracted_total"), 6);
  } finally {
    metrics.close();
  }
});

test("gauges are read at scrape time from the scheduler and the process count", async () => {
  let procs = 0;
  const { metrics, scrape, stats } = setup(undefined, () => procs);
  try {
    let f = await scrape();
    assert.equal(value(f, "clawbridge_turns_in_flight"), 0);
    assert.equal(value(f, "clawbridge_queue_depth"), 0);
    assert.equal(value(f, "clawbridge_queue_limit", { limit: "concurrent" }), 4);
    assert.equal(value(f, "clawbridge_queue_limit", { limit: "queue" }), 32);
    Object.assign(stats, { running: 3, waiting: 5, conversations: 6 });
    procs = 2;
    f = await scrape();
    assert.equal(value(f, "clawbridge_turns_in_flight"), 3);
    assert.equal(value(f, "clawbridge_queue_depth"), 5);
    assert.equal(value(f, "clawbridge_queue_conversations"), 6);
    assert.equal(value(f, "clawbridge_cli_processes"), 2);
  } finally {
    metrics.close();
  }
});

test("labels stay bounded: ids not in the config are `other`, error codes are capped", async () => {
  const { bus, metrics, scrape } = setup();
  try {
    for (let i = 0; i < 50; i++) {
      bus.emit({
        type: "turn.completed",
        turnId: `t${i}`,
        conversation: `conv-${i}`,
        model: `made-up-${i}`,
        backend: `nowhere-${i}`,
        ms: 1,
      });
      bus.emit({ type: "queue.rejected", conversation: `conv-${i}`, model: `made-up-${i}`, scope: `scope-${i}` });
    }
    for (let i = 0; i < MAX_ERROR_CODES + 20; i++)
      bus.emit({
        type: "turn.failed",
        turnId: `f${i}`,
        conversation: "c",
        model: "m",
        backend: "up",
        ms: 1,
        code: `code_${i}`,
        message: "x",
      });
    bus.emit({
      type: "turn.failed",
      turnId: "bad",
      conversation: "c",
      model: "m",
      backend: "up",
      ms: 1,
      code: "not a {code}",
      message: "x",
    });
    bus.emit({
      type: "decision",
      conversation: "c",
      action: "toString" as never,
      confidence: 1,
      source: "constructor" as never,
    });
    const f = await scrape();
    const turns = samples(f, "clawbridge_turns_total");
    assert.deepEqual(
      turns.map((s) => `${s.labels?.model}/${s.labels?.backend}/${s.labels?.outcome}=${s.value}`).sort(),
      [`m/up/failed=${MAX_ERROR_CODES + 21}`, "other/other/completed=50"],
    );
    assert.equal(value(f, "clawbridge_queue_rejected_total", { model: "other", scope: "other" }), 50);
    const codes = new Set(samples(f, "clawbridge_turn_errors_total").map((s) => s.labels?.code));
    assert.equal(codes.size, MAX_ERROR_CODES + 1, "the first codes, then `other`");
    assert.equal(value(f, "clawbridge_turn_errors_total", { code: "other" }), 21);
    assert.equal(value(f, "clawbridge_router_decisions_total", { action: "other", source: "other" }), 1);
    assert.deepEqual(
      histogramSeries(f, "clawbridge_turn_duration_seconds")
        .map((s) => `${s.labels.model}/${s.labels.backend}/${s.labels.outcome}`)
        .sort(),
      ["m/up/failed", "other/other/completed"],
    );
  } finally {
    metrics.close();
  }
});

test("two bridges' metrics never share counters; close() stops listening", async () => {
  const a = setup();
  const b = setup();
  try {
    a.bus.emit({ type: "queue.rejected", conversation: "c", model: "m", scope: "bridge" });
    assert.equal(value(await a.scrape(), "clawbridge_queue_rejected_total"), 1);
    assert.equal(value(await b.scrape(), "clawbridge_queue_rejected_total"), 0);
    a.metrics.close();
    assert.equal(a.bus.listenerCount, 0);
    a.bus.emit({ type: "queue.rejected", conversation: "c", model: "m", scope: "bridge" });
    assert.equal(value(await a.scrape(), "clawbridge_queue_rejected_total"), 1);
  } finally {
    a.metrics.close();
    b.metrics.close();
  }
});

test("metrics config: on by default, the key required exactly when server.apiKeys is set, requireKey needs keys", () => {
  const base = {
    backends: { up: { type: "openai", baseUrl: "http://127.0.0.1:1/v1" } },
    models: [{ id: "m", backend: "up" }],
    remap: [{ match: "kimi", to: "kimi-x", backend: "up" }],
  };
  const plain = resolveConfig(base, "t");
  assert.deepEqual(plain.metrics, { enabled: true, requireKey: false });
  const keyed = resolveConfig({ ...base, server: { apiKeys: ["k".repeat(16)] } }, "t");
  assert.deepEqual(keyed.metrics, { enabled: true, requireKey: true });
  assert.deepEqual(
    resolveConfig({ ...base, server: { apiKeys: ["k".repeat(16)] }, metrics: { requireKey: false } }, "t").metrics,
    { enabled: true, requireKey: false },
  );
  assert.deepEqual(resolveConfig({ ...base, metrics: { enabled: false } }, "t").metrics, {
    enabled: false,
    requireKey: false,
  });
  assert.throws(
    () => resolveConfig({ ...base, metrics: { requireKey: true } }, "t"),
    /metrics\.requireKey: true needs server\.apiKeys/,
  );
  assert.throws(() => resolveConfig({ ...base, metrics: { enabled: "yes" } }, "t"), /metrics\.enabled/);
  assert.throws(() => resolveConfig({ ...base, metrics: { port: 9100 } }, "t"), /metrics/);
  assert.deepEqual(metricsLabels(plain), { models: ["m", "kimi-x"], backends: ["up"] });
});
