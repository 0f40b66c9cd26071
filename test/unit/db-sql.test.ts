/**
 * The SQL engines every store is written against (src/core/db/sql.ts, postgres.ts): the same cases
 * on SQLite and on a real PostgreSQL (testkit/postgres.ts); then what only PostgreSQL gives the
 * bridge: advisory locks (order, a bounded wait, abort), LISTEN/NOTIFY (and listening again when the
 * listening connection is killed), migrations (once, recorded, a failing one rolled back whole).
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import Database from "better-sqlite3";
import { PostgresDb, migratePostgres } from "../../src/core/db/postgres.js";
import { numberPlaceholders, type Sql, SqliteSql } from "../../src/core/db/sql.js";
import { startPostgres, type TestPostgres } from "../../testkit/postgres.js";

let pg: TestPostgres;
const closers: Array<() => Promise<void> | void> = [];
before(async () => {
  pg = await startPostgres();
});
after(async () => {
  for (const c of closers.reverse()) await c();
  await pg?.stop();
});

async function engine(kind: "sqlite" | "postgres"): Promise<Sql> {
  if (kind === "sqlite") {
    const db = new Database(":memory:");
    closers.push(() => {
      db.close();
    });
    return new SqliteSql(db);
  }
  const db = await PostgresDb.open({ url: await pg.database(), migrations: [] });
  closers.push(() => db.close());
  return db;
}

const until = async (check: () => boolean, ms = 5000) => {
  const end = Date.now() + ms;
  while (!check() && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
  return check();
};

it("placeholders are numbered in order", () => {
  assert.equal(numberPlaceholders("SELECT ? , ?, (?)"), "SELECT $1 , $2, ($3)");
});

for (const kind of ["sqlite", "postgres"] as const) {
  describe(`Sql on ${kind}`, () => {
    it("rows in and out: integers as numbers, null, upsert, changes", async () => {
      const sql = await engine(kind);
      await sql.run("CREATE TABLE t (k TEXT PRIMARY KEY, n BIGINT NOT NULL, note TEXT, flag INTEGER)");
      const big = Date.now() * 1000;
      await sql.run("INSERT INTO t (k, n, note, flag) VALUES (?, ?, ?, ?)", ["a", big, null, true]);
      const up = await sql.run(
        "INSERT INTO t (k, n, note) VALUES (?, ?, ?) ON CONFLICT (k) DO UPDATE SET n = excluded.n + t.n",
        ["a", 1, "x"],
      );
      assert.equal(up.changes, 1);
      const row = await sql.get<{ k: string; n: number; note: string | null; flag: number }>(
        "SELECT * FROM t WHERE k = ?",
        ["a"],
      );
      assert.deepEqual(row, { k: "a", n: big + 1, note: null, flag: 1 });
      assert.equal(typeof row!.n, "number");
      assert.equal(await sql.get("SELECT * FROM t WHERE k = ?", ["nope"]), undefined);
      const ignored = await sql.run("INSERT INTO t (k, n) VALUES (?, ?) ON CONFLICT DO NOTHING", ["a", 5]);
      assert.equal(ignored.changes, 0);
      assert.deepEqual(await sql.all<{ c: number }>("SELECT COUNT(*) AS c FROM t"), [{ c: 1 }]);
    });

    it("a transaction commits whole, or rolls back whole when it throws", async () => {
      const sql = await engine(kind);
      await sql.run("CREATE TABLE t (k TEXT PRIMARY KEY)");
      await sql.tx(async (q) => {
        await q.run("INSERT INTO t (k) VALUES (?)", ["one"]);
        await q.run("INSERT INTO t (k) VALUES (?)", ["two"]);
      });
      await assert.rejects(
        sql.tx(async (q) => {
          await q.run("INSERT INTO t (k) VALUES (?)", ["three"]);
          await q.run("INSERT INTO t (k) VALUES (?)", ["one"]); // duplicate key
        }),
      );
      const keys = (await sql.all<{ k: string }>("SELECT k FROM t ORDER BY k")).map((r) => r.k);
      assert.deepEqual(keys, ["one", "two"]);
    });

    it("another call waits for an open transaction and sees its result", async () => {
      const sql = await engine(kind);
      await sql.run("CREATE TABLE c (id INTEGER PRIMARY KEY, n BIGINT NOT NULL)");
      await sql.run("INSERT INTO c (id, n) VALUES (1, 0)");
      // Read-modify-write in transactions, interleaved with plain reads: no update is lost.
      const bumps = Array.from({ length: 10 }, () =>
        sql.tx(async (q) => {
          const r = await q.get<{ n: number }>(
            kind === "postgres" ? "SELECT n FROM c WHERE id = 1 FOR UPDATE" : "SELECT n FROM c WHERE id = 1",
          );
          await new Promise((res) => setTimeout(res, 2));
          await q.run("UPDATE c SET n = ? WHERE id = 1", [r!.n + 1]);
        }),
      );
      const reads = Array.from({ length: 5 }, () => sql.get<{ n: number }>("SELECT n FROM c WHERE id = 1"));
      await Promise.all([...bumps, ...reads]);
      assert.equal((await sql.get<{ n: number }>("SELECT n FROM c WHERE id = 1"))!.n, 10);
    });
  });
}

describe("PostgreSQL only", () => {
  it("an advisory lock: one holder, waiters in order, a bounded wait given up by abort, free after release", async () => {
    const url = await pg.database();
    const a = await PostgresDb.open({ url, migrations: [] });
    const b = await PostgresDb.open({ url, migrations: [] });
    closers.push(
      () => a.close(),
      () => b.close(),
    );
    const held = await a.lock("conversation", "k1");
    const order: string[] = [];
    const second = b.lock("conversation", "k1").then((l) => {
      order.push("b");
      return l;
    });
    await new Promise((r) => setTimeout(r, 100));
    const ac = new AbortController();
    const third = a.lock("conversation", "k1", ac.signal);
    await new Promise((r) => setTimeout(r, 100));
    assert.deepEqual(order, [], "nobody gets a held lock");
    ac.abort(new Error("the client went away"));
    await assert.rejects(third, /the client went away/);
    // Another key is not blocked.
    const other = await b.tryLock("conversation", "k2");
    assert.ok(other);
    await other.release();
    await held.release();
    const l2 = await second;
    assert.deepEqual(order, ["b"]);
    assert.equal(await a.tryLock("conversation", "k1"), undefined, "held by b now");
    await l2.release();
    await l2.release(); // idempotent
    const again = await a.tryLock("conversation", "k1");
    assert.ok(again, "free after release");
    await again.release();
    // No connection leaked by the aborted wait: the pools still serve.
    assert.equal((await a.get<{ one: number }>("SELECT 1 AS one"))!.one, 1);
  });

  it("LISTEN/NOTIFY across instances, and listening again after the listening connection was killed", async () => {
    const url = await pg.database();
    const a = await PostgresDb.open({ url, migrations: [] });
    const b = await PostgresDb.open({ url, migrations: [] });
    closers.push(
      () => a.close(),
      () => b.close(),
    );
    const got: string[] = [];
    const stop = await b.listen("cb_test", (p) => got.push(p));
    await a.notify("cb_test", "one");
    assert.ok(await until(() => got.length === 1), "delivered");
    await a.run("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'clawbridge-listen'");
    // The listener reconnects and listens again; keep notifying until one arrives.
    let n = 0;
    assert.ok(
      await until(() => {
        if (got.length < 2) void a.notify("cb_test", `again-${n++}`);
        return got.length >= 2;
      }, 8000),
      "delivered after the listening connection was killed",
    );
    stop();
    const before = got.length;
    await a.notify("cb_test", "after stop");
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(got.length, before, "no delivery after unsubscribing");
  });

  it("migrations run once, are recorded, and a failing one leaves nothing behind", async () => {
    const url = await pg.database();
    const db = await PostgresDb.open({ url, migrations: [] });
    closers.push(() => db.close());
    const m1 = { version: 1, name: "one", sql: "CREATE TABLE m1 (k TEXT)" };
    const m2 = { version: 2, name: "two", sql: "CREATE TABLE m2 (k TEXT)" };
    const bad = { version: 3, name: "bad", sql: "CREATE TABLE m3 (k TEXT); SELECT no_such_function()" };
    // Two instances starting together: one applies, the other finds it done.
    const [x, y] = await Promise.all([migratePostgres(db, [m1]), migratePostgres(db, [m1])]);
    assert.deepEqual([...x, ...y], [1]);
    assert.deepEqual(await migratePostgres(db, [m1, m2]), [2]);
    await assert.rejects(migratePostgres(db, [m1, m2, bad]), /migration 3 \(bad\) failed/);
    const t = await db.get<{ t: string | null }>("SELECT to_regclass('m3')::text AS t");
    assert.equal(t!.t, null, "the failed migration's table was rolled back");
    const applied = await db.all<{ version: number }>("SELECT version FROM clawbridge_migrations ORDER BY version");
    assert.deepEqual(
      applied.map((r) => r.version),
      [1, 2],
    );
  });
});
