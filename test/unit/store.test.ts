import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { mkdir, mkdtemp, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import Database from "better-sqlite3";
import { PostgresDb } from "../../src/core/db/postgres.js";
import {
  MAX_EVENTS_PER_KEY,
  MAX_MESSAGE_CHARS,
  SCHEMA_VERSION,
  SessionStoreError,
  SqliteSessionStore,
  defaultSessionStorePath,
  openSessionStore,
  PgSessionStore,
  type SessionBinding,
  type SessionStore,
} from "../../src/core/store/index.js";
import { freshSchema } from "../helpers/pg-schema.js";
import { startPostgres, type TestPostgres } from "../../testkit/postgres.js";

let dir: string;
let pg: TestPostgres;
before(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "clawbridge-store-"));
  pg = await startPostgres();
});
after(async () => {
  await pg?.stop();
  await rm(dir, { recursive: true, force: true });
});

let n = 0;
const fresh = (): string => path.join(dir, `case-${++n}`, "sessions.db");

function binding(key: string, over: Partial<SessionBinding> = {}): SessionBinding {
  return {
    key,
    backend: "claude",
    backendSessionId: `sid-${key}`,
    cwd: `/tmp/work/${key}`,
    turns: 0,
    createdAt: 1000,
    updatedAt: 1000,
    lastError: null,
    model: null,
    ...over,
  };
}

/** A clock the test moves by hand. */
function clock(start = 10_000): { now: () => number; set: (t: number) => void } {
  let t = start;
  return { now: () => t, set: (v) => (t = v) };
}

describe("sqlite session store", () => {
  test("creates <dir> 0700 and the file 0600, WAL, synchronous FULL, busy_timeout, current schema", async () => {
    const file = path.join(dir, "nested", "data", "sessions.db");
    const store = await openSessionStore({ kind: "sqlite", path: file });
    try {
      assert.ok(store instanceof SqliteSessionStore);
      const info = await store.info();
      assert.equal(info.journalMode, "wal");
      assert.equal(info.synchronous, "FULL");
      assert.equal(info.busyTimeoutMs, 5000);
      assert.equal(info.schemaVersion, SCHEMA_VERSION);
      assert.equal(info.path, file);
      assert.deepEqual(await store.integrityCheck(), ["ok"]);
    } finally {
      await store.close();
    }
    assert.equal((await stat(path.dirname(file))).mode & 0o777, 0o700);
    assert.equal((await stat(path.join(dir, "nested"))).mode & 0o777, 0o700);
    assert.equal((await stat(file)).mode & 0o777, 0o600);
    assert.equal(defaultSessionStorePath("/x/y"), "/x/y/sessions.db");
  });

  test("synchronous NORMAL and busy timeout are selectable; bad values are refused", async () => {
    const store = await openSessionStore({ kind: "sqlite", path: fresh(), synchronous: "NORMAL", busyTimeoutMs: 1234 });
    try {
      assert.ok(store instanceof SqliteSessionStore);
      const info = await store.info();
      assert.equal(info.synchronous, "NORMAL");
      assert.equal(info.busyTimeoutMs, 1234);
    } finally {
      await store.close();
    }
    await assert.rejects(
      openSessionStore({ kind: "sqlite", path: fresh(), synchronous: "OFF" as "FULL" }),
      (e: unknown) => e instanceof SessionStoreError && /synchronous/.test(e.message),
    );
  });

  test("beginTurn's bookkeeping commit leaves the store FULL", async () => {
    const store = await openSessionStore({ kind: "sqlite", path: fresh() });
    try {
      await store.put(binding("k"));
      await store.beginTurn("k", "in-progress abc");
      await store.recordTurn("k", "sid-k");
      // Bookkeeping commits without its own fsync; every other write is FULL as configured.
      assert.equal((await (store as SqliteSessionStore).info()).synchronous, "FULL");
    } finally {
      await store.close();
    }
  });

  test("memory stores are independent and leave nothing on disk", async () => {
    const a = await openSessionStore({ kind: "memory" });
    const b = await openSessionStore({ kind: "memory" });
    try {
      await a.put(binding("m"));
      assert.ok(await a.get("m"));
      assert.equal(await b.get("m"), undefined);
      assert.equal((await a.list()).length, 1);
    } finally {
      await a.close();
      await b.close();
    }
  });
});

type Engine = "sqlite" | "postgres";

/**
 * Where a contract case keeps its sessions: a fresh SQLite file, or a fresh PostgreSQL schema.
 * `open` opens one more store on it (another process, another bridge); `close` closes what the
 * place opened (the PostgreSQL pools).
 */
interface Place {
  open(now?: () => number): Promise<SessionStore>;
  close(): Promise<void>;
}

async function place(engine: Engine): Promise<Place> {
  if (engine === "sqlite") {
    const file = fresh();
    return { open: (now) => openSessionStore({ kind: "sqlite", path: file, now }), close: async () => {} };
  }
  const url = await freshSchema(pg);
  const dbs: PostgresDb[] = [];
  return {
    async open(now) {
      const db = await PostgresDb.open({ url, poolSize: 4 });
      dbs.push(db);
      return openSessionStore({ kind: "postgres", db, now });
    },
    async close() {
      for (const db of dbs) await db.close();
    },
  };
}

/** `fn` with one store on a fresh place (the store and the place closed after). */
async function withStore(engine: Engine, fn: (store: SessionStore, c: ReturnType<typeof clock>) => Promise<void>) {
  const c = clock(10_000);
  const p = await place(engine);
  const store = await p.open(c.now);
  try {
    await fn(store, c);
  } finally {
    await store.close();
    await p.close();
  }
}

for (const engine of ["sqlite", "postgres"] as const) {
  describe(`session store contract: ${engine}`, () => {
    test("the factory makes this engine's store", async () => {
      await withStore(engine, async (store) => {
        assert.ok(engine === "sqlite" ? store instanceof SqliteSessionStore : store instanceof PgSessionStore);
      });
    });

    test("CRUD: put, get, replace, delete", async () => {
      await withStore(engine, async (store) => {
        assert.equal(await store.get("a"), undefined);
        const a = binding("a", { model: "sonnet", turns: 3, lastError: "x" });
        await store.put(a);
        assert.deepEqual(await store.get("a"), a);
        const a2 = binding("a", {
          backend: "gemini",
          backendSessionId: "other",
          cwd: "/srv/a",
          turns: 0,
          createdAt: 5,
          updatedAt: 6,
        });
        await store.put(a2);
        assert.deepEqual(await store.get("a"), a2, "put replaces every field");
        assert.equal(await store.delete("a"), true);
        assert.equal(await store.get("a"), undefined);
        assert.equal(await store.delete("a"), false);
        assert.equal(await store.delete("never"), false);
      });
    });

    test("put normalises omitted lastError/model to null and rejects invalid bindings", async () => {
      await withStore(engine, async (store) => {
        const { lastError: _e, model: _m, ...bare } = binding("k");
        await store.put(bare);
        const got = await store.get("k");
        assert.equal(got?.lastError, null);
        assert.equal(got?.model, null);

        const bad: Array<[Partial<SessionBinding>, RegExp]> = [
          [{ key: "" }, /key must be a non-empty string/],
          [{ backend: "" }, /backend/],
          [{ backendSessionId: "" }, /backendSessionId/],
          [{ cwd: "relative/dir" }, /cwd must be an absolute path/],
          [{ turns: -1 }, /turns/],
          [{ turns: 1.5 }, /turns/],
          [{ createdAt: Number.NaN }, /createdAt/],
          [{ updatedAt: "5" as unknown as number }, /updatedAt/],
          [{ model: 3 as unknown as string }, /model/],
          [{ key: "a\0b" }, /NUL/],
        ];
        for (const [over, re] of bad) {
          await assert.rejects(
            store.put(binding("x", over)),
            (e: unknown) => e instanceof SessionStoreError && re.test(e.message),
          );
        }
        assert.equal(await store.get("x"), undefined);
        await assert.rejects(store.get(""), SessionStoreError);
      });
    });

    test("list: most recently updated first, limit, backend filter", async () => {
      await withStore(engine, async (store, c) => {
        c.set(50_000);
        await store.put(binding("old", { updatedAt: 100 }));
        await store.put(binding("mid", { updatedAt: 200, backend: "gemini" }));
        await store.put(binding("new", { updatedAt: 300 }));
        await store.put(binding("tie-b", { updatedAt: 150 }));
        await store.put(binding("tie-a", { updatedAt: 150 }));
        const keys = async (opts?: Parameters<SessionStore["list"]>[0]): Promise<string[]> =>
          (await store.list(opts)).map((b) => b.key);
        assert.deepEqual(await keys(), ["new", "mid", "tie-a", "tie-b", "old"]);
        assert.deepEqual(await keys({ limit: 2 }), ["new", "mid"]);
        assert.deepEqual(await keys({ limit: 0 }), []);
        assert.deepEqual(await keys({ backend: "gemini" }), ["mid"]);
        assert.deepEqual(await keys({ backend: "claude", limit: 2 }), ["new", "tie-a"]);
        assert.deepEqual(await keys({ backend: "nope" }), []);
        // a turn on the oldest binding moves it to the front
        await store.recordTurn("old", "sid-old");
        assert.deepEqual((await keys()).slice(0, 2), ["old", "new"]);
        await assert.rejects(store.list({ limit: -1 }), SessionStoreError);
        await assert.rejects(store.list({ limit: 1.5 }), SessionStoreError);
      });
    });

    test("recordTurn: turns+1, updatedAt, clears lastError, adopts a new session id; no-op for unknown keys", async () => {
      await withStore(engine, async (store, c) => {
        await store.put(binding("k", { turns: 2, lastError: "boom", createdAt: 1, updatedAt: 2 }));
        c.set(20_000);
        await store.recordTurn("k", "sid-k");
        let got = await store.get("k");
        assert.equal(got?.turns, 3);
        assert.equal(got?.updatedAt, 20_000);
        assert.equal(got?.createdAt, 1);
        assert.equal(got?.lastError, null);
        assert.equal(got?.backendSessionId, "sid-k");
        assert.deepEqual(
          (await store.listEvents("k")).map((e) => e.kind),
          ["bound"],
          "the same session: no event",
        );

        c.set(30_000);
        await store.recordTurn("k", "sid-k-2");
        got = await store.get("k");
        assert.equal(got?.turns, 4);
        assert.equal(got?.backendSessionId, "sid-k-2");
        const ev = await store.listEvents("k");
        assert.equal(ev[0]?.kind, "rebound");
        assert.match(ev[0]?.reason ?? "", /sid-k-2.*was sid-k/);
        assert.equal(ev[0]?.at, 30_000);

        await store.recordTurn("missing", "sid");
        assert.equal(await store.get("missing"), undefined, "recordTurn must not create bindings");
        assert.deepEqual(await store.listEvents("missing"), []);
      });
    });

    test("beginTurn: sets the marker and updatedAt, nothing else; no-op for unknown keys; another store sees it", async () => {
      const c = clock(10_000);
      const p = await place(engine);
      try {
        const store = await p.open(c.now);
        await store.put(binding("k", { turns: 2, createdAt: 1, updatedAt: 2 }));
        c.set(20_000);
        await store.beginTurn("k", "in-progress abc");
        const got = await store.get("k");
        assert.deepEqual(
          got,
          binding("k", { turns: 2, createdAt: 1, updatedAt: 20_000, lastError: "in-progress abc" }),
        );
        assert.deepEqual(
          (await store.listEvents("k")).map((e) => e.kind),
          ["bound"],
          "turn bookkeeping records no events",
        );
        await store.recordTurn("k", "sid-k");
        assert.equal((await store.get("k"))?.lastError, null);
        await store.beginTurn("missing", "in-progress x");
        assert.equal(await store.get("missing"), undefined, "beginTurn must not create bindings");
        await store.close();
        // What a bookkeeping commit wrote is there for the next process.
        const again = await p.open();
        assert.equal((await again.get("k"))?.turns, 3);
        await again.close();
      } finally {
        await p.close();
      }
    });

    test("recordError: sets lastError and updatedAt, keeps turns, is clipped, records an event; no-op for unknown keys", async () => {
      await withStore(engine, async (store, c) => {
        await store.put(binding("k", { turns: 5 }));
        c.set(11_000);
        await store.recordError("k", "resume failed: session not found");
        const got = await store.get("k");
        assert.equal(got?.lastError, "resume failed: session not found");
        assert.equal(got?.updatedAt, 11_000);
        assert.equal(got?.turns, 5);
        const [e] = await store.listEvents("k", { limit: 1 });
        assert.equal(e?.kind, "error");
        assert.equal(e?.reason, "resume failed: session not found");
        assert.equal(e?.at, 11_000);

        await store.recordError("k", "y".repeat(MAX_MESSAGE_CHARS * 3));
        const long = (await store.get("k"))?.lastError ?? "";
        assert.equal(long.length, MAX_MESSAGE_CHARS);
        assert.ok(long.endsWith("…"));
        assert.equal((await store.listEvents("k", { limit: 1 }))[0]?.reason, long, "the event's reason is clipped too");

        await store.recordError("missing", "x");
        assert.equal(await store.get("missing"), undefined);
        assert.deepEqual(await store.listEvents("missing"), []);
      });
    });

    test("events: bound/rebound/deleted/custom, newest first, bounded per key, kept after delete", async () => {
      await withStore(engine, async (store, c) => {
        c.set(1);
        await store.put(binding("k"));
        await store.put(binding("k", { turns: 1 })); // same session id: no event
        await store.put(binding("k", { backendSessionId: "new-sid" }));
        await store.appendEvent("k", "healed", "resume failed; started a new session");
        await store.appendEvent("k", "reset");
        assert.equal(await store.delete("k"), true);
        const kinds = (await store.listEvents("k")).map((e) => e.kind);
        assert.deepEqual(kinds, ["deleted", "reset", "healed", "rebound", "bound"]);
        const all = await store.listEvents("k");
        assert.equal(all[1]?.reason, null);
        assert.equal(all[2]?.reason, "resume failed; started a new session");
        assert.equal(all[3]?.reason, "session sid-k -> new-sid on claude");
        assert.equal(all[4]?.reason, "session sid-k on claude");
        assert.ok(all.every((e, i) => i === 0 || e.id < all[i - 1]!.id));
        assert.ok(all.every((e) => e.key === "k" && e.at === 1));
        assert.deepEqual(
          (await store.listEvents("k", { limit: 2 })).map((e) => e.kind),
          ["deleted", "reset"],
        );
        await store.appendEvent("k", "note", "z".repeat(MAX_MESSAGE_CHARS + 5));
        assert.equal((await store.listEvents("k", { limit: 1 }))[0]?.reason?.length, MAX_MESSAGE_CHARS);
        await assert.rejects(store.appendEvent("k", ""), SessionStoreError);
        await assert.rejects(store.listEvents("k", { limit: -1 }), SessionStoreError);

        for (let i = 0; i < MAX_EVENTS_PER_KEY + 25; i++) await store.appendEvent("busy", "reset", `r${i}`);
        const busy = await store.listEvents("busy");
        assert.equal(busy.length, MAX_EVENTS_PER_KEY);
        assert.equal(busy[0]?.reason, `r${MAX_EVENTS_PER_KEY + 24}`);
        assert.equal(busy.at(-1)?.reason, "r25");
        assert.equal((await store.listEvents("k")).length, 6, "pruning one key leaves the others alone");
        // the store's own events are pruned too
        for (let i = 0; i < MAX_EVENTS_PER_KEY + 3; i++) {
          await store.put(binding("flappy", { backendSessionId: `s${i}` }));
          await store.recordError("flappy", `e${i}`);
        }
        await store.recordTurn("flappy", "last");
        await store.delete("flappy");
        const flappy = await store.listEvents("flappy");
        assert.equal(flappy.length, MAX_EVENTS_PER_KEY);
        assert.deepEqual(
          flappy.slice(0, 2).map((e) => e.kind),
          ["deleted", "rebound"],
        );
      });
    });

    test("data persists across close and reopen; a closed store refuses every call", async () => {
      const p = await place(engine);
      try {
        const s1 = await p.open();
        await s1.put(binding("p", { model: "m", turns: 7, lastError: "e" }));
        await s1.recordTurn("p", "sid-p");
        await s1.appendEvent("p", "healed", "why");
        await s1.close();
        await s1.close(); // idempotent
        await assert.rejects(s1.get("p"), /closed/);
        await assert.rejects(s1.put(binding("q")), /closed/);
        await assert.rejects(s1.list(), /closed/);
        await assert.rejects(s1.recordTurn("p", "sid-p"), /closed/);

        const s2 = await p.open();
        try {
          const got = await s2.get("p");
          assert.equal(got?.turns, 8);
          assert.equal(got?.model, "m");
          assert.equal(got?.lastError, null);
          assert.equal((await s2.listEvents("p"))[0]?.kind, "healed");
        } finally {
          await s2.close();
        }
      } finally {
        await p.close();
      }
    });

    test("two store instances on one place see each other's writes; concurrent turns are all counted", async () => {
      const p = await place(engine);
      try {
        const a = await p.open();
        const b = await p.open();
        await a.put(binding("x"));
        await b.recordTurn("x", "sid-x");
        await a.recordTurn("x", "sid-x");
        assert.equal((await b.get("x"))?.turns, 2);
        await Promise.all(Array.from({ length: 20 }, (_, i) => (i % 2 ? a : b).recordTurn("x", "sid-x")));
        assert.equal((await a.get("x"))?.turns, 22, "no lost update");
        assert.equal(await b.delete("x"), true);
        assert.equal(await a.get("x"), undefined);
        // One new conversation bound by both at once: one "bound", then a "rebound" to the second session.
        await Promise.all([
          a.put(binding("y", { backendSessionId: "one" })),
          b.put(binding("y", { backendSessionId: "two" })),
        ]);
        const kinds = (await a.listEvents("y")).map((e) => e.kind);
        assert.deepEqual(kinds, ["rebound", "bound"]);
        await a.close();
        await b.close();
      } finally {
        await p.close();
      }
    });
  });
}

describe("schema migrations", () => {
  function makeV1(file: string, extraSql = ""): void {
    const db = new Database(file);
    db.exec(`
      CREATE TABLE meta (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL);
      INSERT INTO meta VALUES ('schema_version', '1');
      CREATE TABLE sessions (
        key TEXT PRIMARY KEY NOT NULL, backend TEXT NOT NULL, backend_session_id TEXT NOT NULL,
        cwd TEXT NOT NULL, turns INTEGER NOT NULL DEFAULT 0, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL
      );
      INSERT INTO sessions VALUES ('agent:main:main', 'claude', 'bc1a7617-0651-443d-a8f1-efeb2957b8c2', '/home/u/proj', 4, 100, 200);
      INSERT INTO sessions VALUES ('agent:main:other', 'gemini', 'g-1', '/home/u/other', 1, 100, 300);
      ${extraSql}
    `);
    db.close();
  }

  test("a version-1 file (rollback journal, made by hand) is migrated to the current version, rows kept", async () => {
    const file = fresh();
    await mkdir(path.dirname(file), { recursive: true });
    makeV1(file);
    const store = await openSessionStore({ kind: "sqlite", path: file });
    try {
      assert.ok(store instanceof SqliteSessionStore);
      const info = await store.info();
      assert.equal(info.schemaVersion, SCHEMA_VERSION);
      assert.equal(info.journalMode, "wal");
      assert.deepEqual(await store.get("agent:main:main"), {
        key: "agent:main:main",
        backend: "claude",
        backendSessionId: "bc1a7617-0651-443d-a8f1-efeb2957b8c2",
        cwd: "/home/u/proj",
        turns: 4,
        createdAt: 100,
        updatedAt: 200,
        lastError: null,
        model: null,
      });
      assert.deepEqual(
        (await store.list()).map((b) => b.key),
        ["agent:main:other", "agent:main:main"],
      );
      await store.recordError("agent:main:main", "e"); // v2 column + events table work
      assert.equal((await store.get("agent:main:main"))?.lastError, "e");
      assert.equal((await store.listEvents("agent:main:main"))[0]?.kind, "error");
      assert.deepEqual(await store.integrityCheck(), ["ok"]);
    } finally {
      await store.close();
    }
    const raw = new Database(file, { readonly: true });
    try {
      assert.equal(
        (raw.prepare("SELECT value FROM meta WHERE key='schema_version'").get() as { value: string }).value,
        String(SCHEMA_VERSION),
      );
    } finally {
      raw.close();
    }
  });

  test("a failing migration rolls back completely and leaves the file at its old version", async () => {
    const file = fresh();
    await mkdir(path.dirname(file), { recursive: true });
    // v1 file that already has a `model` column: the v2 ALTER TABLE fails half-way
    makeV1(file, "ALTER TABLE sessions ADD COLUMN model TEXT;");
    await assert.rejects(
      openSessionStore({ kind: "sqlite", path: file }),
      (e: unknown) => e instanceof SessionStoreError && /migration to schema version 2/.test(e.message),
    );
    const raw = new Database(file, { readonly: true });
    try {
      assert.equal(
        (raw.prepare("SELECT value FROM meta WHERE key='schema_version'").get() as { value: string }).value,
        "1",
      );
      const cols = (raw.prepare("PRAGMA table_info(sessions)").all() as Array<{ name: string }>).map((c) => c.name);
      assert.ok(!cols.includes("last_error"), "the first ALTER of the failed migration was rolled back");
      assert.equal(raw.prepare("SELECT 1 FROM sqlite_master WHERE name='events'").get(), undefined);
      assert.equal((raw.prepare("SELECT count(*) AS n FROM sessions").get() as { n: number }).n, 2);
    } finally {
      raw.close();
    }
  });

  test("a file from a newer version is refused", async () => {
    const file = fresh();
    const s = await openSessionStore({ kind: "sqlite", path: file });
    await s.close();
    const raw = new Database(file);
    raw.prepare("UPDATE meta SET value = ? WHERE key = 'schema_version'").run(String(SCHEMA_VERSION + 1));
    raw.close();
    await assert.rejects(
      openSessionStore({ kind: "sqlite", path: file }),
      (e: unknown) => e instanceof SessionStoreError && /newer than this clawbridge understands/.test(e.message),
    );
  });

  test("a file that is not a database gives a clear error", async () => {
    const file = fresh();
    await mkdir(path.dirname(file), { recursive: true });
    await writeFile(file, "this is not a sqlite database, just some text that is long enough ".repeat(20));
    await assert.rejects(
      openSessionStore({ kind: "sqlite", path: file }),
      (e: unknown) =>
        e instanceof SessionStoreError && e.message.includes(file) && /not a SQLite database/.test(e.message),
    );
  });
});
