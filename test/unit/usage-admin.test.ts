/**
 * src/request/http/admin-routes.ts with the events of issue 28: a `turn.fallback` in the middle of a
 * turn does not end its row in the dashboard's turn log (the turn goes on, on the next model), and
 * the turn's own end is still recorded.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { EventBus } from "../../src/ops/events/bus.js";
import { TurnLog } from "../../src/request/http/admin-routes.js";

test("a turn handed along its fallback chain stays running until it ends", () => {
  const bus = new EventBus((err) => {
    throw err;
  });
  const log = new TurnLog();
  bus.on((e) => log.onEvent(e));
  const base = { turnId: "t1", conversation: "c", model: "m", backend: "claude" };
  bus.emit({ type: "turn.started", ...base, mode: "stateless", queuedMs: 0 });
  bus.emit({ type: "backend.limited", backend: "claude", message: "limit", until: 1 });
  bus.emit({
    type: "turn.fallback",
    ...base,
    fromModel: "m",
    fromBackend: "claude",
    to: "n",
    toBackend: "gemini",
    reason: "limit_reached",
  });
  assert.deepEqual(
    log.snapshot().running.map((r) => [r.id, r.status]),
    [["t1", "running"]],
  );
  bus.emit({ type: "turn.completed", ...base, ms: 50, promptTokens: 3, completionTokens: 1, answeredBy: "n" });
  const s = log.snapshot();
  assert.equal(s.running.length, 0);
  assert.deepEqual(
    s.recent.map((r) => [r.id, r.status, r.prompt_tokens, r.duration_ms]),
    [["t1", "completed", 3, 50]],
  );
});
