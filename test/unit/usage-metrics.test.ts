/**
 * src/ops/metrics/metrics.ts, the families of issue 28: `clawbridge_fallbacks_total{from,to,reason}`
 * from `turn.fallback`, `clawbridge_backend_limit_hits_total{backend}` from `backend.limited`; the
 * labels bounded (backends not in the config are `other`, reasons after `MAX_REASONS` too); the
 * tokens per backend are `clawbridge_tokens_total`.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { EventBus } from "../../src/ops/events/bus.js";
import { BridgeMetrics, MAX_REASONS } from "../../src/ops/metrics/metrics.js";
import { parseMetrics, samples, value } from "../helpers/prometheus.js";

const fallback = (fromBackend: string, toBackend: string, reason: string) =>
  ({
    type: "turn.fallback",
    turnId: "t",
    conversation: "c",
    model: "m",
    fromModel: "m",
    fromBackend,
    to: "n",
    toBackend,
    reason,
    resetAt: 1,
  }) as const;

test("fallbacks and limit hits are counted from the bus, with bounded labels", async () => {
  const bus = new EventBus((err) => {
    throw err;
  });
  const metrics = new BridgeMetrics({ bus, models: ["m", "n"], backends: ["claude", "gemini"] });
  try {
    const before = parseMetrics(await metrics.text());
    assert.equal(value(before, "clawbridge_backend_limit_hits_total", { backend: "claude" }), 0, "at 0 from the start");
    assert.equal(samples(before, "clawbridge_fallbacks_total").length, 0);

    bus.emit(fallback("claude", "gemini", "limit_reached"));
    bus.emit(fallback("claude", "gemini", "limit_reached"));
    bus.emit(fallback("claude", "gemini", "exhausted"));
    bus.emit(fallback("elsewhere", "gemini", "bad reason with spaces"));
    bus.emit({ type: "backend.limited", backend: "claude", message: "5-hour limit", resetAt: 2, until: 2 });
    bus.emit({ type: "backend.limited", backend: "claude", message: "again", until: 3 });
    bus.emit({ type: "backend.limited", backend: "nope", message: "x", until: 3 });
    for (let i = 0; i < MAX_REASONS + 5; i++) bus.emit(fallback("gemini", "claude", `r${i}`));

    const after = parseMetrics(await metrics.text());
    assert.equal(
      value(after, "clawbridge_fallbacks_total", { from: "claude", to: "gemini", reason: "limit_reached" }),
      2,
    );
    assert.equal(value(after, "clawbridge_fallbacks_total", { from: "claude", to: "gemini", reason: "exhausted" }), 1);
    assert.equal(value(after, "clawbridge_fallbacks_total", { from: "other", to: "gemini", reason: "other" }), 1);
    assert.equal(value(after, "clawbridge_backend_limit_hits_total", { backend: "claude" }), 2);
    assert.equal(value(after, "clawbridge_backend_limit_hits_total", { backend: "other" }), 1);
    assert.equal(value(after, "clawbridge_backend_limit_hits_total", { backend: "gemini" }), 0);
    const reasons = new Set(
      samples(after, "clawbridge_fallbacks_total", { from: "gemini" }).map((s) => s.labels?.reason),
    );
    assert.ok(reasons.has("other"), "reasons past the bound are other");
    assert.ok(reasons.size <= MAX_REASONS, `at most ${MAX_REASONS} distinct reasons (+ other): ${reasons.size}`);
  } finally {
    metrics.close();
  }
});
