/** A resent tool-result request (issue 31 item 1): its key, the answer kept for it, and the session that recognises it. */
import assert from "node:assert/strict";
import { test } from "node:test";
import type { BackendEvent } from "../../src/backends/contract/backend.js";
import { RecordedAnswer, REPLAY_MS, resultsKey } from "../../src/backends/client-tools/replay.js";
import { ClientToolHub } from "../../src/backends/client-tools/sessions.js";
import { newBridgeCallId } from "../../src/backends/client-tools/types.js";
import { createLogger } from "../../src/core/log/logger.js";

const id = newBridgeCallId();

async function* events(list: BackendEvent[], thenThrow = false): AsyncGenerator<BackendEvent> {
  for (const ev of list) yield ev;
  if (thenThrow) throw new Error("cut");
}

async function drain(src: AsyncGenerator<BackendEvent>): Promise<BackendEvent[]> {
  const out: BackendEvent[] = [];
  try {
    for await (const ev of src) out.push(ev);
  } catch {
    /* cut */
  }
  return out;
}

const answer: BackendEvent[] = [
  { type: "text", text: "Used: " },
  { type: "text", text: "STATUS-OK" },
  { type: "usage", usage: { promptTokens: 10, completionTokens: 3, totalTokens: 13 } },
  { type: "done", finishReason: "stop" },
];

test("a request's key: its results' ids and texts (and the message after them); none without a call of ours", () => {
  const k = resultsKey({ results: [{ id, text: "r" }] });
  assert.match(k!, /^[0-9a-f]{64}$/);
  assert.equal(resultsKey({ results: [{ id, text: "r" }] }), k, "the same request, the same key");
  assert.notEqual(resultsKey({ results: [{ id, text: "r2" }] }), k, "another result text");
  assert.notEqual(resultsKey({ results: [{ id: newBridgeCallId(), text: "r" }] }), k, "another call");
  assert.equal(resultsKey({ results: [{ id: "call_abc", text: "r" }] }), undefined, "a call the bridge did not make");
  assert.equal(resultsKey({ results: [] }), undefined);
  const both = resultsKey({ results: [], resultsThenMessage: { results: [{ id, text: "r" }], message: "hi" } });
  assert.ok(both && both !== k, "a result with the person's message after it is another request");
  assert.notEqual(
    resultsKey({ results: [], resultsThenMessage: { results: [{ id, text: "r" }], message: "bye" } }),
    both,
  );
});

test("a finished answer is replayed event for event, its usage marked replayed; not after its window", async () => {
  const rec = new RecordedAnswer();
  const passed = await drain(rec.record(events(answer)));
  assert.deepEqual(passed, answer, "recording passes every event on unchanged");
  assert.equal(rec.ended, "done");
  assert.ok(rec.replayable());
  const again = [...rec.replay()];
  assert.deepEqual(
    again.map((e) => e.type),
    answer.map((e) => e.type),
  );
  assert.deepEqual(again[1], answer[1]);
  assert.deepEqual(again[2], {
    type: "usage",
    usage: { promptTokens: 10, completionTokens: 3, totalTokens: 13, replayed: true },
  });
  assert.equal((answer[2] as any).usage.replayed, undefined, "the recorded event itself is not changed");
  assert.equal(rec.replayable(rec.endedAt + REPLAY_MS + 1), false, "too old");
  rec.expire(rec.endedAt + REPLAY_MS + 1);
  assert.deepEqual([...rec.replay()], [], "its events are dropped once the window passed");
  assert.match(rec.answerAgainText(), /no longer kept/);
});

test("an answer cut off (an error, a throw, the consumer leaving early) is not replayed, and says so", async () => {
  const errored = new RecordedAnswer();
  await drain(
    errored.record(
      events([
        { type: "text", text: "x" },
        { type: "error", error: { code: "aborted", message: "gone" } },
      ]),
    ),
  );
  assert.equal(errored.ended, "cut");
  assert.equal(errored.replayable(), false);
  assert.match(errored.answerAgainText(), /cut off/);

  const thrown = new RecordedAnswer();
  await drain(thrown.record(events([{ type: "text", text: "x" }], true)));
  assert.equal(thrown.ended, "cut");

  const left = new RecordedAnswer();
  const it = left.record(events(answer));
  await it.next();
  await it.return(undefined);
  assert.equal(left.ended, "cut", "the client went away before the end");
  assert.equal(left.replayable(), false);
});

test("an answer too large to keep is passed on whole but not replayed", async () => {
  const big = "x".repeat(1_100_000);
  const rec = new RecordedAnswer();
  const out = await drain(
    rec.record(
      events([
        { type: "text", text: big },
        { type: "text", text: big },
        { type: "done", finishReason: "stop" },
      ]),
    ),
  );
  assert.equal(out.length, 3);
  assert.equal(rec.replayable(), false);
});

test("the session keeps answers by request: a resend passes check() though no call waits, the newest 16 are kept", async () => {
  const hub = new ClientToolHub(createLogger("silent"));
  const s = hub.session("conv");
  const results = [{ id, text: "r" }];
  assert.match(s.check(results)!, /does not match/, "unknown before it was answered");
  const key = resultsKey({ results });
  assert.equal(s.answerTo(key), undefined);
  await drain(s.recordAnswer(key, events(answer)));
  assert.ok(s.answerTo(key)?.replayable());
  assert.equal(s.check(results), undefined, "a resend is not a mismatch");
  const src = events(answer);
  assert.equal(s.recordAnswer(undefined, src), src, "a request without a key is not kept");
  for (let i = 0; i < 16; i++) {
    await drain(s.recordAnswer(resultsKey({ results: [{ id: newBridgeCallId(), text: String(i) }] }), events(answer)));
  }
  assert.equal(s.answerTo(key), undefined, "the oldest is forgotten past 16");
});

test("a replayed answer's turn reports no tokens on the bus (no model was called for it); a real one does", async () => {
  const { EventBus } = await import("../../src/ops/events/bus.js");
  const { TurnEvents } = await import("../../src/request/pipeline/turn-events.js");
  const { Cancellation } = await import("../../src/core/util/cancel.js");
  const bus = new EventBus();
  const seen: any[] = [];
  bus.on((e) => seen.push(e));
  for (const replayed of [false, true]) {
    const t = new TurnEvents(bus, `turn${replayed}`, "conv", "claude", "cc", Date.now());
    const rec = new RecordedAnswer();
    await drain(rec.record(events(answer)));
    for (const ev of replayed ? rec.replay() : answer) t.observe(ev);
    t.ended(new Cancellation(), false, { model: "claude", backend: "cc" });
  }
  const [real, again] = seen.filter((e) => e.type === "turn.completed");
  assert.equal(real.promptTokens, 10);
  assert.equal(real.completionTokens, 3);
  assert.equal(again.finishReason, "stop");
  assert.equal(again.promptTokens, undefined);
  assert.equal(again.completionTokens, undefined);
});
