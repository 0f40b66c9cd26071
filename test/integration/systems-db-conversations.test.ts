/**
 * Data kept (issue 32, item 8), the conversations: a systems.db written by release 0.1.0
 * (test/fixtures/systems-db/release-0.1.0.db, see the README beside it) opened by today's bridge.
 * Its two conversation tables (`router_state`, `builder_conversations`) are moved into
 * `conversation_state` and dropped, and the questions they held are answered as they were asked:
 * the builder's deploy question and the router's confirmation are taken by "yes" without a model
 * call, and the router's gathering goes on with the inputs given before the upgrade. On the same
 * bridge: "cancel", "never mind", "stop" end whichever question is open — the router's or the
 * builder's — without a model request. And the one TTL's two keys set differently stop the start.
 */
import assert from "node:assert/strict";
import { copyFileSync } from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { startFakeOpenAI, type FakeOpenAI, type RecordedRequest, type Reply } from "../../testkit/fakes/openai-api.js";
import { cleanup, eventually, startTestBridge, tempDir, type TestBridge } from "../helpers/bridge.js";
import { Chat } from "../helpers/chat.js";
import type { Question } from "../../src/workflows/conversation/machine.js";

const FIXTURE = path.resolve(import.meta.dirname, "../fixtures/systems-db/release-0.1.0.db");

const systemText = (req: RecordedRequest) =>
  JSON.stringify((req.body?.messages ?? []).filter((m: { role: string }) => m.role === "system"));
const json = (v: unknown): Reply => ({ kind: "text", chunks: [JSON.stringify(v)] });

/** A model system with these inputs (the fixture's questions name `summarizer` and `greeter`). */
const system = (id: string, required: string[], optional: string[] = []) => ({
  id,
  name: id,
  description: `${id} for the migration test`,
  inputs: {
    type: "object",
    required,
    properties: Object.fromEntries([...required, ...optional].map((k) => [k, { type: "string" }])),
  },
  run: { kind: "model", model: "ans", prompt: `${id}: \${inputs.${required[0]}}` },
});

describe("a systems.db of release 0.1.0: its conversations", () => {
  let up: FakeOpenAI;
  let b: TestBridge;

  before(async () => {
    up = await startFakeOpenAI((req): Reply => {
      const msg = req.lastUser.split("Message:\n").pop() ?? "";
      if (systemText(req).includes("You classify ONE chat message for a router"))
        return /example\.com/.test(msg)
          ? json({ action: "run", system: "summarizer", confidence: 0.9, inputs: { url: "https://example.com" } })
          : json({ action: "answer", system: null, confidence: 0.1, inputs: {} });
      return { kind: "text", chunks: ["SUMMARY of the page"] };
    });
    const dataDir = tempDir("cb-migrate-");
    copyFileSync(FIXTURE, path.join(dataDir, "systems.db"));
    // The fixture's questions were asked when it was made: a TTL that keeps them open.
    const minutes = 1e9;
    b = await startTestBridge({
      dataDir,
      backends: {
        up: { type: "openai", baseUrl: up.url, apiKey: "x" },
        router: {
          type: "router",
          classifier: "cls",
          answer: "ans",
          builder: "builder",
          gathering: { ttlMinutes: minutes },
        },
        builder: { type: "builder", supervisor: "sup", architect: "arch", confirmMinutes: minutes },
      },
      models: [
        { id: "cls", backend: "up" },
        { id: "ans", backend: "up" },
        { id: "sup", backend: "up" },
        { id: "arch", backend: "up" },
        { id: "router", backend: "router" },
        { id: "builder", backend: "builder" },
      ],
      systems: [system("summarizer", ["url"], ["length"]), system("greeter", ["name"])],
    });
  });
  after(async () => {
    await b?.close();
    await up?.close();
    if (b) cleanup(b.dataDir);
  });

  test("the two old tables are moved into conversation_state and dropped", async () => {
    const tables = (
      b.systems!.db.prepare(`SELECT name FROM sqlite_master WHERE type = 'table'`).all() as Array<{ name: string }>
    ).map((t) => t.name);
    assert.ok(tables.includes("conversation_state"), tables.join(", "));
    assert.ok(!tables.includes("router_state") && !tables.includes("builder_conversations"), tables.join(", "));
    const conv = b.systems!.conversations;
    assert.deepEqual((await conv.get("conv-gather")).question, {
      kind: "gathering",
      system: "summarizer",
      values: { length: "short" },
      rounds: 1,
      since: (await conv.get("conv-gather")).question!.since,
    });
    assert.equal((await conv.get("conv-confirm")).question?.kind, "confirm");
    const builder = await conv.get("conv-builder");
    assert.deepEqual(
      [builder.state, builder.engine, builder.canvas, builder.question?.kind],
      ["completed", "builder", "greeter", "deploy"],
    );
    const paused = await conv.get("conv-paused");
    assert.deepEqual([paused.state, paused.engine, paused.canvas], ["paused", "builder", "summarizer"]);
    assert.equal(await conv.withBuilder("conv-paused"), true, "a paused build keeps its conversation with the builder");
  });

  test("'yes' answers the builder's deploy question and the router's confirmation, without a model call", async () => {
    const before = up.requests.length;
    const deploy = await new Chat(b.baseURL, "conv-builder", "router").say("yes");
    // The canvas of release 0.1.0 names no model for its agent: the deploy is tried and refused.
    assert.match(deploy.text, /\*\*greeter\*\* was not deployed/);
    const confirm = await new Chat(b.baseURL, "conv-confirm", "router").say("yes");
    // Taken, then checked against the inputs it showed (the fixture's hash is not today's).
    assert.match(confirm.text, /The details changed since I asked, so nothing was run/);
    assert.equal(up.requests.length, before, "no model request");
    assert.equal((await b.systems!.conversations.get("conv-builder")).question, undefined);
    assert.equal((await b.systems!.conversations.get("conv-confirm")).question, undefined);
  });

  test("the gathering goes on with the inputs given before the upgrade", async () => {
    const res = await new Chat(b.baseURL, "conv-gather", "router").say("https://example.com");
    assert.match(res.text, /SUMMARY of the page/);
    const runs = await b.systems!.runs.store.list({ conversation: "conv-gather" });
    assert.equal(runs.length, 1);
    assert.deepEqual(runs[0]!.inputs, { url: "https://example.com", length: "short" });
    assert.ok(
      await eventually(async () => (await b.systems!.runs.store.get(runs[0]!.id))?.status === "completed", 10_000),
    );
  });

  test("cancel words end whichever question is open, the router's or the builder's, without a model request", async () => {
    const conv = b.systems!.conversations;
    const since = Date.now();
    const questions = [
      { kind: "gathering", system: "summarizer", values: {}, rounds: 1, since },
      { kind: "confirm", system: "greeter", values: { name: "Ada" }, hash: "h", since },
      { kind: "deploy", system: "greeter", since },
      { kind: "plan", system: "greeter", plan: { steps: [] }, intent: "EDIT", since },
      { kind: "configure", system: "greeter", changes: [{ path: "enabled", value: false }], since },
    ] satisfies Question[];
    const before = up.requests.length;
    for (const [i, q] of questions.entries()) {
      const word = ["cancel", "never mind", "stop"][i % 3]!;
      const key = `cancel-${q.kind}`;
      await conv.ask(key, q);
      const res = await new Chat(b.baseURL, key, "router").say(word);
      assert.match(res.text, /cancel|won't run|nothing was changed/i, `${q.kind}: ${word}: ${res.text}`);
      assert.equal((await conv.get(key)).question, undefined, `${q.kind}: ${word}`);
    }
    assert.equal(up.requests.length, before, "no model request");
  });
});

test("the two keys of the one conversation TTL set differently stop the start, naming both", async () => {
  const dataDir = tempDir("cb-ttl-");
  try {
    await assert.rejects(
      startTestBridge({
        dataDir,
        backends: {
          up: { type: "openai", baseUrl: "http://127.0.0.1:9/v1", apiKey: "x" },
          router: { type: "router", classifier: "m", answer: "m", builder: "b", gathering: { ttlMinutes: 30 } },
          builder: { type: "builder", supervisor: "m", architect: "m", confirmMinutes: 60 },
        },
        models: [
          { id: "m", backend: "up" },
          { id: "r", backend: "router" },
          { id: "b", backend: "builder" },
        ],
      }),
      (err: Error) =>
        err.name === "SystemsConfigError" &&
        /backends\.router\.gathering\.ttlMinutes \(30\) and backends\.builder\.confirmMinutes \(60\) differ/.test(
          err.message,
        ),
    );
  } finally {
    cleanup(dataDir);
  }
});
