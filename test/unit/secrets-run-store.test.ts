/**
 * The run store and secrets, test runs (src/workflows/systems/db.ts): every value it writes passes
 * the redactor (inputs, step outputs and errors, the run's output and error), and `runs.test` is
 * added to a database made before it existed — once, however often it is opened.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, describe, test } from "node:test";
import Database from "better-sqlite3";
import { sqliteSqlOf } from "../../src/core/db/sql.js";
import { secretRedactor } from "../../src/core/secrets/redactor.js";
import { openSystemsDb, RunStore } from "../../src/workflows/systems/db.js";

const root = mkdtempSync(path.join(tmpdir(), "cb-run-store-"));
after(() => rmSync(root, { recursive: true, force: true }));

describe("the run store", () => {
  test("writes secrets' values as [secret NAME] and keeps the test mark", async () => {
    secretRedactor.add("STORE_KEY", "store-secret-4321");
    const db = openSystemsDb(":memory:");
    const store = new RunStore(sqliteSqlOf(db));
    await store.create({
      id: "r1",
      system: "s",
      inputs: { k: "x store-secret-4321" },
      origin: "http",
      steps: ["a"],
      test: true,
    });
    await store.stepEnded("r1", "a", "failed", {
      output: { echoed: "store-secret-4321" },
      error: "401: store-secret-4321",
    });
    await store.finish("r1", { status: "failed", output: ["store-secret-4321"], error: "at a: store-secret-4321" });
    const raw = JSON.stringify([db.prepare("SELECT * FROM runs").all(), db.prepare("SELECT * FROM run_steps").all()]);
    assert.ok(!raw.includes("store-secret-4321"), raw);
    const rec = (await store.get("r1"))!;
    assert.equal(rec.test, true);
    assert.deepEqual(rec.inputs, { k: "x [secret STORE_KEY]" });
    assert.deepEqual(rec.steps[0]!.output, { echoed: "[secret STORE_KEY]" });
    assert.equal(rec.steps[0]!.error, "401: [secret STORE_KEY]");
    assert.equal(rec.error, "at a: [secret STORE_KEY]");
    await store.create({ id: "r2", system: "s", inputs: {}, origin: "http", steps: [] });
    assert.equal((await store.get("r2"))!.test, false);
    db.close();
  });

  test("an older database gets runs.test once (idempotent)", async () => {
    const file = path.join(root, "old.db");
    const old = new Database(file);
    old.exec(
      `CREATE TABLE runs (id TEXT PRIMARY KEY, system TEXT NOT NULL, conversation TEXT, status TEXT NOT NULL, inputs TEXT NOT NULL, output TEXT, error TEXT, failed_step TEXT, origin TEXT NOT NULL, message_key TEXT, created_at INTEGER NOT NULL, started_at INTEGER, ended_at INTEGER, updated_at INTEGER NOT NULL, detached INTEGER NOT NULL DEFAULT 0, reported INTEGER NOT NULL DEFAULT 0);
       INSERT INTO runs (id, system, status, inputs, origin, created_at, updated_at) VALUES ('old', 's', 'completed', '{}', 'cli', 1, 1);`,
    );
    old.close();
    for (let i = 0; i < 2; i++) {
      const db = openSystemsDb(file);
      const columns = (db.prepare("PRAGMA table_info(runs)").all() as Array<{ name: string }>).map((c) => c.name);
      assert.equal(columns.filter((c) => c === "test").length, 1);
      assert.equal((await new RunStore(sqliteSqlOf(db)).get("old"))!.test, false);
      db.close();
    }
  });
});
