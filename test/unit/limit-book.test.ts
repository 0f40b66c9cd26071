/**
 * Where the limit book (src/core/store/limits.ts) is kept, on both backings: `<dataDir>/limits.json`
 * (the SQLite default) and the `backend_limits` table of a real PostgreSQL (testkit/postgres.ts).
 * The same cases on both: a limit noted is found again by a book opened later, one that reset is
 * gone, an answer clears it for good. On PostgreSQL, two instances' books on one database: a limit
 * one notes, the other skips (told by NOTIFY), a clear reaches the other too, and an instance whose
 * clock expired an old limit does not drop the newer one another instance noted.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { StoreBacking } from "../../src/core/db/backing.js";
import { PostgresDb } from "../../src/core/db/postgres.js";
import { type LimitBook, openLimitBook } from "../../src/core/store/limits.js";
import { cleanup, eventually, tempDir } from "../helpers/bridge.js";
import { sharedTestDatabase } from "../../testkit/postgres.js";

/** One migrated database for the file (its tables emptied between cases). */
const shared = sharedTestDatabase();

/** A backing for a test: a fresh data dir, or the file's PostgreSQL database with its book emptied. */
async function backing(engine: "sqlite" | "postgres"): Promise<{ b: StoreBacking; done(): void }> {
  const dataDir = tempDir("cb-limit-book-");
  if (engine === "sqlite") return { b: { kind: "sqlite", dataDir }, done: () => cleanup(dataDir) };
  await shared.db.run("DELETE FROM backend_limits");
  return { b: { kind: "postgres", db: shared.db, dataDir, leaseMs: 30_000 }, done: () => cleanup(dataDir) };
}

for (const engine of ["sqlite", "postgres"] as const)
  describe(engine, () => {
    test("a limit noted is found by a book opened later; one that reset is gone; an answer clears it for good", async () => {
      const { b, done } = await backing(engine);
      const books: LimitBook[] = [];
      const open = async () => {
        const book = await openLimitBook(b, { now: () => now });
        books.push(book);
        return book;
      };
      let now = 1_800_000_000_000;
      try {
        const book = await open();
        assert.equal(book.exhausted("cc"), undefined);
        book.hit("cc", "You've hit your session limit", now + 3_600_000, 300);
        book.hit("gm", "RESOURCE_EXHAUSTED", undefined, 300);
        await book.close(); // writes what waits
        const again = await open();
        assert.deepEqual(again.exhausted("cc"), {
          until: now + 3_600_000,
          resetAt: now + 3_600_000,
          message: "You've hit your session limit",
          since: now,
        });
        assert.equal(again.exhausted("gm")!.until, now + 300_000);
        now += 301_000;
        assert.equal(again.exhausted("gm"), undefined, "tried again after the backoff");
        again.clear("cc");
        await again.close();
        assert.deepEqual((await open()).all(), {}, "the clear and the reset are kept");
      } finally {
        for (const book of books) await book.close();
        done();
      }
    });
  });

test("postgres: a limit one instance notes, another skips; a clear reaches it too; an old limit's expiry keeps a newer one", async () => {
  await shared.db.run("DELETE FROM backend_limits");
  const other = await PostgresDb.open({ url: shared.url });
  const dirs = [tempDir("cb-limit-a-"), tempDir("cb-limit-b-")];
  let nowA = Date.now();
  const nowB = Date.now();
  const a = await openLimitBook(
    { kind: "postgres", db: shared.db, dataDir: dirs[0]!, leaseMs: 30_000 },
    { now: () => nowA },
  );
  const b = await openLimitBook(
    { kind: "postgres", db: other, dataDir: dirs[1]!, leaseMs: 30_000 },
    { now: () => nowB },
  );
  try {
    a.hit("cc", "limit on A", undefined, 60);
    assert.ok(await eventually(() => b.exhausted("cc")?.message === "limit on A", 5000), "B learnt A's limit");
    b.clear("cc");
    assert.ok(await eventually(() => a.exhausted("cc") === undefined, 5000), "A learnt B's clear");
    // A's clock is past the first limit's end; meanwhile B notes a newer one: A's expiry keeps it.
    a.hit("cc", "first", undefined, 1);
    assert.ok(await eventually(() => b.exhausted("cc")?.message === "first", 5000));
    b.hit("cc", "newer", undefined, 600);
    nowA += 2000;
    assert.equal(a.exhausted("cc")?.message === "first", false, "expired on A's clock (or replaced already)");
    await a.close();
    await b.close();
    const row = await shared.db.get<{ message: string }>("SELECT message FROM backend_limits WHERE backend = 'cc'");
    assert.equal(row?.message, "newer");
  } finally {
    await a.close();
    await b.close();
    await other.close();
    for (const d of dirs) cleanup(d);
  }
});
