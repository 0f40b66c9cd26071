/**
 * System versions in process (src/workflows/systems/versions.ts, runner.ts): a version is recorded
 * only when a system's content or sandbox files change, with who made it; the structural diff
 * (plan steps by id, files); a canvas's state against its deployed version; the words read without
 * a model (`versionRequest`, `/run id@n`); and a run paused on version 1 and resumed after version
 * 2 was loaded still runs version 1's plan; the runs.version migration of an older database.
 * The store's cases run against SQLite and a real PostgreSQL (testkit/postgres.ts), where two
 * instances recording the same content at once record it once.
 */
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import Database from "better-sqlite3";
import { pino } from "pino";
import { PostgresDb } from "../../src/core/db/postgres.js";
import { type Sql, sqliteSqlOf } from "../../src/core/db/sql.js";
import { EventBus } from "../../src/ops/events/bus.js";
import { openBuilderTools } from "../../src/workflows/builder/runtime.js";
import { versionRequest } from "../../src/workflows/router/decide.js";
import { parseSlash } from "../../src/workflows/router/keyword-fallback.js";
import { openSystemsDb, RunStore } from "../../src/workflows/systems/db.js";
import { loadSystems } from "../../src/workflows/systems/library.js";
import { sandboxDir } from "../../src/workflows/systems/paths.js";
import { RunError, RunManager } from "../../src/workflows/systems/runner.js";
import type { ModelCaller } from "../../src/workflows/systems/step-executor.js";
import { diffText, diffVersions, VersionStore } from "../../src/workflows/systems/versions.js";
import { startPostgres, type TestPostgres } from "../../testkit/postgres.js";

const root = mkdtempSync(path.join(tmpdir(), "cb-versions-unit-"));
let pg: TestPostgres;
const opened: PostgresDb[] = [];
before(async () => {
  pg = await startPostgres();
});
after(async () => {
  await Promise.all(opened.map((d) => d.close()));
  await pg?.stop();
  rmSync(root, { recursive: true, force: true });
});

type Engine = "sqlite" | "postgres";
/** A fresh, empty store of the engine: an in-memory systems.db, or a new PostgreSQL database. */
async function freshSql(engine: Engine): Promise<Sql> {
  if (engine === "sqlite") return sqliteSqlOf(openSystemsDb(":memory:"));
  const db = await PostgresDb.open({ url: await pg.database() });
  opened.push(db);
  return db;
}

const models = new Map([["m", { router: false }]]);
const plan = (prompts: [string, string], extra: Record<string, unknown> = {}) => ({
  id: "two",
  ...extra,
  run: {
    kind: "plan",
    steps: [
      { id: "a", uses: "model", with: { model: "m", prompt: prompts[0] } },
      { id: "b", uses: "model", with: { model: "m", prompt: prompts[1] }, dependsOn: ["a"] },
    ],
  },
});
const load = async (systems: unknown[]) => {
  const res = await loadSystems({ configSystems: systems, models });
  assert.deepEqual(res.problems, []);
  return res.library;
};

for (const engine of ["sqlite", "postgres"] as const)
  describe(`the version store (${engine})`, () => {
    test("a version is recorded when the system or its sandbox files change, never twice for the same content", async () => {
      const dataDir = path.join(root, `sync-${engine}`);
      const store = new VersionStore(await freshSql(engine), dataDir);
      const lib = await load([plan(["x", "y"])]);
      assert.deepEqual(
        (await store.sync(lib)).map((v) => [v.system, v.number, v.by]),
        [["two", 1, "config"]],
      );
      assert.deepEqual(await store.sync(await load([plan(["x", "y"])])), [], "same content: no new version");
      const [v2] = await store.sync(await load([plan(["x", "z"])]), { system: "two", by: "builder", note: "deployed" });
      assert.deepEqual([v2!.number, v2!.by, v2!.note], [2, "builder", "deployed"]);
      mkdirSync(sandboxDir(dataDir, "two"), { recursive: true });
      writeFileSync(path.join(sandboxDir(dataDir, "two"), "notes.md"), "hello");
      const [v3] = await store.sync(await load([plan(["x", "z"])]));
      assert.equal(v3!.number, 3);
      assert.match(v3!.files["notes.md"]!, /^[0-9a-f]{64}$/);
      assert.deepEqual(
        (await store.list("two")).map((v) => v.number),
        [1, 2, 3],
      );
      assert.equal((await store.get("two", 1))!.compiled.run.kind, "plan");
      assert.equal((await store.latest("two"))!.number, 3);
      assert.equal(await store.get("two", 9), undefined);
      assert.deepEqual(diffVersions((await store.get("two", 2))!, (await store.get("two", 3))!), [
        { key: "files.notes.md", change: "added", to: v3!.files["notes.md"] },
      ]);
      const lib2 = await load([plan(["x", "w"])]);
      const current = await store.current(lib2.get("two")!);
      assert.equal(current.number, 4, "current: a library replaced without a sync records its version");
      assert.equal((await store.current(lib2.get("two")!)).number, 4);
    });

    test("the diff matches plan steps by id: a moved step is no change; changed, added and removed keys are named", async () => {
      const store = new VersionStore(await freshSql(engine), path.join(root, `diff-${engine}`));
      await store.sync(await load([plan(["x", "y"])]));
      const moved = plan(["x", "y2"], { description: "now described" });
      (moved.run.steps as unknown[]).reverse();
      await store.sync(await load([moved]));
      const changes = diffVersions((await store.get("two", 1))!, (await store.get("two", 2))!);
      assert.deepEqual(changes, [
        { key: "description", change: "changed", from: "", to: "now described" },
        { key: "run.steps[b].with.prompt", change: "changed", from: "y", to: "y2" },
      ]);
      assert.equal(diffText(changes).split("\n")[1], '- `run.steps[b].with.prompt`: "y" → "y2"');
      assert.equal(diffText([]), "Nothing changed.");
    });

    test("two instances loading the same content at once record one version; different content takes the next number", async () => {
      const dataDir = path.join(root, `race-${engine}`);
      // Two instances on one store: two pools on one PostgreSQL database; on SQLite, one engine.
      const a = await freshSql(engine);
      let b = a;
      if (a instanceof PostgresDb) {
        b = await PostgresDb.open({ url: (a.pool.options as { connectionString: string }).connectionString });
        opened.push(b as PostgresDb);
      }
      const one = new VersionStore(a, dataDir);
      const two = new VersionStore(b, dataDir);
      const lib = await load([plan(["x", "y"])]);
      const made = await Promise.all([one.sync(lib), two.sync(await load([plan(["x", "y"])]))]);
      assert.equal(made.flat().length, 1, "the same content: one version");
      assert.deepEqual(
        (await two.list("two")).map((v) => v.number),
        [1],
      );
      const both = await Promise.all([
        one.sync(await load([plan(["p", "q"])])),
        two.sync(await load([plan(["r", "s"])])),
      ]);
      assert.deepEqual(
        both
          .flat()
          .map((v) => v.number)
          .sort(),
        [2, 3],
      );
      assert.deepEqual(
        (await one.list("two")).map((v) => v.number),
        [1, 2, 3],
      );
    });
  });

describe("versions", () => {
  test("a canvas's state says which version it is deployed as and whether it changed since", async () => {
    const db = openSystemsDb(":memory:");
    const dataDir = path.join(root, "tools");
    const sql = sqliteSqlOf(db);
    const tools = openBuilderTools({ sql, db, dataDir });
    const deployed = async () => {
      const st = await tools.getState("two");
      return "canvas" in st ? [st.deployedVersion, st.changedSinceDeploy] : st;
    };
    await tools.store.create({ system: "two" });
    assert.deepEqual(await deployed(), [null, false], "a draft");
    const canvas = await tools.store.setStatus("two", "deployed");
    await new VersionStore(sql, dataDir).sync(await load([plan(["x", "y"])]), {
      system: "two",
      by: "builder",
      canvas,
    });
    assert.deepEqual(await deployed(), [1, false]);
    await tools.store.mutate("two", (c) => ({ ...c, description: "changed, not deployed" }));
    assert.deepEqual(await deployed(), [1, true]);
  });

  test("version words and /run id@n are read without a model", () => {
    assert.deepEqual(versionRequest("roll back research-blog to version 2"), {
      kind: "rollback",
      version: 2,
      system: "research-blog",
    });
    assert.deepEqual(versionRequest("Revert to v3"), { kind: "rollback", version: 3 });
    assert.deepEqual(versionRequest("what changed between version 1 and 2 of research-blog?"), {
      kind: "diff",
      from: 1,
      to: 2,
    });
    assert.deepEqual(versionRequest("diff v1 v3"), { kind: "diff", from: 1, to: 3 });
    assert.equal(versionRequest("roll back the carpet"), undefined);
    assert.equal(versionRequest("what changed in the news today"), undefined);
    assert.deepEqual(parseSlash("/run research-blog@3 topic=tides"), {
      cmd: "run",
      system: "research-blog",
      inputs: { topic: "tides" },
      version: 3,
    });
    assert.deepEqual(parseSlash("/run research-blog topic=tides"), {
      cmd: "run",
      system: "research-blog",
      inputs: { topic: "tides" },
    });
  });

  test("a database of before versions gains runs.version, once", async () => {
    const file = path.join(root, "old.db");
    const old = new Database(file);
    old.exec(
      "CREATE TABLE runs (id TEXT PRIMARY KEY, system TEXT NOT NULL, conversation TEXT, status TEXT NOT NULL, inputs TEXT NOT NULL, output TEXT, error TEXT, failed_step TEXT, origin TEXT NOT NULL, message_key TEXT, created_at INTEGER NOT NULL, started_at INTEGER, ended_at INTEGER, updated_at INTEGER NOT NULL, detached INTEGER NOT NULL DEFAULT 0, reported INTEGER NOT NULL DEFAULT 0)",
    );
    old.exec(
      "INSERT INTO runs (id, system, status, inputs, origin, created_at, updated_at) VALUES ('r1', 's', 'completed', '{}', 'http', 1, 1)",
    );
    old.close();
    openSystemsDb(file).close();
    const db = openSystemsDb(file);
    const store = new RunStore(sqliteSqlOf(db));
    assert.equal((await store.get("r1"))!.version, undefined, "an old run has none");
    await store.create({ id: "r2", system: "s", inputs: {}, origin: "http", version: 3, steps: [] });
    assert.equal((await store.get("r2"))!.version, 3);
    db.close();
  });

  test("a run records its version; paused on v1 and resumed after v2 was loaded, it runs v1's plan", async () => {
    const db = openSystemsDb(":memory:");
    const library = await load([plan(["one-a", "one-b"])]);
    const prompts: string[] = [];
    let hang = true;
    let reached!: () => void;
    const atA = new Promise<void>((r) => (reached = r));
    const callModel: ModelCaller = async function* (req) {
      prompts.push(req.prompt);
      if (hang && req.prompt === "one-a") {
        hang = false;
        reached();
        await new Promise<void>((r) => req.cancel.onAbort(r));
        throw new Error("stopped");
      }
      yield { type: "text", text: `did ${req.prompt}` };
      yield { type: "done", finishReason: "stop" };
    };
    const manager = new RunManager({
      store: new RunStore(sqliteSqlOf(db)),
      library,
      bus: new EventBus(),
      callModel,
      dataDir: path.join(root, "run"),
      log: pino({ level: "silent" }),
      retryBaseMs: 10,
    });
    await manager.versions.sync(library);
    const rec = await manager.start({ system: "two", inputs: {}, origin: "http" });
    assert.equal(rec.version, 1);
    await atA;
    assert.equal((await manager.pause(rec.id)).status, "paused");

    library.replace(await load([plan(["two-a", "two-b"])]));
    assert.equal((await manager.versions.sync(library))[0]!.number, 2);
    const resumed = await manager.wait((await manager.resume(rec.id)).id);
    assert.equal(resumed.status, "completed");
    assert.equal(resumed.version, 1);
    assert.equal(resumed.output, "did one-b");
    assert.deepEqual(prompts, ["one-a", "one-a", "one-b"]);

    const fresh = await manager.wait((await manager.start({ system: "two", inputs: {}, origin: "http" })).id);
    assert.deepEqual([fresh.version, fresh.output], [2, "did two-b"]);
    const old = await manager.wait((await manager.start({ system: "two", inputs: {}, origin: "http", version: 1 })).id);
    assert.deepEqual([old.version, old.output], [1, "did one-b"]);
    await assert.rejects(
      manager.start({ system: "two", inputs: {}, origin: "http", version: 5 }),
      (e: unknown) => e instanceof RunError && e.code === "unknown_version" && /versions: 1 to 2/.test(e.message),
    );
    await manager.close();
  });
});
