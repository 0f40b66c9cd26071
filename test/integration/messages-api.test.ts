/**
 * The Anthropic Messages door END TO END with the official `@anthropic-ai/sdk` client: a real
 * bridge (server, pipeline, `openai` backend) in front of the fake OpenAI-compatible upstream
 * (testkit/fakes/openai-api.ts), the only faked part. `messages.create` and `messages.stream`
 * (text, a tool use round trip with tool_result, a base64 image reaching the upstream as an
 * `image_url` data URL part), `countTokens`, the errors the SDK raises by class, a backend failing
 * mid-stream, and the raw wire: frame format, `ping`, Claude Code's `?beta=true` and `HEAD /`.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import Anthropic from "@anthropic-ai/sdk";
import { startFakeOpenAI, type FakeOpenAI, type RecordedRequest } from "../../testkit/fakes/openai-api.js";
import { cleanup, startTestBridge, within, type TestBridge } from "../helpers/bridge.js";

const KEY = "sk-bridge-test";
const MODEL = "claude-bridge";
const UPSTREAM_MODEL = "up-model";
const PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

const WEATHER_TOOL = {
  name: "get_weather",
  description: "The weather in a city",
  input_schema: { type: "object" as const, properties: { city: { type: "string" } }, required: ["city"] },
};

let fake: FakeOpenAI;
let bridge: TestBridge;
let client: Anthropic;

/** The upstream requests since `n`. */
const since = (n: number): RecordedRequest[] => fake.mainRequests().slice(n);

/** The one upstream request made by `run`. */
async function upstreamOf<T>(run: () => Promise<T>): Promise<{ result: T; req: RecordedRequest }> {
  const n = fake.mainRequests().length;
  const result = await run();
  const made = since(n);
  assert.equal(made.length, 1, "one upstream request");
  return { result, req: made[0]! };
}

/** SSE frames of a raw response: `[event, data]`, checking each frame's shape. */
async function frames(res: Response): Promise<Array<[string, any]>> {
  const text = await res.text();
  assert.ok(text.endsWith("\n\n"), "the stream ends with a whole frame");
  return text
    .slice(0, -2)
    .split("\n\n")
    .map((block) => {
      const m = /^event: ([a-z_]+)\ndata: (.*)$/s.exec(block);
      assert.ok(m, `frame shape: ${JSON.stringify(block)}`);
      const data = JSON.parse(m[2]!);
      assert.equal(data.type, m[1], "data.type is the event name");
      return [m[1]!, data] as [string, any];
    });
}

function post(path: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${bridge.url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-api-key": KEY, "anthropic-version": "2023-06-01", ...headers },
    body: JSON.stringify(body),
  });
}

before(async () => {
  fake = await startFakeOpenAI();
  bridge = await startTestBridge({
    server: { apiKeys: [KEY], maxConcurrent: 8 },
    backends: { local: { type: "openai", baseUrl: fake.url } },
    models: [{ id: MODEL, backend: "local", model: UPSTREAM_MODEL }],
  });
  client = new Anthropic({ baseURL: bridge.url, apiKey: KEY, maxRetries: 0, timeout: 20_000 });
});

after(async () => {
  await bridge?.close(0);
  await fake?.close();
  if (bridge) cleanup(bridge.dataDir);
});

describe("messages.create (JSON)", () => {
  test("text: the message object, and the request the upstream got", async () => {
    fake.setScript(() => ({
      kind: "text",
      chunks: ["Hello", " world"],
      usage: { prompt_tokens: 42, completion_tokens: 7 },
    }));
    const { result: msg, req } = await upstreamOf(() =>
      client.messages.create({
        model: MODEL,
        max_tokens: 300,
        system: [{ type: "text", text: "Be brief.", cache_control: { type: "ephemeral" } }],
        messages: [{ role: "user", content: "Say hello" }],
        stop_sequences: ["\n\nHuman:"],
        temperature: 0.5,
        top_p: 0.9,
        metadata: { user_id: "person-1" },
      }),
    );
    assert.match(msg.id, /^msg_/);
    assert.equal(msg.type, "message");
    assert.equal(msg.role, "assistant");
    assert.equal(msg.model, MODEL);
    assert.deepEqual(msg.content, [{ type: "text", text: "Hello world" }]);
    assert.equal(msg.stop_reason, "end_turn");
    assert.equal(msg.stop_sequence, null);
    assert.equal(msg.usage.input_tokens, 42);
    assert.equal(msg.usage.output_tokens, 7);

    assert.equal(req.body.model, UPSTREAM_MODEL);
    assert.deepEqual(req.body.messages, [
      { role: "system", content: "Be brief." },
      { role: "user", content: "Say hello" },
    ]);
    assert.equal(req.body.max_tokens, 300);
    assert.deepEqual(req.body.stop, ["\n\nHuman:"]);
    assert.equal(req.body.temperature, 0.5);
    assert.equal(req.body.top_p, 0.9);
    for (const k of ["metadata", "system", "stop_sequences", "user"]) assert.equal(k in req.body, false, k);
  });

  test("a base64 image block reaches the upstream as an image_url data URL part", async () => {
    fake.setScript(() => ({ kind: "text", chunks: ["A red dot."] }));
    const { result: msg, req } = await upstreamOf(() =>
      client.messages.create({
        model: MODEL,
        max_tokens: 100,
        messages: [
          {
            role: "user",
            content: [
              { type: "image", source: { type: "base64", media_type: "image/png", data: PNG } },
              { type: "text", text: "What is this?" },
            ],
          },
        ],
      }),
    );
    assert.deepEqual(msg.content, [{ type: "text", text: "A red dot." }]);
    const content = req.body.messages.at(-1).content;
    assert.ok(Array.isArray(content), "parts, not a string");
    assert.deepEqual(content[0], { type: "image_url", image_url: { url: `data:image/png;base64,${PNG}` } });
    assert.deepEqual(content[1], { type: "text", text: "What is this?" });
  });
});

describe("messages.stream", () => {
  test("text: the event sequence, the final message and usage", async () => {
    fake.setScript(() => ({
      kind: "text",
      reasoning: ["Let me ", "think."],
      chunks: ["The", " capital", " is", " Paris."],
      usage: { prompt_tokens: 30, completion_tokens: 9 },
    }));
    const stream = client.messages.stream({
      model: MODEL,
      max_tokens: 200,
      messages: [{ role: "user", content: "Capital of France?" }],
    });
    const types: string[] = [];
    let text = "";
    stream.on("text", (t) => {
      text += t;
    });
    for await (const ev of stream) types.push(ev.type === "content_block_delta" ? `delta:${ev.delta.type}` : ev.type);
    const msg = await stream.finalMessage();
    assert.deepEqual(types, [
      "message_start",
      "content_block_start",
      "delta:thinking_delta",
      "delta:thinking_delta",
      "content_block_stop",
      "content_block_start",
      "delta:text_delta",
      "delta:text_delta",
      "delta:text_delta",
      "delta:text_delta",
      "content_block_stop",
      "message_delta",
      "message_stop",
    ]);
    assert.equal(text, "The capital is Paris.");
    assert.equal(msg.content.length, 2);
    assert.equal(msg.content[0]!.type, "thinking");
    assert.equal((msg.content[0] as Anthropic.ThinkingBlock).thinking, "Let me think.");
    assert.deepEqual(msg.content[1], { type: "text", text: "The capital is Paris." });
    assert.equal(msg.stop_reason, "end_turn");
    assert.equal(msg.usage.input_tokens, 30);
    assert.equal(msg.usage.output_tokens, 9);
  });

  test("a tool use round trip: tool_use out, tool_result back as a tool message with the same call id", async () => {
    fake.setScript((req) => {
      const last = req.body.messages.at(-1);
      if (last.role === "tool") return { kind: "text", chunks: [`It is ${last.content}.`] };
      return {
        kind: "tool_calls",
        content: "Checking.",
        calls: [{ id: "callw1", name: "get_weather", arguments: { city: "Paris" } }],
      };
    });
    const tools: Anthropic.ToolUnion[] = [
      WEATHER_TOOL,
      // A server tool (Anthropic runs it): left out, never a 400.
      { type: "web_search_20250305", name: "web_search", max_uses: 2 },
    ];
    const question: Anthropic.MessageParam = { role: "user", content: "Weather in Paris?" };
    const first = await upstreamOf(async () => {
      const s = client.messages.stream({
        model: MODEL,
        max_tokens: 200,
        tools,
        tool_choice: { type: "any", disable_parallel_tool_use: true },
        messages: [question],
      });
      return s.finalMessage();
    });
    const msg = first.result;
    assert.equal(msg.stop_reason, "tool_use");
    assert.equal(msg.content[0]!.type, "text");
    const use = msg.content[1] as Anthropic.ToolUseBlock;
    assert.equal(use.type, "tool_use");
    assert.equal(use.id, "toolu_callw1");
    assert.equal(use.name, "get_weather");
    assert.deepEqual(use.input, { city: "Paris" });
    assert.deepEqual(
      first.req.body.tools.map((t: any) => t.function.name),
      ["get_weather"],
    );
    assert.deepEqual(first.req.body.tools[0].function.parameters, WEATHER_TOOL.input_schema);
    assert.equal(first.req.body.tool_choice, "required");
    assert.equal(first.req.body.parallel_tool_calls, false);

    const second = await upstreamOf(() =>
      client.messages.create({
        model: MODEL,
        max_tokens: 200,
        tools,
        messages: [
          question,
          { role: "assistant", content: msg.content },
          {
            role: "user",
            content: [{ type: "tool_result", tool_use_id: use.id, content: [{ type: "text", text: "sunny, 21 C" }] }],
          },
        ],
      }),
    );
    assert.deepEqual(second.result.content, [{ type: "text", text: "It is sunny, 21 C." }]);
    const sent = second.req.body.messages;
    // The thinking-free assistant turn and the tool message, with the id the upstream issued.
    assert.deepEqual(sent.at(-2), {
      role: "assistant",
      content: "Checking.",
      tool_calls: [
        { id: "callw1", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } },
      ],
    });
    assert.deepEqual(sent.at(-1), { role: "tool", tool_call_id: "callw1", content: "sunny, 21 C" });
  });

  test("a backend that fails mid-stream: the SDK raises the error event, no hang", async () => {
    fake.setScript(() => ({ kind: "reset", afterChunks: ["partial "] }));
    const stream = client.messages.stream({
      model: MODEL,
      max_tokens: 100,
      messages: [{ role: "user", content: "fail please" }],
    });
    let seen = "";
    stream.on("text", (t) => {
      seen += t;
    });
    const err = await within(
      stream.finalMessage().then(
        () => undefined,
        (e: unknown) => e,
      ),
      15_000,
      "the failed stream ends",
    );
    assert.ok(err instanceof Anthropic.APIError, `an APIError: ${String(err)}`);
    assert.equal(seen, "partial ");
    // The SDK raises the `event: error` frame's body.
    const body = err.error as { type: string; error: { type: string; message: string } };
    assert.equal(body.type, "error");
    assert.equal(body.error.type, "api_error");
    assert.ok(body.error.message.length > 0);
  });
});

describe("count_tokens", () => {
  test("an estimate that grows with the request; Claude Code's ?beta=true works", async () => {
    const small = await client.messages.countTokens({ model: MODEL, messages: [{ role: "user", content: "hi" }] });
    const big = await client.messages.countTokens({
      model: MODEL,
      system: "You are a helpful assistant. ".repeat(20),
      tools: [WEATHER_TOOL],
      messages: [{ role: "user", content: "Tell me about the weather in Paris, please. ".repeat(10) }],
    });
    assert.ok(small.input_tokens > 0 && small.input_tokens < 20, `small: ${small.input_tokens}`);
    assert.ok(big.input_tokens > small.input_tokens + 150, `big: ${big.input_tokens}`);
    const beta = await post("/v1/messages/count_tokens?beta=true", {
      model: MODEL,
      messages: [{ role: "user", content: "hi" }],
    });
    assert.equal(beta.status, 200);
    assert.deepEqual(await beta.json(), { input_tokens: small.input_tokens });
    // Its errors are Anthropic-shaped too: bad JSON, no messages.
    for (const [body, field] of [
      ["{not json", /not valid JSON/],
      [JSON.stringify({ model: MODEL }), /^messages: /],
    ] as const) {
      const res = await fetch(`${bridge.url}/v1/messages/count_tokens`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-api-key": KEY },
        body,
      });
      assert.equal(res.status, 400);
      const err = (await res.json()) as { type: string; error: { type: string; message: string } };
      assert.equal(err.type, "error");
      assert.equal(err.error.type, "invalid_request_error");
      assert.match(err.error.message, field);
    }
  });
});

describe("errors, in Anthropic's shape and the SDK's classes", () => {
  test("an unknown model → NotFoundError (not_found_error)", async () => {
    const err = await client.messages
      .create({ model: "no-such-model", max_tokens: 10, messages: [{ role: "user", content: "x" }] })
      .catch((e: unknown) => e);
    assert.ok(err instanceof Anthropic.NotFoundError, String(err));
    assert.equal(err.status, 404);
    assert.equal((err.error as any).type, "error");
    assert.equal((err.error as any).error.type, "not_found_error");
    assert.match((err.error as any).error.message, /no-such-model.*claude-bridge/s);
  });

  test("a missing max_tokens, a bad block → BadRequestError naming the field", async () => {
    const noMax = await client.messages
      // @ts-expect-error max_tokens is required, and left out on purpose
      .create({ model: MODEL, messages: [{ role: "user", content: "x" }] })
      .catch((e: unknown) => e);
    assert.ok(noMax instanceof Anthropic.BadRequestError, String(noMax));
    assert.equal((noMax.error as any).error.type, "invalid_request_error");
    assert.match((noMax.error as any).error.message, /max_tokens/);

    const res = await post("/v1/messages", {
      model: MODEL,
      max_tokens: 10,
      messages: [{ role: "user", content: [{ type: "image", source: { type: "base64", media_type: "image/png" } }] }],
    });
    assert.equal(res.status, 400);
    const body = (await res.json()) as { type: string; error: { type: string; message: string } };
    assert.equal(body.type, "error");
    assert.equal(body.error.type, "invalid_request_error");
    assert.match(body.error.message, /^messages\[0\]\.content\[0\]\.source/);
  });

  test("a wrong key → AuthenticationError, on both routes and both ways of sending the key", async () => {
    const wrong = new Anthropic({ baseURL: bridge.url, apiKey: "sk-wrong", maxRetries: 0 });
    const err = await wrong.messages
      .create({ model: MODEL, max_tokens: 10, messages: [{ role: "user", content: "x" }] })
      .catch((e: unknown) => e);
    assert.ok(err instanceof Anthropic.AuthenticationError, String(err));
    assert.equal((err.error as any).error.type, "authentication_error");
    assert.match((err.error as any).error.message, /x-api-key/);
    const count = await wrong.messages
      .countTokens({ model: MODEL, messages: [{ role: "user", content: "x" }] })
      .catch((e: unknown) => e);
    assert.ok(count instanceof Anthropic.AuthenticationError, String(count));
    assert.equal((count.error as any).error.type, "authentication_error");

    // ANTHROPIC_AUTH_TOKEN: a bearer token.
    fake.setScript(() => ({ kind: "text", chunks: ["ok"] }));
    const bearer = new Anthropic({ baseURL: bridge.url, apiKey: null, authToken: KEY, maxRetries: 0 });
    const msg = await bearer.messages.create({
      model: MODEL,
      max_tokens: 10,
      messages: [{ role: "user", content: "x" }],
    });
    assert.deepEqual(msg.content, [{ type: "text", text: "ok" }]);
  });

  test("an upstream failure before any output → the SDK's error class for its status", async () => {
    fake.setScript(() => ({ kind: "error", status: 400, message: "context length exceeded" }));
    const err = await client.messages
      .create({ model: MODEL, max_tokens: 10, messages: [{ role: "user", content: "x" }] })
      .catch((e: unknown) => e);
    assert.ok(err instanceof Anthropic.BadRequestError, String(err));
    assert.equal((err.error as any).error.type, "invalid_request_error");
    assert.match((err.error as any).error.message, /context length exceeded/);
  });
});

describe("the raw wire, as Claude Code uses it", () => {
  test("HEAD / answers; ?beta=true streams `event:` frames with ping after message_start; tool_use blocks", async () => {
    const head = await fetch(`${bridge.url}/`, { method: "HEAD" });
    assert.equal(head.status, 200);

    fake.setScript(() => ({
      kind: "tool_calls",
      calls: [
        { id: "c1", name: "Read", arguments: { file_path: "/tmp/a" } },
        { id: "c2", name: "Read", arguments: { file_path: "/tmp/b" } },
      ],
    }));
    const { result: res, req } = await upstreamOf(async () => {
      const r = await post("/v1/messages?beta=true", {
        model: MODEL,
        max_tokens: 32000,
        stream: true,
        thinking: { type: "adaptive" },
        context_management: { edits: [] },
        metadata: { user_id: JSON.stringify({ device_id: "d", account_uuid: "", session_id: "s-1" }) },
        system: [{ type: "text", text: "You are Claude Code." }],
        tools: [{ name: "Read", description: "Read a file", input_schema: { type: "object", properties: {} } }],
        messages: [
          { role: "user", content: [{ type: "text", text: "read a and b", cache_control: { type: "ephemeral" } }] },
          { role: "system", content: "Available agent types: none" },
          {
            role: "assistant",
            content: [
              { type: "thinking", thinking: "hmm", signature: "sig" },
              { type: "redacted_thinking", data: "xx" },
              { type: "text", text: "Sure." },
            ],
          },
          { role: "user", content: "go on" },
        ],
      });
      return { status: r.status, type: r.headers.get("content-type"), frames: await frames(r) };
    });
    assert.equal(res.status, 200);
    assert.match(res.type ?? "", /^text\/event-stream/);
    assert.deepEqual(
      res.frames.map(([e]) => e),
      [
        "message_start",
        "ping",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
      ],
    );
    const start = res.frames[0]![1].message;
    assert.match(start.id, /^msg_/);
    assert.deepEqual(
      { type: start.type, role: start.role, model: start.model, content: start.content, stop: start.stop_reason },
      { type: "message", role: "assistant", model: MODEL, content: [], stop: null },
    );
    assert.equal(typeof start.usage.input_tokens, "number");
    assert.deepEqual(res.frames[2]![1], {
      type: "content_block_start",
      index: 0,
      content_block: { type: "tool_use", id: "toolu_c1", name: "Read", input: {} },
    });
    assert.deepEqual(res.frames[3]![1], {
      type: "content_block_delta",
      index: 0,
      delta: { type: "input_json_delta", partial_json: '{"file_path":"/tmp/a"}' },
    });
    assert.equal(res.frames[5]![1].index, 1);
    assert.equal(res.frames[5]![1].content_block.id, "toolu_c2");
    assert.equal(res.frames[8]![1].delta.stop_reason, "tool_use");
    assert.equal(typeof res.frames[8]![1].usage.output_tokens, "number");

    // What the upstream was given: the system prompt first, the mid-conversation system message
    // in its place, thinking left out, Anthropic-only fields not passed.
    assert.deepEqual(req.body.messages, [
      { role: "system", content: "You are Claude Code." },
      { role: "user", content: "read a and b" },
      { role: "system", content: "Available agent types: none" },
      { role: "assistant", content: "Sure." },
      { role: "user", content: "go on" },
    ]);
    for (const k of ["thinking", "context_management", "metadata"]) assert.equal(k in req.body, false, k);
  });
});
