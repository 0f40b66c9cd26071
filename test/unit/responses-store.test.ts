/**
 * The response store (src/core/store/responses.ts), on both engines (a SQLite file and a real
 * PostgreSQL, testkit/postgres.ts): a chain read back to its root from rows that each hold
 * only their own part; writes batched and never missed by a read; the store survives closing and
 * reopening; `keepDays` measured from a chain's last use (continuing a chain keeps all of it);
 * `maxStored` drops the least recently used rows first (down to 90%); a chain whose first part was
 * pruned says which response is missing. On PostgreSQL, a chain begun by one instance's store is
 * continued by another's.
 */
import assert from "node:assert/strict";
import path from "node:path";
import { describe, test } from "node:test";
import { PostgresDb } from "../../src/core/db/postgres.js";
import { ResponseStore, type ResponseStoreOptions, type StoredResponse } from "../../src/core/store/responses.js";
import { cleanup, tempDir } from "../helpers/bridge.js";
import { sharedTestDatabase } from "../../testkit/postgres.js";

const DAY = 86_400_000;

function clock(start = Date.UTC(2026, 10, 28)) {
  let t = start;
  return { now: () => t, add: (ms: number) => (t += ms) };
}

const row = (id: string, previous: StoredResponse | null, text = id): StoredResponse => ({
  id,
  previousId: previous?.id ?? null,
  root: previous?.root ?? id,
  conversation: previous?.conversation ?? `conv:${id}`,
  messages: [
    { role: "user", content: `q ${text}` },
    { role: "assistant", content: `a ${text}` },
  ],
  input: [{ type: "message", role: "user", content: `q ${text}` }],
  body: JSON.stringify({ id, object: "response" }),
});

/** Where a test's stores live: one SQLite file, or the file's PostgreSQL database, emptied (a new database costs a second). */
interface Place {
  open(opts: ResponseStoreOptions): Promise<ResponseStore>;
  done(): Promise<void>;
}

/** One migrated database for the file (its tables emptied between cases). */
const shared = sharedTestDatabase();

async function place(engine: "sqlite" | "postgres"): Promise<Place> {
  if (engine === "sqlite") {
    const dir = tempDir("cb-resp-store-");
    const file = path.join(dir, "responses.db");
    return { open: (o) => ResponseStore.open(file, o), done: async () => cleanup(dir) };
  }
  await shared.db.run("TRUNCATE responses");
  return { open: (o) => ResponseStore.open(shared.db, o), done: async () => {} };
}

for (const engine of ["sqlite", "postgres"] as const)
  describe(engine, () => {
    test("a chain is read back whole, oldest first, with its root's conversation; reads see writes not yet flushed; it survives a reopen", async () => {
      const p = await place(engine);
      try {
        const s = await p.open({ keepDays: 30, maxStored: 100 });
        const a = row("resp_a", null);
        const b = row("resp_b", a);
        const c = row("resp_c", b);
        s.put(a);
        s.put(b);
        s.put(c);
        // Not flushed yet (50 ms), yet found.
        const chain = await s.chain("resp_c");
        assert.ok(chain.ok);
        assert.equal(chain.root, "resp_a");
        assert.equal(chain.conversation, "conv:resp_a");
        assert.deepEqual(
          chain.messages.map((m: any) => m.content),
          ["q resp_a", "a resp_a", "q resp_b", "a resp_b", "q resp_c", "a resp_c"],
        );
        assert.deepEqual(await s.chain("resp_nope"), { ok: false, missing: "resp_nope" });
        assert.equal(await s.body("resp_b"), JSON.stringify({ id: "resp_b", object: "response" }));
        assert.deepEqual(await s.input("resp_b"), [{ type: "message", role: "user", content: "q resp_b" }]);
        s.put(row("resp_d", null));
        await s.close();
        const again = await p.open({ keepDays: 30, maxStored: 100 });
        assert.equal(await again.size(), 4, "closing wrote what waited");
        assert.ok((await again.chain("resp_c")).ok);
        assert.ok(await again.delete("resp_a"));
        assert.equal(await again.delete("resp_a"), false);
        assert.deepEqual(await again.chain("resp_c"), { ok: false, missing: "resp_a" });
        await again.close();
      } finally {
        await p.done();
      }
    });

    test("keepDays counts from a chain's last use: continuing an old chain keeps all of it; an unused one goes", async () => {
      const p = await place(engine);
      try {
        const c = clock();
        const s = await p.open({ keepDays: 10, maxStored: 100, now: c.now });
        const a = row("resp_a", null);
        const x = row("resp_x", null);
        s.put(a);
        s.put(x);
        await s.flush();
        c.add(8 * DAY);
        s.put(row("resp_b", a)); // touches resp_a
        await s.flush();
        c.add(3 * DAY);
        assert.equal(await s.prune(), 1, "only the unused chain went");
        assert.equal(await s.body("resp_x"), undefined);
        assert.ok((await s.chain("resp_b")).ok);
        c.add(11 * DAY);
        await s.prune();
        assert.equal(await s.size(), 0);
        await s.close();
      } finally {
        await p.done();
      }
    });

    test("maxStored: past it the least recently used rows go, down to 90%; a write past the cap prunes by itself", async () => {
      const p = await place(engine);
      try {
        const c = clock();
        const s = await p.open({ keepDays: 30, maxStored: 10, now: c.now });
        for (let i = 0; i < 10; i++) {
          s.put(row(`resp_${i}`, null));
          c.add(1000);
        }
        await s.flush();
        assert.equal(await s.size(), 10);
        // resp_0 is used again (continued): resp_1 is now the least recently used.
        s.put(row("resp_0b", row("resp_0", null)));
        await s.flush();
        assert.equal(await s.size(), 9, "11 rows > 10: down to 9");
        assert.equal(await s.body("resp_1"), undefined);
        assert.equal(await s.body("resp_2"), undefined);
        assert.ok((await s.chain("resp_0b")).ok, "the chain used last is kept whole");
        await s.close();
      } finally {
        await p.done();
      }
    });

    test("writes wait at most 50 ms, and are written at once when 256 wait", async () => {
      const p = await place(engine);
      try {
        const s = await p.open({ keepDays: 30, maxStored: 10_000 });
        const pending = () => (s as unknown as { pending: unknown[] }).pending.length;
        for (let i = 0; i < 256; i++) s.put(row(`resp_${i}`, null));
        // 256 waiting: written by the 256th put, before any read.
        assert.equal(pending(), 0);
        s.put(row("resp_late", null));
        assert.equal(pending(), 1);
        await new Promise((r) => setTimeout(r, 120));
        assert.equal(pending(), 0, "the timer wrote it");
        assert.equal(await s.size(), 257);
        await s.close();
      } finally {
        await p.done();
      }
    });
  });

test("postgres: a chain begun by one instance's store is continued by another's", async () => {
  await shared.db.run("TRUNCATE responses");
  const other = await PostgresDb.open({ url: shared.url });
  try {
    const a = await ResponseStore.open(shared.db, { keepDays: 30, maxStored: 100 });
    const b = await ResponseStore.open(other, { keepDays: 30, maxStored: 100 });
    const first = row("resp_1", null);
    a.put(first);
    await a.flush();
    const chain = await b.chain("resp_1");
    assert.ok(chain.ok);
    b.put(row("resp_2", first));
    await b.flush();
    assert.deepEqual(
      ((await a.chain("resp_2")) as { messages: { content: string }[] }).messages.map((m) => m.content),
      ["q resp_1", "a resp_1", "q resp_2", "a resp_2"],
    );
    await Promise.all([a.close(), b.close()]);
  } finally {
    await other.close();
  }
});
