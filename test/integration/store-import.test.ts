/**
 * `clawbridge store import` (src/core/db/sqlite-import.ts, src/ops/commands/store.ts): a bridge's
 * SQLite files, written by the real stores, copied into a real PostgreSQL by the real command, and
 * read back by the PostgreSQL stores — a conversation's binding and its history, a run and its
 * steps, a canvas. A second import adds nothing; a SQLite config is refused with the fix.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { writeFileSync } from "node:fs";
import path from "node:path";
import { after, before, test } from "node:test";
import { promisify } from "node:util";
import { PostgresDb } from "../../src/core/db/postgres.js";
import { sqliteSqlOf } from "../../src/core/db/sql.js";
import { openSessionStore } from "../../src/core/store/index.js";
import { CanvasStore } from "../../src/workflows/builder/canvas-store.js";
import { openSystemsDb, RunStore } from "../../src/workflows/systems/db.js";
import { startPostgres, type TestPostgres } from "../../testkit/postgres.js";
import { cleanup, tempDir } from "../helpers/bridge.js";

const run = promisify(execFile);
const BIN = path.resolve(import.meta.dirname, "../../bin/clawbridge.js");
let pg: TestPostgres;
const dirs: string[] = [];
before(async () => {
  pg = await startPostgres();
});
after(async () => {
  await pg?.stop();
  dirs.forEach(cleanup);
});

async function cli(args: string[], env: NodeJS.ProcessEnv = {}): Promise<{ code: number; out: string; err: string }> {
  try {
    const r = await run(process.execPath, [BIN, ...args], {
      env: { ...process.env, CLAWBRIDGE_CONFIG: "", CLAWBRIDGE_STORE_URL: "", ...env },
      timeout: 60_000,
    });
    return { code: 0, out: r.stdout, err: r.stderr };
  } catch (e) {
    const x = e as { code: number; stdout: string; stderr: string };
    return { code: x.code, out: x.stdout, err: x.stderr };
  }
}

test("a bridge's SQLite files move into PostgreSQL whole, once", async () => {
  const root = tempDir("cb-import-");
  dirs.push(root);
  const dataDir = path.join(root, "data");

  // What a bridge on SQLite made.
  const sessions = await openSessionStore({ kind: "sqlite", path: path.join(dataDir, "sessions.db") });
  const binding = {
    key: "conv-1",
    backend: "claude",
    backendSessionId: "sess-1",
    cwd: "/tmp/work",
    turns: 3,
    createdAt: 1_700_000_000_000,
    updatedAt: 1_700_000_100_000,
    lastError: null,
    model: "sonnet",
  };
  await sessions.put(binding);
  await sessions.appendEvent("conv-1", "healed", "session file gone");
  const sqliteEvents = await sessions.listEvents("conv-1");
  await sessions.close();
  const db = openSystemsDb(path.join(dataDir, "systems.db"));
  const sql = sqliteSqlOf(db);
  const runs = new RunStore(sql);
  await runs.create({ id: "run-1", system: "digest", inputs: { topic: "tides" }, origin: "http", steps: ["a", "b"] });
  await runs.stepStarted("run-1", "a", 1);
  await runs.stepEnded("run-1", "a", "completed", { output: { ok: true } });
  const sqliteRun = await runs.get("run-1");
  await new CanvasStore(sql).create({ system: "blog", name: "Blog" });
  db.close();

  // The test server trusts loopback: the password is never asked for, only carried in the URL.
  const url = (await pg.database()).replace("clawbridge@", "clawbridge:s3cretPw@");
  /** A config of this data dir (`store` as given, or SQLite by default). */
  const configFile = (name: string, store?: unknown): string => {
    const file = path.join(root, name);
    const raw = {
      dataDir,
      backends: { up: { type: "openai", baseUrl: "http://127.0.0.1:9/v1" } },
      models: [{ id: "m", backend: "up" }],
    };
    writeFileSync(file, JSON.stringify(store ? { ...raw, store } : raw));
    return file;
  };
  const config = configFile("clawbridge.json", { kind: "postgres" });

  const dry = await cli(["store", "import", "-c", config, "--dry-run"], { CLAWBRIDGE_STORE_URL: url });
  assert.equal(dry.code, 0, dry.err);
  assert.match(dry.out, /sessions\.db sessions: 1 row/);
  assert.match(dry.out, /would copy into/);

  const first = await cli(["store", "import", "-c", config, "--json"], { CLAWBRIDGE_STORE_URL: url });
  assert.equal(first.code, 0, first.err);
  const report = JSON.parse(first.out) as {
    tables: Array<{ file: string; table: string; into?: string; rows: number; inserted: number; skipped?: string }>;
  };
  const row = (file: string, table: string) => report.tables.find((t) => t.file === file && t.table === table);
  assert.deepEqual([row("sessions.db", "sessions")?.rows, row("sessions.db", "sessions")?.inserted], [1, 1]);
  assert.equal(row("sessions.db", "events")?.into, "session_events");
  assert.equal(row("systems.db", "runs")?.inserted, 1);
  assert.equal(row("systems.db", "run_steps")?.inserted, 2);
  assert.equal(row("systems.db", "canvases")?.inserted, 1);
  assert.match(row("sessions.db", "meta")?.skipped ?? "", /bookkeeping/);
  assert.match(first.out, /"into": "postgres:\/\/clawbridge:\*\*\*@/, "the URL is shown without its password");
  assert.ok(!`${dry.out}${first.out}${first.err}`.includes("s3cretPw"));

  // Read back by the PostgreSQL stores.
  const pgdb = await PostgresDb.open({ url });
  try {
    const pgSessions = await openSessionStore({ kind: "postgres", db: pgdb });
    assert.deepEqual(await pgSessions.get("conv-1"), binding);
    assert.deepEqual(
      (await pgSessions.listEvents("conv-1")).map((e) => [e.id, e.kind, e.reason]),
      sqliteEvents.map((e) => [e.id, e.kind, e.reason]),
    );
    // Its id sequence goes on after the copied ids.
    await pgSessions.appendEvent("conv-1", "reset", "after the move");
    const events = await pgSessions.listEvents("conv-1");
    assert.ok(events[0]!.id > Math.max(...sqliteEvents.map((e) => e.id)));
    assert.deepEqual(await new RunStore(pgdb).get("run-1"), sqliteRun);
    assert.equal((await new CanvasStore(pgdb).get("blog"))?.name, "Blog");

    // Again: nothing new, nothing doubled.
    const again = await cli(["store", "import", "-c", config, "--json"], { CLAWBRIDGE_STORE_URL: url });
    assert.equal(again.code, 0, again.err);
    const second = JSON.parse(again.out) as typeof report;
    assert.deepEqual(
      second.tables.filter((t) => t.inserted > 0).map((t) => t.table),
      [],
    );
    assert.equal((await pgdb.get<{ n: number }>("SELECT COUNT(*) AS n FROM run_steps"))!.n, 2);
  } finally {
    await pgdb.close();
  }

  // A bridge still on SQLite has nowhere to import into.
  const refused = await cli(["store", "import", "-c", configFile("sqlite.json")]);
  assert.equal(refused.code, 2);
  assert.match(refused.err, /store is SQLite; set store: \{ kind: postgres/);
});
