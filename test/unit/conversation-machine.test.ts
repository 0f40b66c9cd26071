/**
 * The conversation machine (src/workflows/conversation/machine.ts) over a real in-memory SQLite:
 * its transitions and the state events they publish, a question asked, replaced, taken once and
 * closed, the one TTL (a lapsed question, a build state that stopped moving), the cancel words
 * ending whichever question is open, one conversation never seeing another's state, the move of
 * release 0.1.0's two tables, and the TTL read from the two config keys it replaced.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import Database from "better-sqlite3";
import { EventBus } from "../../src/ops/events/bus.js";
import type { BridgeEvent } from "../../src/wire/events.js";
import { ConversationMachine, conversationTtl, type Question } from "../../src/workflows/conversation/machine.js";

const HOUR = 60 * 60_000;

function machine(ttlMs = HOUR) {
  const bus = new EventBus((err) => {
    throw err;
  });
  const states: string[] = [];
  bus.on((e: BridgeEvent) => {
    if (e.type === "state") states.push(`${e.conversation}:${e.state}`);
  });
  const db = new Database(":memory:");
  return { m: new ConversationMachine(db, ttlMs, bus), db, states };
}

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

test("a new conversation is idle with nothing open", () => {
  const { m } = machine();
  assert.deepEqual(m.get("new"), { state: "idle", engine: "router", updatedAt: 0 });
  assert.deepEqual(m.reply("new", "yes"), { kind: "none" });
  assert.equal(m.withBuilder("new"), false);
});

test("states: published on each change, routing never written, the engine kept with the state", () => {
  const { m, states } = machine();
  m.setState("c1", "routing", "router");
  m.setState("c1", "routing", "builder");
  assert.equal(m.get("c1").updatedAt, 0, "routing is not written");
  m.setState("c1", "planning", "builder");
  m.setState("c1", "executing", "builder");
  m.setState("c1", "executing", "builder");
  m.setState("c1", "completed", "builder");
  assert.deepEqual(states, ["c1:routing", "c1:planning", "c1:executing", "c1:completed"]);
  assert.deepEqual([m.get("c1").state, m.get("c1").engine], ["completed", "builder"]);
  m.setState("c1", "idle", "router");
  assert.deepEqual([m.get("c1").state, m.get("c1").engine], ["idle", "router"]);
});

test("a question: asked (replacing the open one), kept with the state and canvas, taken once, closed", () => {
  const { m } = machine();
  m.setState("c1", "completed", "builder");
  m.ask("c1", QUESTIONS[4]!, "c");
  m.ask("c1", QUESTIONS[1]!);
  const c = m.get("c1");
  assert.deepEqual([c.state, c.canvas, c.question], ["completed", "c", QUESTIONS[1]]);
  assert.deepEqual(m.reply("c1", "ok, go ahead"), { kind: "yes", question: QUESTIONS[1] });
  assert.equal(m.take("c1", QUESTIONS[1]!), true);
  assert.equal(m.take("c1", QUESTIONS[1]!), false, "a second yes finds nothing");
  assert.equal(m.get("c1").canvas, "c", "the canvas stays");
  m.ask("c1", QUESTIONS[0]!);
  assert.equal(m.take("c1", { ...QUESTIONS[0]!, since: 1 }), false, "only exactly the question asked");
  assert.deepEqual(m.reply("c1", "the topic is owls"), { kind: "other", question: QUESTIONS[0] });
  assert.deepEqual(m.close("c1"), QUESTIONS[0]);
  assert.equal(m.get("c1").question, undefined);
  assert.equal(m.close("c1"), undefined);
});

test("cancel words end whichever question is open", () => {
  const { m } = machine();
  for (const q of QUESTIONS)
    for (const word of ["cancel", "never mind", "stop", "no", "nevermind", "forget it", "Stop!", "no, cancel that"]) {
      m.ask("c1", q);
      assert.deepEqual(m.reply("c1", word), { kind: "ended", question: q }, `${q.kind}: ${word}`);
      assert.equal(m.get("c1").question, undefined, `${q.kind}: ${word}`);
    }
  m.ask("c1", QUESTIONS[4]!);
  assert.equal(m.reply("c1", "don't stop").kind, "other", "not a cancel");
  assert.ok(m.get("c1").question);
});

test("the TTL: a lapsed question is dropped by the reply that finds it; a build state lapses too", async () => {
  const { m } = machine(HOUR);
  const old = { ...QUESTIONS[0]!, since: now() - HOUR - 1 };
  m.ask("c1", old);
  assert.deepEqual(m.reply("c1", "yes"), { kind: "expired", question: old });
  assert.equal(m.get("c1").question, undefined);
  m.ask("c2", { ...QUESTIONS[4]!, since: now() - HOUR - 1 });
  assert.equal(m.withBuilder("c2"), false, "a lapsed builder question");
  m.ask("c3", QUESTIONS[4]!);
  assert.equal(m.withBuilder("c3"), true, "the builder's question waits");

  const short = machine(30).m;
  short.setState("b", "paused", "builder");
  short.setState("r", "paused", "router");
  assert.equal(short.withBuilder("b"), true, "a paused build");
  assert.equal(short.withBuilder("r"), false, "a paused run is the router's");
  await new Promise((r) => setTimeout(r, 60));
  assert.equal(short.withBuilder("b"), false, "a build that stopped moving lapses");
});

test("the router's states never overwrite a build's while the builder is in the middle of it", () => {
  const { m, states } = machine();
  m.setState("c1", "executing", "builder");
  m.setState("c1", "idle", "router");
  assert.deepEqual([m.get("c1").state, m.get("c1").engine], ["executing", "builder"]);
  assert.equal(m.withBuilder("c1"), true);
  assert.deepEqual(states, ["c1:executing", "c1:idle"], "published all the same");
  m.setState("c1", "completed", "builder");
  m.setState("c1", "idle", "router");
  assert.deepEqual([m.get("c1").state, m.get("c1").engine], ["idle", "router"]);
});

test("a build named like a system that exists waits with the builder: yes is a yes, 'new' is read by the builder", () => {
  const { m } = machine();
  const q = QUESTIONS[6]!;
  m.ask("c1", q);
  assert.equal(m.withBuilder("c1"), true);
  assert.deepEqual(m.reply("c1", "yes"), { kind: "yes", question: q });
  assert.deepEqual(m.reply("c1", "a new one"), { kind: "other", question: q });
  assert.equal(m.take("c1", q), true);
});

test("the router's questions never keep a conversation with the builder", () => {
  const { m } = machine();
  m.setState("c1", "executing", "builder");
  m.ask("c1", QUESTIONS[0]!);
  assert.equal(m.withBuilder("c1"), false);
});

test("one conversation never sees another's state, question or canvas", () => {
  const { m } = machine();
  m.setState("a", "paused", "builder");
  m.ask("a", QUESTIONS[2]!, "canvas-a");
  m.ask("b", QUESTIONS[1]!);
  assert.deepEqual(m.get("c"), { state: "idle", engine: "router", updatedAt: 0 });
  assert.deepEqual([m.get("b").state, m.get("b").canvas, m.get("b").question], ["idle", undefined, QUESTIONS[1]]);
  assert.deepEqual(m.reply("c", "cancel"), { kind: "none" });
  assert.equal(m.take("c", QUESTIONS[1]!), false);
  assert.equal(m.reply("b", "stop").kind, "ended");
  assert.deepEqual(m.get("a").question, QUESTIONS[2], "a's question is still open");
  assert.deepEqual(
    m.questions().map((q) => q.conversation),
    ["a"],
  );
});

test("release 0.1.0's two tables move in one step: newer state, the question of either, the builder's canvas", () => {
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
  const m = new ConversationMachine(db, HOUR);
  assert.deepEqual(m.get("only-router"), { state: "idle", engine: "router", question: QUESTIONS[0], updatedAt: 10 });
  assert.deepEqual(m.get("only-builder"), {
    state: "completed",
    engine: "builder",
    question: QUESTIONS[4],
    canvas: "c",
    updatedAt: 20,
  });
  assert.deepEqual(m.get("both"), {
    state: "paused",
    engine: "builder",
    question: QUESTIONS[0],
    canvas: "c",
    updatedAt: 30,
  });
  const tables = db.prepare(`SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`).all();
  assert.deepEqual(tables, [{ name: "conversation_state" }]);
  new ConversationMachine(db, HOUR); // opened again: nothing left to move
  assert.equal(m.get("both").state, "paused");
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
