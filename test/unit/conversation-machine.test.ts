/**
 * The conversation machine (src/workflows/conversation/machine.ts) over both engines of the
 * systems floor's store — a real in-memory SQLite and a real PostgreSQL (testkit/postgres.ts),
 * the same cases for each: its transitions and the state events they publish, a question asked,
 * replaced, taken once and closed, the one TTL (a lapsed question, a build state that stopped
 * moving), the cancel words ending whichever question is open, one conversation never seeing
 * another's state, writers that meet keeping each other's change, and two machines on one database
 * (two bridges) seeing one question, taken once.
 * SQLite only: the move of release 0.1.0's two tables. And the TTL read from the two config keys it
 * replaced.
 */
import assert from "node:assert/strict";
import { after, afterEach, before, describe, test } from "node:test";
import Database from "better-sqlite3";
import { PostgresDb } from "../../src/core/db/postgres.js";
import { type Sql, SqliteSql } from "../../src/core/db/sql.js";
import { EventBus } from "../../src/ops/events/bus.js";
import type { BridgeEvent } from "../../src/wire/events.js";
import { ConversationMachine, conversationTtl, type Question } from "../../src/workflows/conversation/machine.js";
import { startPostgres, type TestPostgres } from "../../testkit/postgres.js";

const HOUR = 60 * 60_000;

const now = () => Date.now();
const QUESTIONS: Question[] = [
  { kind: "gathering", system: "s", values: { a: 1 }, rounds: 1, since: now() },
  { kind: "confirm", system: "s", values: { a: 1 }, hash: "h", since: now() },
  { kind: "plan", system: "c", plan: { steps: [] }, intent: "EDIT", since: now() },
  { kind: "configure", system: "c", changes: [{ path: "enabled", value: false }], since: now() },
  { kind: "deploy", system: "c", since: now() },
  { kind: "undeploy", system: "c", since: now() },
  { kind: "samename", system: "c", request: "build c again", plan: { steps: [] }, since: now() },
];

for (const engine of ["sqlite", "postgres"] as const)
  describe(engine, () => {
    let pg: TestPostgres | undefined;
    /** PostgreSQL: one database for the file (a database per test costs a second here), emptied after each test. */
    let shared: PostgresDb | undefined;
    const closing: Array<() => unknown> = [];
    before(async () => {
      if (engine !== "postgres") return;
      pg = await startPostgres();
      shared = await PostgresDb.open({ url: await pg.database() });
    });
    afterEach(async () => {
      for (const close of closing.splice(0)) await close();
      await shared?.run("DELETE FROM conversation_state");
    });
    after(async () => {
      await shared?.close();
      await pg?.stop();
    });

    /** A fresh store: an in-memory SQLite, or the test's PostgreSQL database (migrated, empty). */
    async function open(): Promise<Sql> {
      if (!shared) {
        const db = new Database(":memory:");
        closing.push(() => db.close());
        return new SqliteSql(db);
      }
      return shared;
    }

    /** A machine over a fresh store of this engine (closed after the test). */
    async function machine(ttlMs = HOUR) {
      const bus = new EventBus((err) => {
        throw err;
      });
      const states: string[] = [];
      bus.on((e: BridgeEvent) => {
        if (e.type === "state") states.push(`${e.conversation}:${e.state}`);
      });
      const sql = await open();
      return { m: new ConversationMachine(sql, ttlMs, bus), sql, states };
    }

    test("a new conversation is idle with nothing open", async () => {
      const { m } = await machine();
      assert.deepEqual(await m.get("new"), { state: "idle", engine: "router", updatedAt: 0 });
      assert.deepEqual(await m.reply("new", "yes"), { kind: "none" });
      assert.equal(await m.withBuilder("new"), false);
    });

    test("states: published on each change, routing never written, the engine kept with the state", async () => {
      const { m, states } = await machine();
      await m.setState("c1", "routing", "router");
      await m.setState("c1", "routing", "builder");
      assert.equal((await m.get("c1")).updatedAt, 0, "routing is not written");
      await m.setState("c1", "planning", "builder");
      await m.setState("c1", "executing", "builder");
      await m.setState("c1", "executing", "builder");
      await m.setState("c1", "completed", "builder");
      assert.deepEqual(states, ["c1:routing", "c1:planning", "c1:executing", "c1:completed"]);
      assert.deepEqual([(await m.get("c1")).state, (await m.get("c1")).engine], ["completed", "builder"]);
      await m.setState("c1", "idle", "router");
      assert.deepEqual([(await m.get("c1")).state, (await m.get("c1")).engine], ["idle", "router"]);
    });

    test("a question: asked (replacing the open one), kept with the state and canvas, taken once, closed", async () => {
      const { m } = await machine();
      await m.setState("c1", "completed", "builder");
      await m.ask("c1", QUESTIONS[4]!, "c");
      await m.ask("c1", QUESTIONS[1]!);
      const c = await m.get("c1");
      assert.deepEqual([c.state, c.canvas, c.question], ["completed", "c", QUESTIONS[1]]);
      assert.deepEqual(await m.reply("c1", "ok, go ahead"), { kind: "yes", question: QUESTIONS[1] });
      assert.equal(await m.take("c1", QUESTIONS[1]!), true);
      assert.equal(await m.take("c1", QUESTIONS[1]!), false, "a second yes finds nothing");
      assert.equal((await m.get("c1")).canvas, "c", "the canvas stays");
      await m.ask("c1", QUESTIONS[0]!);
      assert.equal(await m.take("c1", { ...QUESTIONS[0]!, since: 1 }), false, "only exactly the question asked");
      assert.deepEqual(await m.reply("c1", "the topic is owls"), { kind: "other", question: QUESTIONS[0] });
      assert.deepEqual(await m.close("c1"), QUESTIONS[0]);
      assert.equal((await m.get("c1")).question, undefined);
      assert.equal(await m.close("c1"), undefined);
    });

    test("cancel words end whichever question is open", async () => {
      const { m } = await machine();
      for (const q of QUESTIONS)
        for (const word of [
          "cancel",
          "never mind",
          "stop",
          "no",
          "nevermind",
          "forget it",
          "Stop!",
          "no, cancel that",
        ]) {
          await m.ask("c1", q);
          assert.deepEqual(await m.reply("c1", word), { kind: "ended", question: q }, `${q.kind}: ${word}`);
          assert.equal((await m.get("c1")).question, undefined, `${q.kind}: ${word}`);
        }
      await m.ask("c1", QUESTIONS[4]!);
      assert.equal((await m.reply("c1", "don't stop")).kind, "other", "not a cancel");
      assert.ok((await m.get("c1")).question);
    });

    test("the TTL: a lapsed question is dropped by the reply that finds it; a build state lapses too", async () => {
      const { m } = await machine(HOUR);
      const old = { ...QUESTIONS[0]!, since: now() - HOUR - 1 };
      await m.ask("c1", old);
      assert.deepEqual(await m.reply("c1", "yes"), { kind: "expired", question: old });
      assert.equal((await m.get("c1")).question, undefined);
      await m.ask("c2", { ...QUESTIONS[4]!, since: now() - HOUR - 1 });
      assert.equal(await m.withBuilder("c2"), false, "a lapsed builder question");
      await m.ask("c3", QUESTIONS[4]!);
      assert.equal(await m.withBuilder("c3"), true, "the builder's question waits");

      const short = (await machine(30)).m;
      await short.setState("b", "paused", "builder");
      await short.setState("r", "paused", "router");
      assert.equal(await short.withBuilder("b"), true, "a paused build");
      assert.equal(await short.withBuilder("r"), false, "a paused run is the router's");
      await new Promise((r) => setTimeout(r, 60));
      assert.equal(await short.withBuilder("b"), false, "a build that stopped moving lapses");
    });

    test("the router's states never overwrite a build's while the builder is in the middle of it", async () => {
      const { m, states } = await machine();
      await m.setState("c1", "executing", "builder");
      await m.setState("c1", "idle", "router");
      assert.deepEqual([(await m.get("c1")).state, (await m.get("c1")).engine], ["executing", "builder"]);
      assert.equal(await m.withBuilder("c1"), true);
      assert.deepEqual(states, ["c1:executing", "c1:idle"], "published all the same");
      await m.setState("c1", "completed", "builder");
      await m.setState("c1", "idle", "router");
      assert.deepEqual([(await m.get("c1")).state, (await m.get("c1")).engine], ["idle", "router"]);
    });

    test("a build named like a system that exists waits with the builder: yes is a yes, 'new' is read by the builder", async () => {
      const { m } = await machine();
      const q = QUESTIONS[6]!;
      await m.ask("c1", q);
      assert.equal(await m.withBuilder("c1"), true);
      assert.deepEqual(await m.reply("c1", "yes"), { kind: "yes", question: q });
      assert.deepEqual(await m.reply("c1", "a new one"), { kind: "other", question: q });
      assert.equal(await m.take("c1", q), true);
    });

    test("the router's questions never keep a conversation with the builder", async () => {
      const { m } = await machine();
      await m.setState("c1", "executing", "builder");
      await m.ask("c1", QUESTIONS[0]!);
      assert.equal(await m.withBuilder("c1"), false);
    });

    test("one conversation never sees another's state, question or canvas", async () => {
      const { m } = await machine();
      await m.setState("a", "paused", "builder");
      await m.ask("a", QUESTIONS[2]!, "canvas-a");
      await m.ask("b", QUESTIONS[1]!);
      assert.deepEqual(await m.get("c"), { state: "idle", engine: "router", updatedAt: 0 });
      assert.deepEqual(
        [(await m.get("b")).state, (await m.get("b")).canvas, (await m.get("b")).question],
        ["idle", undefined, QUESTIONS[1]],
      );
      assert.deepEqual(await m.reply("c", "cancel"), { kind: "none" });
      assert.equal(await m.take("c", QUESTIONS[1]!), false);
      assert.equal((await m.reply("b", "stop")).kind, "ended");
      assert.deepEqual((await m.get("a")).question, QUESTIONS[2], "a's question is still open");
      assert.deepEqual(
        (await m.questions()).map((q) => q.conversation),
        ["a"],
      );
    });

    test("writers that meet keep each other's change: a question asked while a run's end sets the state", async () => {
      const { m } = await machine();
      await m.setState("c1", "executing", "router");
      await Promise.all([m.ask("c1", QUESTIONS[0]!), m.setState("c1", "completed", "router"), m.setCanvas("c1", "c")]);
      const c = await m.get("c1");
      assert.deepEqual([c.state, c.engine, c.question, c.canvas], ["completed", "router", QUESTIONS[0], "c"]);
      await Promise.all([m.close("c1"), m.setState("c1", "idle", "router")]);
      const after = await m.get("c1");
      assert.deepEqual([after.state, after.question, after.canvas], ["idle", undefined, "c"]);
    });

    test("two machines on one store (two bridges): one question, seen by both, taken once", async () => {
      const sql = await open();
      const a = new ConversationMachine(sql, HOUR);
      const b = new ConversationMachine(sql, HOUR);
      await a.ask("c1", QUESTIONS[1]!);
      assert.deepEqual((await b.get("c1")).question, QUESTIONS[1]);
      const taken = await Promise.all([a.take("c1", QUESTIONS[1]!), b.take("c1", QUESTIONS[1]!)]);
      assert.deepEqual(taken.sort(), [false, true], "one of the two yeses takes it");
      assert.deepEqual(await b.questions(), []);
    });
  });

test("sqlite: release 0.1.0's two tables move in one step: newer state, the question of either, the builder's canvas", async () => {
  const db = new Database(":memory:");
  db.exec(`
    CREATE TABLE router_state (conversation TEXT PRIMARY KEY, state TEXT NOT NULL, data TEXT, updated_at INTEGER NOT NULL);
    CREATE TABLE builder_conversations (conversation TEXT PRIMARY KEY, state TEXT NOT NULL, focus TEXT, pending TEXT, updated_at INTEGER NOT NULL);
  `);
  const gather = JSON.stringify(QUESTIONS[0]);
  const deploy = JSON.stringify(QUESTIONS[4]);
  const r = db.prepare(`INSERT INTO router_state VALUES (?, ?, ?, ?)`);
  const b = db.prepare(`INSERT INTO builder_conversations VALUES (?, ?, ?, ?, ?)`);
  r.run("only-router", "idle", gather, 10);
  b.run("only-builder", "completed", "c", deploy, 20);
  r.run("both", "idle", gather, 10);
  b.run("both", "paused", "c", null, 30);
  const m = new ConversationMachine(new SqliteSql(db), HOUR);
  assert.deepEqual(await m.get("only-router"), {
    state: "idle",
    engine: "router",
    question: QUESTIONS[0],
    updatedAt: 10,
  });
  assert.deepEqual(await m.get("only-builder"), {
    state: "completed",
    engine: "builder",
    question: QUESTIONS[4],
    canvas: "c",
    updatedAt: 20,
  });
  assert.deepEqual(await m.get("both"), {
    state: "paused",
    engine: "builder",
    question: QUESTIONS[0],
    canvas: "c",
    updatedAt: 30,
  });
  const tables = db.prepare(`SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`).all();
  assert.deepEqual(tables, [{ name: "conversation_state" }]);
  new ConversationMachine(new SqliteSql(db), HOUR); // opened again: nothing left to move
  assert.equal((await await m.get("both")).state, "paused");
});

test("the one TTL: a router's gathering.ttlMinutes or a builder's confirmMinutes, equal when both, else 60", () => {
  const router = (ttlMinutes?: number) => ({ type: "router", options: { gathering: { maxRounds: 4, ttlMinutes } } });
  const builder = (confirmMinutes?: number) => ({ type: "builder", options: { confirmMinutes } });
  assert.deepEqual(conversationTtl({}), { minutes: 60 });
  assert.deepEqual(conversationTtl({ r: router(), b: builder() }), { minutes: 60 });
  assert.deepEqual(conversationTtl({ r: router(5) }), { minutes: 5 });
  assert.deepEqual(conversationTtl({ b: builder(7), r: router() }), { minutes: 7 });
  assert.deepEqual(conversationTtl({ r: router(7), b: builder(7) }), { minutes: 7 });
  const bad = conversationTtl({ r: router(5), b: builder(7) });
  assert.ok("problem" in bad);
  assert.match(bad.problem, /backends\.r\.gathering\.ttlMinutes \(5\) and backends\.b\.confirmMinutes \(7\) differ/);
});
