/**
 * TurnScheduler, places in a full queue: a conversation refused because the queue was full keeps a
 * place (a reservation, in refusal order) that no other conversation takes, and its Retry-After is
 * the time by which enough places will have freed for it. Driven deterministically: leases are
 * released by the test, no timing asserts (with no turn finished yet, a turn counts as 5 s).
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { QueueRejected, TurnScheduler, type Lease } from "../../src/request/queue/scheduler.js";

async function settle(rounds = 5): Promise<void> {
  for (let i = 0; i < rounds; i++) await new Promise((r) => setImmediate(r));
}

function track(s: TurnScheduler, key: string) {
  const t: { lease?: Lease; error?: Error; promise: Promise<void> } = { promise: Promise.resolve() };
  t.promise = s.acquire(key, new AbortController().signal).then(
    (l) => void (t.lease = l),
    (e: Error) => void (t.error = e),
  );
  return t;
}

/** The refusal of `key`, or a failure when it is admitted. */
async function refusal(s: TurnScheduler, key: string): Promise<QueueRejected> {
  const t = track(s, key);
  await settle();
  assert.ok(t.error instanceof QueueRejected, `${key} is refused (admitted: ${Boolean(t.lease)})`);
  return t.error;
}

test("a conversation refused because the queue is full keeps a place: others are refused it, and it gets in when it comes back", async () => {
  const s = new TurnScheduler({ maxConcurrent: 1, maxQueue: 1, queueTimeoutMs: 60_000 });
  const a = track(s, "a");
  const b = track(s, "b");
  await settle();
  const c = await refusal(s, "c");
  assert.equal(c.scope, "bridge");
  assert.match(c.message, /busy/);
  assert.equal(s.reserved(), 1);

  a.lease!.release(); // b gets the slot: the queue's one place is free, and c's
  await settle();
  assert.ok(b.lease);
  const d = await refusal(s, "d");
  assert.match(d.message, /1 more place kept for conversations refused earlier/);
  const back = track(s, "c");
  await settle();
  assert.equal(back.error, undefined, "c, coming back, gets the place kept for it");
  assert.equal(s.stats().waiting, 1);
  assert.equal(s.reserved(), 1, "c's reservation is used up; d now holds one");

  b.lease!.release();
  await settle();
  assert.ok(back.lease, "and then the slot, in its turn");
  back.lease!.release();
  await settle();
  assert.deepEqual(s.stats(), { running: 0, waiting: 0, conversations: 0, maxConcurrent: 1, maxQueue: 1 });
});

test("Retry-After is the time by which the places a refused conversation needs will have freed; reservations are served in refusal order", async () => {
  // 2 slots, 2 places; with no turn finished a turn counts as 5 s: a place frees every 2.5 s.
  const s = new TurnScheduler({ maxConcurrent: 2, maxQueue: 2, queueTimeoutMs: 60_000 });
  const running = [track(s, "a"), track(s, "b")];
  const waiting = [track(s, "c"), track(s, "d")];
  await settle();
  assert.equal((await refusal(s, "e")).retryAfterSeconds, 3, "e needs 1 place: 2.5 s, rounded up");
  assert.equal((await refusal(s, "f")).retryAfterSeconds, 5, "f needs 2 places (e's first)");
  assert.equal((await refusal(s, "g")).retryAfterSeconds, 8, "g needs 3");
  assert.equal((await refusal(s, "e")).retryAfterSeconds, 3, "e, back too early, keeps its place in line");
  assert.equal(s.reserved(), 3);

  running[0]!.lease!.release(); // c runs: one place frees, e's
  await settle();
  assert.ok(waiting[0]!.lease);
  await refusal(s, "f"); // behind e
  await refusal(s, "h"); // no reservation: every free place is kept
  const e = track(s, "e");
  await settle();
  assert.equal(e.error, undefined, "e gets in");

  running[1]!.lease!.release(); // d runs: f's place frees
  await settle();
  assert.ok(waiting[1]!.lease);
  const f = track(s, "f");
  await settle();
  assert.equal(f.error, undefined, "f gets in");

  for (const t of [waiting[0]!, waiting[1]!]) t.lease!.release();
  await settle();
  for (const t of [e, f]) {
    assert.ok(t.lease);
    t.lease!.release();
  }
  await settle();
  assert.equal(s.stats().running, 0);
});

test("a conversation refused for its own backlog keeps no place; nor does anyone with no queue at all (maxQueue 0)", async () => {
  const s = new TurnScheduler({ maxConcurrent: 1, maxQueue: 8, queueTimeoutMs: 60_000, maxQueuedPerConversation: 1 });
  const a1 = track(s, "a");
  const a2 = track(s, "a");
  await settle();
  assert.equal((await refusal(s, "a")).scope, "conversation");
  assert.equal(s.reserved(), 0);
  a1.lease!.release();
  await settle();
  a2.lease!.release();

  const none = new TurnScheduler({ maxConcurrent: 1, maxQueue: 0, queueTimeoutMs: 60_000 });
  const only = track(none, "x");
  await settle();
  assert.equal((await refusal(none, "y")).retryAfterSeconds, 5, "about one turn, as before");
  assert.equal(none.reserved(), 0);
  only.lease!.release();
});
