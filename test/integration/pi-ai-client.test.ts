/**
 * `@mariozechner/pi-ai` 0.73 — the client library OpenClaw 2026.5 uses for "openai-completions"
 * providers — driven the way OpenClaw drives it, against a bridge with the REAL opencode CLI. Only
 * the model API is faked (testkit/fakes/openai-api.ts).
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { complete, stream, Type, type AssistantMessageEvent, type Context, type Model } from "@mariozechner/pi-ai";
import { piModel } from "../helpers/pi-model.js";
import { startFakeOpenAI, type FakeOpenAI } from "../../testkit/fakes/openai-api.js";
import { OPENCODE_BIN, opencodeEnv } from "../../testkit/fakes/opencode-env.js";
import { cleanup, eventually, pidsWithEnv, startTestBridge, tempDir, type TestBridge } from "../helpers/bridge.js";
import { openclawSystemPrompt, wrapUserText } from "../../testkit/openclaw-request.js";

const MODEL = "fake/m1";
const TURN_TIMEOUT = 120_000;

let fake: FakeOpenAI;
let bridge: TestBridge;
let home: string;
let model: Model<"openai-completions">;

before(async () => {
  fake = await startFakeOpenAI();
  home = tempDir("cb-piai-home-");
  bridge = await startTestBridge({
    server: { heartbeatSeconds: 1 },
    backends: {
      oc: {
        type: "opencode",
        command: OPENCODE_BIN,
        env: opencodeEnv(fake.url, home),
        timeoutSeconds: 90,
        killGraceSeconds: 1,
        warm: { enabled: false },
      },
    },
    models: [{ id: MODEL, backend: "oc" }],
  });
  model = piModel(bridge.baseURL, MODEL, "Fake via clawbridge");
});

after(async () => {
  await bridge?.close(0);
  await fake?.close();
  cleanup(home);
  if (bridge) cleanup(bridge.dataDir);
});

const now = () => Date.now();
const usage0 = {
  input: 0,
  output: 0,
  cacheRead: 0,
  cacheWrite: 0,
  totalTokens: 0,
  cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 },
};

/** A context shaped like OpenClaw 2026.5's: big system prompt, tools, metadata-wrapped user turns, history. */
function openclawContext(question: string): Context {
  return {
    systemPrompt: openclawSystemPrompt(),
    messages: [
      { role: "user", content: wrapUserText("hi there", "2026.5"), timestamp: now() },
      {
        role: "assistant",
        content: [{ type: "text", text: "Hello! How can I help?" }],
        api: "openai-completions",
        provider: "clawbridge",
        model: MODEL,
        usage: usage0,
        stopReason: "stop",
        timestamp: now(),
      },
      { role: "user", content: [{ type: "text", text: wrapUserText(question, "2026.5") }], timestamp: now() },
    ],
    tools: [
      {
        name: "read",
        description: "Read a file from the workspace.",
        parameters: Type.Object({ path: Type.String({ description: "file path" }) }),
      },
      { name: "web_search", description: "Search the web.", parameters: Type.Object({ query: Type.String() }) },
    ],
  };
}

async function drain(s: AsyncIterable<AssistantMessageEvent>): Promise<AssistantMessageEvent[]> {
  const out: AssistantMessageEvent[] = [];
  for await (const ev of s) {
    out.push(ev);
    if (out.length > 10_000) throw new Error("too many events");
  }
  return out;
}

describe("pi-ai 0.73 (OpenClaw 2026.5's client) → clawbridge → real opencode", () => {
  test("stream(): text deltas assemble to the model's answer; done carries usage", {
    timeout: TURN_TIMEOUT,
  }, async () => {
    fake.setScript(() => ({
      kind: "text",
      chunks: ["Tallinn ", "is the capital ", "of Estonia."],
      usage: { prompt_tokens: 321, completion_tokens: 9 },
    }));
    const before = fake.mainRequests().length;
    const events = await drain(
      stream(model, openclawContext("what is the capital of Estonia?"), { apiKey: "unused-key", maxTokens: 4096 }),
    );

    assert.equal(events[0]?.type, "start");
    const text = events
      .filter((e) => e.type === "text_delta")
      .map((e) => (e as { delta: string }).delta)
      .join("");
    assert.equal(text, "Tallinn is the capital of Estonia.");
    const last = events.at(-1)!;
    assert.equal(last.type, "done", JSON.stringify(last).slice(0, 500));
    if (last.type !== "done") return;
    assert.equal(last.reason, "stop");
    assert.equal(last.message.stopReason, "stop");
    assert.deepEqual(last.message.content, [{ type: "text", text: "Tallinn is the capital of Estonia." }]);
    assert.equal(last.message.usage.input, 321, "real prompt tokens from the model");
    assert.equal(last.message.usage.output, 9);
    assert.equal(last.message.errorMessage, undefined);

    // What the model saw: a compact prompt with the person's words, history and identity, no metadata.
    const reqs = fake.mainRequests().slice(before);
    assert.equal(reqs.length, 1, "one model call for one turn");
    const prompt = reqs[0]!.lastUser;
    assert.match(prompt, /\nUSER: what is the capital of Estonia\?\n\nRespond:$/);
    assert.match(prompt, /USER: hi there\nASSISTANT: Hello! How can I help\?/);
    assert.match(prompt, /Pebble/);
    assert.ok(!prompt.includes("untrusted metadata"));
    assert.ok(prompt.length < 10_500, `compact (${prompt.length})`);
  });

  test("complete(): one final assistant message", { timeout: TURN_TIMEOUT }, async () => {
    fake.setScript(() => ({
      kind: "text",
      chunks: ["plain ", "answer"],
      usage: { prompt_tokens: 10, completion_tokens: 2 },
    }));
    const msg = await complete(
      model,
      { messages: [{ role: "user", content: "say something", timestamp: now() }] },
      { apiKey: "unused-key" },
    );
    assert.equal(msg.stopReason, "stop", msg.errorMessage);
    assert.deepEqual(msg.content, [{ type: "text", text: "plain answer" }]);
    assert.equal(msg.usage.input, 10);
    assert.equal(msg.usage.output, 2);
    assert.equal(msg.api, "openai-completions");
    assert.equal(msg.provider, "clawbridge");
  });

  test('an upstream error: the final message has stopReason "error" and the model\'s message', {
    timeout: TURN_TIMEOUT,
  }, async () => {
    fake.setScript(() => ({
      kind: "error",
      status: 400,
      message: "fake upstream: the prompt is too long for this model",
      type: "invalid_request_error",
    }));
    const events = await drain(
      stream(
        model,
        { messages: [{ role: "user", content: "boom", timestamp: now() }] },
        { apiKey: "unused-key", maxRetries: 0 },
      ),
    );
    const last = events.at(-1)!;
    assert.equal(last.type, "error", JSON.stringify(last).slice(0, 500));
    if (last.type !== "error") return;
    assert.equal(last.reason, "error");
    assert.equal(last.error.stopReason, "error");
    assert.match(last.error.errorMessage ?? "", /fake upstream: the prompt is too long for this model/);
    assert.ok(!events.some((e) => e.type === "done"), "never a silent success");
  });

  test('abort via signal: stopReason "aborted" and no opencode process left', { timeout: TURN_TIMEOUT }, async () => {
    fake.setScript(() => ({ kind: "hang" }));
    const before = fake.mainRequests().length;
    const ac = new AbortController();
    const s = stream(
      model,
      { messages: [{ role: "user", content: "a question that never gets answered", timestamp: now() }] },
      { apiKey: "unused-key", signal: ac.signal },
    );
    const all = drain(s);
    assert.ok(await eventually(() => fake.mainRequests().length > before, 60_000), "opencode reached the model");
    assert.ok(pidsWithEnv(`HOME=${home}`).length > 0, "opencode is running");
    ac.abort();
    const events = await all;
    const last = events.at(-1)!;
    assert.equal(last.type, "error");
    if (last.type !== "error") return;
    assert.equal(last.reason, "aborted");
    assert.equal(last.error.stopReason, "aborted");
    assert.ok(
      await eventually(() => pidsWithEnv(`HOME=${home}`).length === 0, 15_000),
      "no opencode process left after the abort",
    );
    assert.ok(await eventually(() => fake.openConnections() === 0, 5_000), "the model connection was closed");
    assert.ok(
      await eventually(async () => {
        const h = (await (await fetch(`${bridge.url}/health`)).json()) as any;
        return h.turns.running === 0 && h.turns.processes === 0;
      }, 10_000),
      "the bridge freed the turn",
    );
  });
});
