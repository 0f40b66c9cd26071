/**
 * The run store contract (src/workflows/systems/db.ts, approvals.ts): the same cases against SQLite
 * (systems.db through the one `SqliteSql`) and a real PostgreSQL (testkit/postgres.ts, the
 * tables of migration 3). Then what only PostgreSQL has: leases — a run claimed by its instance,
 * renewed in one statement, claimed by another instance once it lapsed (never while it is live,
 * never by two at once), let go at a clean shutdown; and the run manager's side: a run lost to
 * another instance stops here writing nothing, a run stopped by a clean shutdown is let go.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { PostgresDb } from "../../src/core/db/postgres.js";
import { type Sql, sqliteSqlOf } from "../../src/core/db/sql.js";
import { secretRedactor } from "../../src/core/secrets/redactor.js";
import pino from "pino";
import { EventBus } from "../../src/ops/events/bus.js";
import { ApprovalStore } from "../../src/workflows/systems/approvals.js";
import { loadSystems } from "../../src/workflows/systems/library.js";
import { RunManager } from "../../src/workflows/systems/runner.js";
import type { ModelCaller } from "../../src/workflows/systems/step-executor.js";
import { openSystemsDb, RunStore } from "../../src/workflows/systems/db.js";
import { startPostgres, type TestPostgres } from "../../testkit/postgres.js";

let pg: TestPostgres | undefined;
const opened: Array<() => Promise<void>> = [];
before(async () => {
  pg = await startPostgres();
});
after(async () => {
  for (const close of opened.splice(0)) await close();
  await pg?.stop();
});

async function openPg(url?: string): Promise<PostgresDb> {
  const db = await PostgresDb.open({ url: url ?? (await pg!.database()), poolSize: 4 });
  opened.push(() => db.close());
  return db;
}

/** A fresh, empty store of `engine`. */
async function fresh(engine: "sqlite" | "postgres"): Promise<Sql> {
  if (engine === "postgres") return openPg();
  const db = openSystemsDb(":memory:");
  opened.push(async () => {
    db.close();
  });
  return sqliteSqlOf(db);
}

const run = (id: string, more: Partial<Parameters<RunStore["create"]>[0]> = {}) => ({
  id,
  system: "s",
  inputs: { topic: "tides" },
  origin: "http" as const,
  steps: ["a", "b"],
  ...more,
});

for (const engine of ["sqlite", "postgres"] as const)
  describe(`the run store on ${engine}`, () => {
    test("a run round-trips: its fields, flags, version, trigger and steps in order", async () => {
      const store = new RunStore(await fresh(engine));
      await store.create(
        run("r1", { conversation: "c", messageKey: "m1", version: 3, test: true, trigger: "hook", detached: true }),
      );
      const r = (await store.get("r1"))!;
      assert.equal(r.status, "pending");
      assert.deepEqual(r.inputs, { topic: "tides" });
      assert.equal(r.conversation, "c");
      assert.equal(r.messageKey, "m1");
      assert.equal(r.version, 3);
      assert.equal(r.test, true);
      assert.equal(r.trigger, "hook");
      assert.equal(r.detached, true);
      assert.equal(r.reported, false);
      assert.equal(typeof r.createdAt, "number");
      assert.deepEqual(
        r.steps.map((s) => [s.id, s.status, s.attempts]),
        [
          ["a", "pending", 0],
          ["b", "pending", 0],
        ],
      );
      await store.create(run("r2"));
      const r2 = (await store.get("r2"))!;
      assert.deepEqual([r2.test, r2.detached, r2.trigger, r2.version], [false, false, undefined, undefined]);
      assert.equal(await store.get("nope"), undefined);
      await assert.rejects(store.create(run("r1")), "the same id twice is refused");
    });

    test("a run's life: started, steps, end; unfinished steps reset; secrets never written", async () => {
      const sql = await fresh(engine);
      const store = new RunStore(sql);
      secretRedactor.add("CONTRACT_KEY", "contract-secret-77");
      await store.create(run("r", { inputs: { k: "contract-secret-77" } }));
      await store.markStarted("r");
      await store.stepStarted("r", "a", 1);
      await store.stepEnded("r", "a", "completed", { output: { said: "contract-secret-77" } });
      await store.stepStarted("r", "b", 2);
      let r = (await store.get("r"))!;
      assert.equal(r.status, "running");
      assert.ok(r.startedAt);
      assert.deepEqual(r.steps[0]!.output, { said: "[secret CONTRACT_KEY]" });
      assert.deepEqual([r.steps[1]!.status, r.steps[1]!.attempts], ["running", 2]);
      await store.finish("r", { status: "failed", error: "at b: contract-secret-77", failedStep: "b" });
      await store.resetUnfinished("r");
      r = (await store.get("r"))!;
      assert.deepEqual([r.status, r.error, r.failedStep], ["failed", "at b: [secret CONTRACT_KEY]", "b"]);
      assert.deepEqual(
        r.steps.map((s) => s.status),
        ["completed", "pending"],
      );
      const raw = JSON.stringify([await sql.all("SELECT * FROM runs"), await sql.all("SELECT * FROM run_steps")]);
      assert.ok(!raw.includes("contract-secret-77"), raw);
    });

    test("lists, newest first (ties in creation order), filtered; a conversation's message, unreported, active and latest runs", async () => {
      const store = new RunStore(await fresh(engine));
      for (const id of ["x1", "x2", "x3"]) await store.create(run(id, { conversation: "c", messageKey: id }));
      await store.create(run("other", { conversation: "d", system: "t" }));
      await store.create(run("build", { conversation: "c", origin: "builder" }));
      assert.deepEqual(
        (await store.list({ conversation: "c" })).map((r) => r.id),
        ["build", "x3", "x2", "x1"],
      );
      assert.deepEqual(
        (await store.list({ system: "t" })).map((r) => r.id),
        ["other"],
      );
      assert.deepEqual(
        (await store.list({ origin: "builder" })).map((r) => r.id),
        ["build"],
      );
      assert.equal((await store.list({ limit: 2 })).length, 2);
      assert.equal((await store.byMessage("c", "x2"))?.id, "x2");
      assert.equal(await store.byMessage("c", "none"), undefined);
      assert.equal((await store.latest("c"))?.id, "x3", "builds are not the conversation's runs");
      await store.markStarted("x1");
      await store.finish("x2", { status: "completed", output: "ok" });
      await store.setStatus("x3", "paused");
      assert.deepEqual((await store.active("c")).map((r) => r.id).sort(), ["x1", "x3"]);
      assert.deepEqual(await store.unreported("c"), []);
      await store.markDetached("x2");
      assert.deepEqual(
        (await store.unreported("c")).map((r) => r.id),
        ["x2"],
      );
      await store.markReported("x2");
      assert.deepEqual(await store.unreported("c"), []);
      await store.markAttached("x2");
      assert.equal((await store.get("x2"))!.detached, false);
      assert.deepEqual(
        (await store.list({ status: "completed" })).map((r) => [r.id, r.output]),
        [["x2", "ok"]],
      );
    });

    test("interruptLeftovers: running and pending runs end interrupted, detached, their running step pending", async () => {
      const store = new RunStore(await fresh(engine));
      await store.create(run("going"));
      await store.markStarted("going");
      await store.stepStarted("going", "a", 1);
      await store.create(run("queued"));
      await store.create(run("held"));
      await store.setStatus("held", "paused");
      assert.deepEqual((await store.interruptLeftovers()).sort(), ["going", "queued"]);
      const r = (await store.get("going"))!;
      assert.deepEqual([r.status, r.detached, r.steps[0]!.status], ["interrupted", true, "pending"]);
      assert.equal((await store.get("held"))!.status, "paused");
      assert.deepEqual(await store.interruptLeftovers(), []);
    });

    test("approvals: asked once, decided once, open only while the run waits; the run shows its open one", async () => {
      const sql = await fresh(engine);
      const store = new RunStore(sql);
      const approvals = new ApprovalStore(sql);
      await store.create(run("w"));
      const asked = {
        runId: "w",
        step: "b",
        question: "Publish?",
        shown: { draft: "x" },
        createdAt: 1000,
        deadline: 5000,
        onTimeout: "reject" as const,
      };
      const a = await approvals.request(asked);
      assert.deepEqual(a, asked);
      await approvals.request({ ...asked, question: "Again?" });
      assert.equal((await approvals.get("w", "b"))!.question, "Publish?", "kept as first written");
      assert.deepEqual(await approvals.open(), [], "the run does not wait yet");
      await store.setStatus("w", "waiting");
      assert.deepEqual(
        (await approvals.open()).map((x) => x.step),
        ["b"],
      );
      assert.deepEqual(
        (await approvals.open("w")).map((x) => x.step),
        ["b"],
      );
      assert.deepEqual(await approvals.open("other"), []);
      assert.equal((await store.get("w"))!.approval?.question, "Publish?");
      assert.equal(await approvals.decide("w", "b", { decision: "approved", by: "http", at: 2000, note: "ok" }), true);
      assert.equal(await approvals.decide("w", "b", { decision: "rejected", by: "timeout", at: 3000 }), false);
      assert.deepEqual((await approvals.get("w", "b"))!.decided, {
        decision: "approved",
        by: "http",
        at: 2000,
        note: "ok",
      });
      assert.equal((await store.get("w"))!.approval, undefined);
      assert.deepEqual(await approvals.open(), []);
      await approvals.request({ ...asked, step: "c", deadline: undefined, shown: undefined });
      const c = (await approvals.get("w", "c"))!;
      assert.deepEqual([c.deadline, c.shown], [undefined, undefined]);
    });
  });

describe("run leases on postgres", () => {
  const lease = (owner: string, ms = 60_000) => ({ owner, ms });
  const can = { systems: ["s"], builds: false };

  test("a run created with a lease is its owner's; renewal is one statement for the owner's executing runs", async () => {
    const db = await openPg();
    const store = new RunStore(db);
    await store.create(run("mine"), lease("A"));
    await store.create(run("done"), lease("A"));
    await store.finish("done", { status: "completed" });
    await store.create(run("theirs"), lease("B"));
    const before = await db.get<{ owner: string; lease_until: number }>(
      "SELECT owner, lease_until FROM runs WHERE id = 'mine'",
    );
    const now = await db.now();
    assert.equal(before!.owner, "A");
    assert.ok(Math.abs(before!.lease_until - (now + 60_000)) < 5_000, "the lease is counted on the database's clock");
    assert.deepEqual(await store.renew(lease("A", 120_000)), ["mine"]);
    const after = await db.get<{ lease_until: number }>("SELECT lease_until FROM runs WHERE id = 'mine'");
    assert.ok(after!.lease_until > before!.lease_until);
    assert.deepEqual(await store.claimLapsed(lease("C"), 10, can), [], "live leases are never taken");
  });

  test("a lapsed lease is claimed by one instance only, for systems it can carry out", async () => {
    const url = await pg!.database();
    const a = new RunStore(await openPg(url));
    const b = new RunStore(await openPg(url));
    for (let i = 0; i < 6; i++) await a.create(run(`r${i}`), lease("dead", 1));
    await a.create(run("other-system", { system: "elsewhere" }), lease("dead", 1));
    await a.create(run("build", { origin: "builder" }), lease("dead", 1));
    await a.create(run("waiting"), lease("dead", 1));
    await a.setStatus("waiting", "waiting");
    await new Promise((r) => setTimeout(r, 20));
    const [byB, byC] = await Promise.all([a.claimLapsed(lease("B"), 10, can), b.claimLapsed(lease("C"), 10, can)]);
    const all = [...byB, ...byC].sort();
    assert.deepEqual(all, ["r0", "r1", "r2", "r3", "r4", "r5"], "each lapsed run claimed once, no other");
    assert.deepEqual(await a.claimLapsed(lease("D"), 10, can), [], "claimed leases are live again");
    assert.deepEqual((await a.claimLapsed(lease("D"), 10, { systems: ["elsewhere"], builds: true })).sort(), [
      "build",
      "other-system",
    ]);
    assert.equal((await a.claimLapsed(lease("E", 1), 1, can)).length, 0);
  });

  test("a run let go at shutdown is claimable at once; only its owner lets it go", async () => {
    const store = new RunStore(await openPg());
    await store.create(run("r"), lease("A"));
    await store.release("r", "B");
    assert.deepEqual(await store.claimLapsed(lease("C"), 5, { systems: ["s"], builds: false }), []);
    await store.release("r", "A");
    assert.deepEqual(await store.claimLapsed(lease("C"), 5, { systems: ["s"], builds: false }), ["r"]);
    await store.claim("r", lease("D"));
    assert.deepEqual(await store.renew(lease("C")), [], "a run claimed away is not renewed by its old owner");
    assert.deepEqual(await store.renew(lease("D")), ["r"]);
  });
});

describe("the run manager on postgres", () => {
  /** A model step that never answers: stopped, it fails (the run goes back to pending). */
  const blocking: ModelCaller = async function* (req) {
    await new Promise<void>((resolve) => req.cancel.onAbort(resolve));
    yield* [];
    throw new Error("stopped");
  };

  async function manager(db: PostgresDb, owner: string) {
    const { library, problems } = await loadSystems({
      configSystems: [{ id: "s", run: { kind: "model", model: "m", prompt: "go" } }],
      models: new Map([["m", { router: false }]]),
    });
    assert.deepEqual(problems, []);
    const runs = new RunManager({
      store: new RunStore(db),
      library,
      bus: new EventBus(),
      callModel: blocking,
      dataDir: "/nonexistent-run-store-contract",
      log: pino({ level: "silent" }),
      lease: { owner, ms: 300 },
    });
    opened.push(() => runs.close());
    await runs.recover();
    return runs;
  }

  const stepRunning = async (runs: RunManager, id: string) => {
    for (let i = 0; i < 100; i++) {
      if ((await runs.get(id))?.steps[0]?.status === "running") return;
      await new Promise((r) => setTimeout(r, 20));
    }
    assert.fail("the step did not start");
  };

  test("a run claimed away by another instance stops here and writes nothing", async () => {
    const db = await openPg();
    const a = await manager(db, "A");
    const { id } = await a.start({ system: "s", inputs: {}, origin: "http" });
    await stepRunning(a, id);
    await a.store.claim(id, { owner: "B", ms: 60_000 });
    for (let i = 0; i < 100 && a.isLive(id); i++) await new Promise((r) => setTimeout(r, 20));
    assert.equal(a.isLive(id), false, "A stopped the run at its next renewal");
    const r = (await a.get(id))!;
    assert.deepEqual([r.status, r.steps[0]!.status], ["running", "running"], "B's run, as B has it");
    const row = await db.get<{ owner: string }>("SELECT owner FROM runs WHERE id = ?", [id]);
    assert.equal(row!.owner, "B");
  });

  test("a clean shutdown lets the run go: running, its step pending, claimable at once", async () => {
    const db = await openPg();
    const c = await manager(db, "C");
    const { id } = await c.start({ system: "s", inputs: {}, origin: "http" });
    await stepRunning(c, id);
    await c.close();
    const r = (await c.get(id))!;
    assert.deepEqual([r.status, r.steps[0]!.status], ["running", "pending"]);
    assert.deepEqual(await c.store.claimLapsed({ owner: "D", ms: 60_000 }, 5, { systems: ["s"], builds: false }), [id]);
  });
});
