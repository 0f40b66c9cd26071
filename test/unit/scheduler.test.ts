/**
 * TurnScheduler: FIFO per conversation, parallel across conversations up to maxConcurrent, a bounded
 * queue with a timeout, aborts while waiting, a cap on one conversation's waiting turns, and free
 * slots granted round-robin across conversations. Driven deterministically: leases are released by the
 * test, and "not granted yet" is checked after the event loop has settled (no timing asserts).
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { QueueRejected, TurnScheduler, WaitAborted, type Lease } from "../../src/request/queue/scheduler.js";
import { Cancellation, type Abortable } from "../../src/core/util/cancel.js";

/** Let every pending promise callback and immediate run. */
async function settle(rounds = 5): Promise<void> {
  for (let i = 0; i < rounds; i++) await new Promise((r) => setImmediate(r));
}

/** An acquire whose outcome the test can inspect without awaiting it. */
function track(s: TurnScheduler, key: string, signal: Abortable = new AbortController().signal) {
  const t: { lease?: Lease; error?: Error; done: boolean; promise: Promise<void> } = {
    done: false,
    promise: Promise.resolve(),
  };
  t.promise = s.acquire(key, signal).then(
    (l) => {
      t.lease = l;
      t.done = true;
    },
    (e: Error) => {
      t.error = e;
      t.done = true;
    },
  );
  return t;
}

const sched = (
  o: Partial<{
    maxConcurrent: number;
    maxQueue: number;
    queueTimeoutMs: number;
    maxQueuedPerConversation: number;
  }> = {},
) => new TurnScheduler({ maxConcurrent: 4, maxQueue: 32, queueTimeoutMs: 60_000, ...o });

describe("per-conversation FIFO", () => {
  test("three turns of one key run strictly one after another, in arrival order", async () => {
    const s = sched();
    const order: string[] = [];
    const turns = ["t1", "t2", "t3"].map((name) => {
      const t = track(s, "conv-A");
      void t.promise.then(() => t.lease && order.push(name));
      return t;
    });
    await settle();
    assert.deepEqual(order, ["t1"], "only the first runs");
    assert.deepEqual(s.stats(), { running: 1, waiting: 2, conversations: 1, maxConcurrent: 4, maxQueue: 32 });

    turns[0]!.lease!.release();
    await settle();
    assert.deepEqual(order, ["t1", "t2"]);
    assert.equal(turns[2]!.done, false, "t3 still waits for t2");

    turns[1]!.lease!.release();
    await settle();
    assert.deepEqual(order, ["t1", "t2", "t3"]);

    turns[2]!.lease!.release();
    await settle();
    assert.deepEqual(s.stats(), { running: 0, waiting: 0, conversations: 0, maxConcurrent: 4, maxQueue: 32 });
  });

  test("a free slot does not let a later turn of the same key overtake", async () => {
    const s = sched({ maxConcurrent: 10 });
    const a1 = track(s, "k");
    const a2 = track(s, "k");
    const b1 = track(s, "other");
    await settle();
    assert.ok(a1.lease && b1.lease, "a1 and b1 run in parallel");
    assert.equal(a2.done, false);
    b1.lease!.release();
    await settle();
    assert.equal(a2.done, false, "releasing another conversation does not release this one");
    a1.lease!.release();
    await a2.promise;
    assert.ok(a2.lease);
    a2.lease.release();
  });
});

describe("parallel across keys up to maxConcurrent", () => {
  test("maxConcurrent turns of different keys run at once; the next waits for a free slot, first come first served", async () => {
    const s = sched({ maxConcurrent: 3 });
    const ts = ["a", "b", "c", "d", "e"].map((k) => track(s, k));
    await settle();
    assert.deepEqual(
      ts.map((t) => Boolean(t.lease)),
      [true, true, true, false, false],
    );
    assert.equal(s.stats().running, 3);
    assert.equal(s.stats().waiting, 2);

    ts[1]!.lease!.release();
    await settle();
    assert.deepEqual(
      ts.map((t) => Boolean(t.lease)),
      [true, true, true, true, false],
      "d (first in the queue) gets the slot",
    );
    assert.equal(s.stats().running, 3);

    ts[0]!.lease!.release();
    await settle();
    assert.ok(ts[4]!.lease);
    for (const t of ts.slice(2)) t.lease!.release();
    await settle();
    assert.equal(s.stats().running, 0);
  });

  test("waitedMs is reported and non-negative", async () => {
    const s = sched({ maxConcurrent: 1 });
    const a = track(s, "a");
    const b = track(s, "b");
    await settle();
    a.lease!.release();
    await b.promise;
    assert.ok(a.lease!.waitedMs >= 0 && b.lease!.waitedMs >= 0);
    b.lease!.release();
  });
});

describe("the bounded queue", () => {
  test("beyond maxQueue waiting turns a new turn is refused at once with retryAfterSeconds ≥ 1", async () => {
    const s = sched({ maxConcurrent: 1, maxQueue: 2 });
    const running = track(s, "a");
    const w1 = track(s, "b");
    const w2 = track(s, "c");
    await settle();
    assert.equal(s.stats().waiting, 2);
    await assert.rejects(s.acquire("d", new AbortController().signal), (err: unknown) => {
      assert.ok(err instanceof QueueRejected);
      assert.ok(
        Number.isInteger(err.retryAfterSeconds) && err.retryAfterSeconds >= 1,
        `retryAfterSeconds ${err.retryAfterSeconds}`,
      );
      assert.ok(err.retryAfterSeconds <= 60);
      assert.match(err.message, /busy/);
      return true;
    });
    assert.equal(s.stats().waiting, 2, "the refused turn took no place");
    running.lease!.release();
    await settle();
    assert.ok(w1.lease, "the queue still works after a refusal");
    w1.lease!.release();
    await settle();
    w2.lease!.release();
  });

  test("maxQueue 0: no waiting at all once the slots are taken", async () => {
    const s = sched({ maxConcurrent: 1, maxQueue: 0 });
    const a = track(s, "a");
    await settle();
    await assert.rejects(s.acquire("b", new AbortController().signal), QueueRejected);
    await assert.rejects(
      s.acquire("a", new AbortController().signal),
      QueueRejected,
      "nor behind its own conversation",
    );
    a.lease!.release();
  });

  test("retryAfterSeconds follows recent turn durations and stays within 1..60", async () => {
    const s = sched({ maxConcurrent: 1, maxQueue: 0 });
    assert.equal(s.retryAfter(), 5, "no history: about one typical turn");
    const a = await s.acquire("a", new AbortController().signal);
    a.release(); // a ~0 ms turn
    assert.equal(s.retryAfter(), 1, "never below 1");
  });
});

describe("the queue timeout", () => {
  test("a turn that gets no slot within queueTimeoutMs is refused with QueueRejected", async () => {
    const s = sched({ maxConcurrent: 1, queueTimeoutMs: 100 });
    const a = track(s, "a");
    await settle();
    await assert.rejects(s.acquire("b", new AbortController().signal), (err: unknown) => {
      assert.ok(err instanceof QueueRejected);
      assert.ok(err.retryAfterSeconds >= 1);
      assert.match(err.message, /no free slot/);
      return true;
    });
    assert.equal(s.stats().waiting, 0, "the timed-out turn left the queue");
    assert.equal(s.stats().running, 1);
    a.lease!.release();
    const b = await s.acquire("b", new AbortController().signal);
    assert.equal(s.stats().running, 1, "b's conversation is usable again");
    b.release();
    assert.equal(s.stats().conversations, 0);
  });

  test("a timed-out turn does not hold up later turns of its conversation", async () => {
    const s = sched({ maxConcurrent: 1, queueTimeoutMs: 150 });
    const a = track(s, "a");
    await settle();
    const b1 = s.acquire("b", new AbortController().signal);
    await assert.rejects(b1, QueueRejected);
    a.lease!.release();
    const b2 = await s.acquire("b", new AbortController().signal);
    b2.release();
  });

  test("a turn waiting behind its own conversation is also bounded by the queue timeout", {}, async () => {
    const s = sched({ maxConcurrent: 4, queueTimeoutMs: 100 });
    const first = track(s, "same");
    await settle();
    const second = track(s, "same");
    // Bounded wait for the outcome (the bug makes it wait forever; give it 10× the timeout).
    await Promise.race([second.promise, new Promise((r) => setTimeout(r, 1000))]);
    const outcome = second.error;
    first.lease!.release();
    await second.promise;
    second.lease?.release();
    assert.ok(
      outcome instanceof QueueRejected,
      `expected QueueRejected, got ${second.done ? (second.error?.name ?? "a lease after release") : "still waiting"}`,
    );
  });
});

describe("aborts while waiting", () => {
  test("an already-aborted signal is refused at once", async () => {
    const s = sched();
    await assert.rejects(s.acquire("a", AbortSignal.abort()), WaitAborted);
    assert.deepEqual(s.stats().waiting, 0);
    assert.equal(s.stats().conversations, 0);
  });

  test("a turn aborted just as its conversation frees up is refused at once, not after the queue timeout", async () => {
    const s = sched({ maxConcurrent: 1, queueTimeoutMs: 60_000 });
    const a = track(s, "k");
    await settle();
    const other = track(s, "x"); // waits for the only slot
    const cancel = new Cancellation(); // the pipeline's own cancellation (not an AbortSignal)
    const b = track(s, "k", cancel); // waits behind a
    await settle();
    a.lease!.release(); // `other` takes the slot; b now owns "k" and must wait for a slot
    cancel.abort(); // before b's wait for the slot has begun
    await settle();
    assert.ok(b.done, "b is refused at once");
    assert.ok(b.error instanceof WaitAborted, `expected WaitAborted, got ${b.error?.name ?? "a lease"}`);
    assert.equal(s.stats().waiting, 0);
    other.lease!.release();
    assert.equal(s.stats().conversations, 0, "nothing is left behind");
  });

  test("a Cancellation aborted while waiting for the conversation frees the place", async () => {
    const s = sched();
    const a = track(s, "k");
    await settle();
    const cancel = new Cancellation();
    const b = track(s, "k", cancel);
    await settle();
    assert.equal(s.stats().waiting, 1);
    cancel.abort();
    await b.promise;
    assert.ok(b.error instanceof WaitAborted);
    assert.equal(s.stats().waiting, 0);
    a.lease!.release();
    assert.equal(s.stats().conversations, 0);
  });

  test("abort while waiting for a slot frees the place", async () => {
    const s = sched({ maxConcurrent: 1, maxQueue: 1 });
    const a = track(s, "a");
    const ac = new AbortController();
    const b = track(s, "b", ac.signal);
    await settle();
    assert.equal(s.stats().waiting, 1);
    await assert.rejects(s.acquire("c", new AbortController().signal), QueueRejected, "the queue is full");
    ac.abort();
    await b.promise;
    assert.ok(b.error instanceof WaitAborted);
    assert.equal(s.stats().waiting, 0);
    const c = track(s, "c");
    await settle();
    assert.equal(s.stats().waiting, 1, "the freed place is usable");
    a.lease!.release();
    await settle();
    assert.ok(c.lease, "c gets the slot, not the aborted b");
    assert.equal(s.stats().running, 1);
    c.lease!.release();
  });

  test("abort of a turn waiting on its conversation does not break the chain", async () => {
    const s = sched();
    const t1 = track(s, "k");
    const ac2 = new AbortController();
    const t2 = track(s, "k", ac2.signal);
    const t3 = track(s, "k");
    await settle();
    ac2.abort();
    await t2.promise;
    assert.ok(t2.error instanceof WaitAborted);
    await settle();
    assert.equal(t3.done, false, "t3 still waits for t1 (FIFO kept)");
    assert.equal(s.stats().running, 1);
    t1.lease!.release();
    await t3.promise;
    assert.ok(t3.lease, "t3 runs after t1");
    const t4 = track(s, "k");
    await settle();
    assert.equal(t4.done, false, "the chain still serialises later turns");
    t3.lease!.release();
    await t4.promise;
    assert.ok(t4.lease);
    t4.lease!.release();
    await settle();
    assert.deepEqual(s.stats(), { running: 0, waiting: 0, conversations: 0, maxConcurrent: 4, maxQueue: 32 });
  });

  test("abort of the last waiter in a chain leaves the key usable", async () => {
    const s = sched();
    const t1 = track(s, "k");
    const ac = new AbortController();
    const t2 = track(s, "k", ac.signal);
    await settle();
    ac.abort();
    await t2.promise;
    t1.lease!.release();
    await settle();
    assert.equal(s.stats().conversations, 0);
    const t3 = await s.acquire("k", new AbortController().signal);
    t3.release();
  });
});

describe("release", () => {
  test("is idempotent: a second release changes nothing", async () => {
    const s = sched({ maxConcurrent: 1 });
    const a = track(s, "a");
    const b = track(s, "b");
    const c = track(s, "c");
    await settle();
    a.lease!.release();
    a.lease!.release();
    a.lease!.release();
    await settle();
    assert.ok(b.lease, "b got the slot");
    assert.equal(c.done, false, "a double release does not hand out a second slot");
    assert.equal(s.stats().running, 1);
    b.lease!.release();
    await settle();
    c.lease!.release();
    c.lease!.release();
    await settle();
    assert.equal(s.stats().running, 0, "never negative");
    const d = await s.acquire("d", new AbortController().signal);
    assert.equal(s.stats().running, 1);
    d.release();
  });

  test("a double release of one conversation's turn does not release its next turn twice", async () => {
    const s = sched();
    const t1 = track(s, "k");
    const t2 = track(s, "k");
    const t3 = track(s, "k");
    await settle();
    t1.lease!.release();
    t1.lease!.release();
    await settle();
    assert.ok(t2.lease);
    assert.equal(t3.done, false);
    t2.lease!.release();
    await t3.promise;
    t3.lease!.release();
  });
});

describe("waiting turns per conversation (maxQueuedPerConversation)", () => {
  const refusedForConversation = (err: unknown) => {
    assert.ok(err instanceof QueueRejected, `expected QueueRejected, got ${String(err)}`);
    assert.equal(err.scope, "conversation");
    assert.match(err.message, /maxQueuedPerConversation/);
    assert.ok(err.retryAfterSeconds >= 1 && err.retryAfterSeconds <= 60);
    return true;
  };

  test("by default two turns of a conversation may wait behind its running turn; a third is refused, other conversations are not", async () => {
    const s = sched({ maxConcurrent: 1 });
    const t1 = track(s, "flood");
    const t2 = track(s, "flood");
    const t3 = track(s, "flood");
    await settle();
    assert.ok(t1.lease);
    await assert.rejects(s.acquire("flood", new AbortController().signal), refusedForConversation);
    assert.equal(s.stats().waiting, 2, "the refused turn took no place");
    const other = track(s, "other");
    await settle();
    assert.equal(other.done, false, "another conversation still waits (it is not refused)");
    assert.equal(s.stats().waiting, 3);

    t1.lease!.release(); // the slot goes to `other` (round-robin); t2 is next of "flood"
    await settle();
    assert.ok(other.lease);
    assert.equal(t2.done, false);
    const t4 = track(s, "flood"); // still two waiting (t2, t3): refused
    await settle();
    assert.ok(t4.error && refusedForConversation(t4.error));
    other.lease!.release();
    await settle();
    assert.ok(t2.lease, "FIFO within the conversation");
    assert.equal(t3.done, false);
    const t5 = track(s, "flood"); // one waiting now (t3): t5 may wait
    await settle();
    assert.equal(t5.done, false);
    t2.lease!.release();
    await settle();
    assert.ok(t3.lease);
    t3.lease!.release();
    await settle();
    assert.ok(t5.lease);
    t5.lease!.release();
    assert.deepEqual(s.stats(), { running: 0, waiting: 0, conversations: 0, maxConcurrent: 1, maxQueue: 32 });
  });

  test("a turn waiting for a slot counts: with no slot free, two turns of an idle conversation wait, the third is refused", async () => {
    const s = sched({ maxConcurrent: 1 });
    const busy = track(s, "busy");
    const k1 = track(s, "k");
    const k2 = track(s, "k");
    await settle();
    await assert.rejects(s.acquire("k", new AbortController().signal), refusedForConversation);
    busy.lease!.release();
    await settle();
    assert.ok(k1.lease);
    k1.lease!.release();
    await settle();
    assert.ok(k2.lease);
    k2.lease!.release();
  });

  test("the cap is configurable, and a place freed by an abort or a timeout is usable again", async () => {
    const s = sched({ maxQueuedPerConversation: 1, queueTimeoutMs: 100 });
    const t1 = track(s, "k");
    const ac = new AbortController();
    const t2 = track(s, "k", ac.signal);
    await settle();
    await assert.rejects(s.acquire("k", new AbortController().signal), refusedForConversation);
    ac.abort();
    await t2.promise;
    assert.ok(t2.error instanceof WaitAborted);
    const t3 = s.acquire("k", new AbortController().signal); // the freed place; then the timeout
    await assert.rejects(
      t3,
      (err: unknown) =>
        err instanceof QueueRejected &&
        /previous turn is still running/.test(err.message) &&
        err.scope === "conversation",
    );
    const t4 = track(s, "k");
    await settle();
    assert.equal(t4.done, false, "waits again, in the place the timed-out turn left");
    t1.lease!.release();
    await t4.promise;
    assert.ok(t4.lease);
    t4.lease!.release();
    assert.equal(s.stats().conversations, 0);

    const none = sched({ maxQueuedPerConversation: 0 });
    const only = await none.acquire("k", new AbortController().signal);
    await assert.rejects(none.acquire("k", new AbortController().signal), refusedForConversation);
    only.release();
  });

  test("the bridge-wide refusal is still the busy one (scope bridge)", async () => {
    const s = sched({ maxConcurrent: 1, maxQueue: 1 });
    const a = track(s, "a");
    const b = track(s, "b");
    await settle();
    await assert.rejects(
      s.acquire("c", new AbortController().signal),
      (err: unknown) => err instanceof QueueRejected && err.scope === "bridge" && /busy/.test(err.message),
    );
    a.lease!.release();
    await settle();
    b.lease!.release();
  });
});

describe("free slots are granted round-robin across conversations", () => {
  test("a conversation whose turn ends goes behind the conversations already waiting, even with older turns of its own", async () => {
    const s = sched({ maxConcurrent: 1 });
    const asks: Array<[key: string, name: string]> = [
      ["A", "a1"],
      ["A", "a2"],
      ["A", "a3"],
      ["B", "b1"],
      ["C", "c1"],
      ["B", "b2"],
    ];
    const ts = asks.map(([key]) => track(s, key));
    const granted: string[] = [];
    for (let i = 0; i < asks.length; i++) {
      await settle();
      const now = ts.flatMap((t, j) => (t.lease && !granted.includes(asks[j]![1]) ? [j] : []));
      assert.equal(now.length, 1, `one slot, one turn at a time (granted so far: ${granted.join(",")})`);
      granted.push(asks[now[0]!]![1]);
      ts[now[0]!]!.lease!.release();
    }
    assert.deepEqual(granted, ["a1", "b1", "c1", "a2", "b2", "a3"]);
    assert.deepEqual(s.stats().conversations, 0);
  });

  test("5 flooding conversations against 20 light ones: every light turn is admitted and granted within one round of grants", async () => {
    const maxConcurrent = 4;
    const s = sched({ maxConcurrent, maxQueue: 32 });
    type T = ReturnType<typeof track> & { key: string; grantedAt: number | undefined };
    const floods = Array.from({ length: 5 }, (_, i) => `flood-${i}`);
    const turns: T[] = [];
    let floodRefusals = 0;
    const submit = (key: string) => {
      const t: T = Object.assign(track(s, key), { key, grantedAt: undefined });
      turns.push(t);
      return t;
    };
    /** Each flood keeps as many turns in flight as it is allowed, plus one more that is refused. */
    const flood = async () => {
      for (const key of floods) {
        for (let i = 0; i < 12; i++) {
          const t = submit(key);
          await settle(1);
          if (t.error) {
            assert.ok(
              t.error instanceof QueueRejected && t.error.scope === "conversation",
              `a flood is refused for its own conversation: ${t.error.message}`,
            );
            floodRefusals++;
            break;
          }
        }
      }
    };
    await flood();
    const light = Array.from({ length: 20 }, (_, i) => submit(`light-${i}`));
    await settle();
    for (const l of light) assert.equal(l.error, undefined, `light turn refused: ${l.error?.message}`);

    let grants = 0;
    const mark = () => {
      for (const t of turns) if (t.lease && t.grantedAt === undefined) t.grantedAt = ++grants;
    };
    mark();
    const released = new Set<T>();
    // Release the oldest running turn, one at a time; the floods refill their backlog after each.
    for (let round = 0; round < 200 && light.some((l) => !l.lease); round++) {
      const oldest = turns.filter((t) => t.lease && !released.has(t)).sort((x, y) => x.grantedAt! - y.grantedAt!)[0];
      assert.ok(oldest, "something runs");
      released.add(oldest);
      oldest.lease!.release();
      await settle();
      await flood();
      mark();
      assert.ok(s.stats().running <= maxConcurrent);
    }
    assert.ok(floodRefusals > 5, "the floods were refused beyond their cap");
    for (const l of light) assert.ok(l.lease, `${l.key} was granted`);
    // 25 conversations: each light one had at most all the others ahead of it in the round.
    const bound = maxConcurrent + 25;
    for (const l of light)
      assert.ok(l.grantedAt! <= bound, `${l.key} granted at grant #${l.grantedAt}, later than ${bound}`);
    // Drain: release whatever runs until nothing runs or waits (no timer is left behind).
    for (let i = 0; i < 200 && (s.stats().running || s.stats().waiting); i++) {
      for (const t of turns) {
        if (t.lease && !released.has(t)) {
          released.add(t);
          t.lease.release();
        }
      }
      await settle();
    }
    assert.deepEqual(s.stats(), { running: 0, waiting: 0, conversations: 0, maxConcurrent, maxQueue: 32 });
  });
});
