/**
 * The conversation's lock across instances (src/request/queue/conversation-locks.ts) on a real
 * PostgreSQL, with two `PostgresDb` pools standing for two bridges: waiters get the conversation in
 * the order they asked, a wait past its time is the queue's 429 (scope "conversation"), a client
 * that goes away stops waiting, and neither leaves a lock or a connection behind.
 */
import assert from "node:assert/strict";
import { after, afterEach, before, beforeEach, describe, test } from "node:test";
import { PostgresDb } from "../../src/core/db/postgres.js";
import { Cancellation } from "../../src/core/util/cancel.js";
import { PgConversationLocks } from "../../src/request/queue/conversation-locks.js";
import { QueueRejected, WaitAborted } from "../../src/request/queue/scheduler.js";
import { freshSchema } from "../helpers/pg-schema.js";
import { startPostgres, type TestPostgres } from "../../testkit/postgres.js";

let pg: TestPostgres;
before(async () => {
  pg = await startPostgres();
});
after(async () => {
  await pg?.stop();
});

/** Advisory locks waited for (not granted) on the server, from any connection. */
async function waiting(db: PostgresDb): Promise<number> {
  const r = await db.get<{ n: number }>(
    "SELECT count(*) AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted",
  );
  return r!.n;
}

/** Poll until `check` holds (bounded). */
async function until(check: () => Promise<boolean>, what: string, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  assert.fail(`timed out waiting for ${what}`);
}

/** Every connection of the pool is back and idle (none held by a lock, none dropped mid-use). */
function allIdle(db: PostgresDb): boolean {
  return db.pool.idleCount === db.pool.totalCount && db.pool.waitingCount === 0;
}

describe("conversation locks on PostgreSQL (two instances)", () => {
  let a: PostgresDb;
  let b: PostgresDb;
  let locksA: PgConversationLocks;
  let locksB: PgConversationLocks;

  beforeEach(async () => {
    const url = await freshSchema(pg);
    a = await PostgresDb.open({ url, poolSize: 4 });
    b = await PostgresDb.open({ url, poolSize: 4 });
    locksA = new PgConversationLocks(a, () => 7);
    locksB = new PgConversationLocks(b, () => 7);
  });
  afterEach(async () => {
    await a.close();
    await b.close();
  });

  test("turns of one conversation on two instances get it one at a time, in the order they asked", async () => {
    const order: string[] = [];
    const first = await locksA.acquire("conv", new Cancellation(), 5000);
    order.push("a1");
    const b1 = locksB.acquire("conv", new Cancellation(), 5000).then((l) => (order.push("b1"), l));
    await until(async () => (await waiting(a)) === 1, "b1 to wait");
    const a2 = locksA.acquire("conv", new Cancellation(), 5000).then((l) => (order.push("a2"), l));
    await until(async () => (await waiting(a)) === 2, "a2 to wait");
    // Another conversation is not held up.
    const other = await locksB.acquire("other", new Cancellation(), 1000);
    await other.release();

    await first.release();
    const l2 = await b1;
    assert.deepEqual(order, ["a1", "b1"], "a2 waits behind b1, who asked first");
    await l2.release();
    const l3 = await a2;
    assert.deepEqual(order, ["a1", "b1", "a2"]);
    await l3.release();
    await until(async () => allIdle(a) && allIdle(b), "every connection back in its pool");
  });

  test("a wait past its time is refused like the local queue (429, scope conversation) and leaves nothing queued", async () => {
    const held = await locksA.acquire("conv", new Cancellation(), 5000);
    const t0 = Date.now();
    await assert.rejects(
      locksB.acquire("conv", new Cancellation(), 300),
      (e: unknown) =>
        e instanceof QueueRejected &&
        e.scope === "conversation" &&
        e.retryAfterSeconds === 7 &&
        /previous turn is still running on another instance/.test(e.message),
    );
    assert.ok(Date.now() - t0 >= 290, "it waited its time");
    await until(async () => (await waiting(a)) === 0, "the refused wait to leave the server's queue");
    await held.release();
    // The conversation is free at once: the refused waiter did not take it later.
    const next = await locksB.acquire("conv", new Cancellation(), 1000);
    await next.release();
    await until(async () => allIdle(a) && allIdle(b), "every connection back in its pool");
  });

  test("the client going away stops the wait (WaitAborted); an aborted signal does not wait at all", async () => {
    const held = await locksA.acquire("conv", new Cancellation(), 5000);
    const cancel = new Cancellation();
    const waiter = locksB.acquire("conv", cancel, 10_000);
    await until(async () => (await waiting(a)) === 1, "the waiter to wait");
    cancel.abort();
    await assert.rejects(waiter, WaitAborted);
    await until(async () => (await waiting(a)) === 0, "the aborted wait to leave the server's queue");
    const gone = new Cancellation();
    gone.abort();
    await assert.rejects(locksB.acquire("conv", gone, 10_000), WaitAborted);
    await held.release();
    await held.release(); // idempotent
    const next = await locksB.acquire("conv", new Cancellation(), 1000);
    await next.release();
    await until(async () => allIdle(a) && allIdle(b), "every connection back in its pool");
  });

  test("a holder whose connection breaks frees the conversation, and its release does not fail", async () => {
    const held = await locksA.acquire("conv", new Cancellation(), 5000);
    const waiter = locksB.acquire("conv", new Cancellation(), 10_000);
    await until(async () => (await waiting(b)) === 1, "the waiter to wait");
    // The server ends the holder's session (as when its bridge is killed or the network goes).
    await b.run(
      "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND granted AND pid <> pg_backend_pid()",
    );
    const l = await waiter;
    await held.release(); // the broken connection is dropped, not returned to the pool
    await l.release();
    await until(async () => allIdle(a) && allIdle(b), "every connection back in its pool");
  });
});
