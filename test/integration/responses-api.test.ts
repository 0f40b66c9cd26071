/**
 * The Responses API door, `POST /v1/responses` and `GET|DELETE /v1/responses/:id`, end to end: a
 * real bridge driven by the official `openai` client (`responses.create`, streamed and not, and the
 * `responses.stream()` helper) and by raw HTTP where the wire itself is the point. Two models: one
 * on an `openai` backend in front of the fake OpenAI upstream (testkit/fakes/openai-api.ts), one on
 * the REAL Claude Code CLI (resume mode) in front of the fake Anthropic API. Only the model APIs
 * are faked.
 */
import assert from "node:assert/strict";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { startFakeAnthropic, type FakeAnthropic, type RecordedRequest } from "../../testkit/fakes/anthropic-api.js";
import { CLAUDE_BIN, claudeEnv } from "../../testkit/fakes/cli-env.js";
import { startFakeOpenAI, type FakeOpenAI, defaultScript } from "../../testkit/fakes/openai-api.js";
import { cleanup, eventually, pidsWithEnv, startTestBridge, tempDir, type TestBridge } from "../helpers/bridge.js";

const UP = "up-model";
const CC = "claude";
/** A 1x1 PNG. */
const PNG =
  "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

interface Frame {
  event: string;
  data: any;
}

/** A raw Responses stream as its frames (`event:` line and parsed `data:`), and its comment lines. */
async function frames(res: Response): Promise<{ frames: Frame[]; comments: number; raw: string }> {
  const raw = await res.text();
  const out: Frame[] = [];
  let comments = 0;
  for (const block of raw.split("\n\n")) {
    if (!block) continue;
    let event = "";
    let data = "";
    for (const line of block.split("\n")) {
      if (line.startsWith(":")) comments++;
      else if (line.startsWith("event: ")) event = line.slice(7);
      else if (line.startsWith("data: ")) data += line.slice(6);
    }
    if (data) out.push({ event, data: JSON.parse(data) });
  }
  return { frames: out, comments, raw };
}

/** The text of a response's message items (a streamed event's response has no `output_text` helper). */
const outputText = (r: OpenAI.Responses.Response) =>
  r.output
    .flatMap((o) => (o.type === "message" ? o.content : []))
    .map((c) => (c.type === "output_text" ? c.text : ""))
    .join("");

const weatherTool: OpenAI.Responses.FunctionTool = {
  type: "function",
  name: "get_weather",
  description: "The weather in a city",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  strict: true,
};

describe("the Responses API door", () => {
  let fake: FakeOpenAI;
  let anthropic: FakeAnthropic;
  let home: string;
  let bridge: TestBridge;
  let client: OpenAI;

  const post = (body: unknown) =>
    fetch(`${bridge.baseURL}/responses`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });

  before(async () => {
    fake = await startFakeOpenAI();
    anthropic = await startFakeAnthropic((req) => ({
      kind: "text",
      chunks: ["Claude heard: ", req.lastUserText.trim().split("\n").at(-1) ?? ""],
    }));
    home = tempDir("cb-resp-home-");
    bridge = await startTestBridge({
      server: { heartbeatSeconds: 0.2 },
      backends: {
        up: { type: "openai", baseUrl: fake.url },
        cc: {
          type: "claude-code",
          command: CLAUDE_BIN,
          env: claudeEnv({ baseUrl: anthropic.baseUrl, home }),
          timeoutSeconds: 60,
          killGraceSeconds: 1,
          // Warm (the default): the follow-up goes to the same live process, ~0.3 s instead of a cold start.
          warm: { enabled: true },
        },
      },
      models: [
        { id: UP, backend: "up", model: "fake-model" },
        { id: CC, backend: "cc", model: "default", session: { mode: "resume" } },
      ],
    });
    client = new OpenAI({ baseURL: bridge.baseURL, apiKey: "unused", maxRetries: 0, timeout: 60_000 });
  });

  after(async () => {
    await bridge?.close(0);
    await fake?.close();
    await anthropic?.close();
    const left = await eventually(() => pidsWithEnv(`HOME=${home}`).length === 0, 10_000);
    cleanup(home);
    if (bridge) cleanup(bridge.dataDir);
    assert.ok(left, "no claude process left behind");
  });

  test("responses.create, not streamed: the response object, instructions as the first system message, GET returns it", async () => {
    fake.setScript(() => ({
      kind: "text",
      chunks: ["Hello ", "there."],
      usage: { prompt_tokens: 11, completion_tokens: 3 },
    }));
    const r = await client.responses.create({
      model: UP,
      instructions: "You are terse.",
      input: "Say hello",
      max_output_tokens: 50,
      temperature: 0.5,
      metadata: { ticket: "42" },
    });
    assert.equal(r.object, "response");
    assert.match(r.id, /^resp_[A-Za-z0-9]+$/);
    assert.equal(r.status, "completed");
    assert.equal(r.model, UP);
    assert.equal(r.output_text, "Hello there.");
    assert.equal(r.instructions, "You are terse.");
    assert.deepEqual(r.metadata, { ticket: "42" });
    assert.equal((r as { store?: boolean }).store, true);
    assert.deepEqual(r.usage, {
      input_tokens: 11,
      input_tokens_details: { cached_tokens: 0 },
      output_tokens: 3,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: 14,
    });
    const item = r.output[0] as OpenAI.Responses.ResponseOutputMessage;
    assert.equal(item.type, "message");
    assert.match(item.id, /^msg_/);
    const up = fake.mainRequests().at(-1)!.body;
    assert.deepEqual(up.messages, [
      { role: "system", content: "You are terse." },
      { role: "user", content: "Say hello" },
    ]);
    assert.equal(up.max_tokens, 50);
    assert.equal(up.temperature, 0.5);

    const got = await client.responses.retrieve(r.id);
    assert.equal(got.id, r.id);
    assert.equal(got.output_text, "Hello there.");
    assert.deepEqual(got.output, r.output);
  });

  test("streamed: the real event order, sequence numbers, reasoning as a summary item, keep-alive comments ignored by the SDK", async () => {
    fake.setScript(() => ({
      kind: "text",
      reasoning: ["Thinking ", "hard."],
      chunks: ["Forty", "-two"],
      firstDelayMs: 700,
      usage: { prompt_tokens: 20, completion_tokens: 5 },
    }));
    const res = await post({ model: UP, input: "What is the answer?", stream: true });
    assert.equal(res.status, 200);
    assert.match(res.headers.get("content-type") ?? "", /^text\/event-stream/);
    const { frames: f, comments } = await frames(res);
    assert.ok(comments >= 1, "a silent stretch got `: keep-alive` comments");
    for (const [i, fr] of f.entries()) {
      assert.equal(fr.event, fr.data.type, "the event line names the data's type");
      assert.equal(fr.data.sequence_number, i, "sequence numbers count from 0 without gaps");
    }
    assert.deepEqual(
      f.map((x) => x.event),
      [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.reasoning_summary_part.added",
        "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.done",
        "response.reasoning_summary_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
      ],
    );
    const created = f[0]!.data.response;
    assert.equal(created.status, "in_progress");
    assert.deepEqual(created.output, []);
    const completed = f.at(-1)!.data.response;
    assert.equal(completed.id, created.id);
    assert.equal(completed.status, "completed");
    assert.deepEqual(completed.output[0].summary, [{ type: "summary_text", text: "Thinking hard." }]);
    assert.equal(completed.output[1].content[0].text, "Forty-two");
    assert.equal(completed.output[1].id, f[10]!.data.item_id);
    assert.equal(f[11]!.data.output_index, 1);
    assert.deepEqual(completed.usage.input_tokens, 20);

    // The same through the SDK's stream helper: its accumulator accepts every event, and the
    // keep-alive comments are skipped by its SSE decoder.
    const s = client.responses.stream({ model: UP, input: "Again?" });
    let deltas = "";
    s.on("response.output_text.delta", (e) => {
      deltas += e.delta;
    });
    const final = await s.finalResponse();
    assert.equal(final.status, "completed");
    assert.equal(final.output_text, "Forty-two");
    assert.equal(deltas, "Forty-two");
  });

  test("a function tool round trip and previous_response_id over three turns: the upstream gets the whole conversation, the client sends only what is new", async () => {
    fake.setScript((req) => {
      const last = req.body.messages.at(-1);
      if (last.role === "tool") return { kind: "text", chunks: [`It is ${last.content} in Paris.`] };
      if (/weather/.test(req.lastUser))
        return { kind: "tool_calls", calls: [{ id: "callw1", name: "get_weather", arguments: { city: "Paris" } }] };
      return defaultScript(req);
    });
    // Turn 1 (streamed): the model calls the tool.
    const { data: s1, response: h1 } = await client.responses
      .create({
        model: UP,
        instructions: "Be brief.",
        input: "What is the weather in Paris?",
        tools: [weatherTool],
        stream: true,
      })
      .withResponse();
    let r1: OpenAI.Responses.Response | undefined;
    const types: string[] = [];
    for await (const ev of s1) {
      types.push(ev.type);
      if (ev.type === "response.completed") r1 = ev.response;
    }
    assert.ok(r1, `completed: ${types.join(", ")}`);
    assert.deepEqual(
      types.filter((t) => t.includes("function_call") || t.includes("output_item")),
      [
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
      ],
    );
    const call = r1.output.find((o) => o.type === "function_call") as OpenAI.Responses.ResponseFunctionToolCall;
    assert.equal(call.call_id, "callw1");
    assert.equal(call.name, "get_weather");
    assert.deepEqual(JSON.parse(call.arguments), { city: "Paris" });
    assert.equal(call.status, "completed");
    const up1 = fake.mainRequests().at(-1)!.body;
    assert.deepEqual(up1.tools, [
      {
        type: "function",
        // (`strict` is dropped by the backend's compat rules for local servers)
        function: { name: "get_weather", description: "The weather in a city", parameters: weatherTool.parameters },
      },
    ]);

    // Turn 2: only the tool's output, continuing turn 1.
    const { data: r2, response: h2 } = await client.responses
      .create({
        model: UP,
        previous_response_id: r1.id,
        input: [{ type: "function_call_output", call_id: call.call_id, output: "sunny" }],
        tools: [weatherTool],
      })
      .withResponse();
    assert.equal(r2.output_text, "It is sunny in Paris.");
    assert.equal(r2.previous_response_id, r1.id);
    const up2 = fake.mainRequests().at(-1)!.body;
    assert.deepEqual(up2.messages.slice(-2), [
      {
        role: "assistant",
        content: null,
        tool_calls: [
          { id: "callw1", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } },
        ],
      },
      { role: "tool", tool_call_id: "callw1", content: "sunny" },
    ]);

    // Turn 3: a new question; the upstream sees the whole conversation.
    const { data: r3, response: h3 } = await client.responses
      .create({ model: UP, previous_response_id: r2.id, input: "Thanks! And tomorrow?" })
      .withResponse();
    assert.equal(r3.status, "completed");
    const up3 = fake.mainRequests().at(-1)!.body;
    assert.deepEqual(
      up3.messages.map((m: any) => [m.role, m.content ?? m.tool_calls?.[0]?.function?.name]),
      [
        // instructions are not carried over (as in the API): this request had none
        ["user", "What is the weather in Paris?"],
        ["assistant", "get_weather"],
        ["tool", "sunny"],
        ["assistant", "It is sunny in Paris."],
        ["user", "Thanks! And tomorrow?"],
      ],
    );
    // One conversation for the whole chain.
    const key = h1.headers.get("x-clawbridge-conversation");
    assert.ok(key);
    assert.equal(h2.headers.get("x-clawbridge-conversation"), key);
    assert.equal(h3.headers.get("x-clawbridge-conversation"), key);
    assert.equal(h3.headers.get("x-clawbridge-conversation-source"), "chain");
  });

  test("Codex-style tools: namespace tools flattened and answered with their namespace, a freeform tool as a custom_tool_call, hosted tools left out", async () => {
    fake.setScript(() => ({
      kind: "tool_calls",
      calls: [
        { id: "callns", name: "mcp__files__lookup", arguments: { q: "x" } },
        { id: "callcu", name: "apply_patch", arguments: { input: "*** Begin Patch\n*** End Patch" } },
      ],
    }));
    const tools = [
      { type: "web_search", external_web_access: false },
      { type: "local_shell" },
      {
        type: "namespace",
        name: "mcp__files",
        description: "File tools",
        tools: [
          { type: "function", name: "lookup", description: "Look up", parameters: { type: "object", properties: {} } },
        ],
      },
      {
        type: "custom",
        name: "apply_patch",
        description: "Apply a patch",
        format: { type: "grammar", syntax: "lark", definition: "start: /.+/" },
      },
    ];
    const res = await post({ model: UP, input: "edit it", tools, tool_choice: "auto", stream: true });
    const { frames: f } = await frames(res);
    const up = fake.mainRequests().at(-1)!.body;
    assert.deepEqual(
      up.tools.map((t: any) => t.function.name),
      ["mcp__files__lookup", "apply_patch"],
    );
    assert.match(up.tools[1].function.description, /lark grammar:\nstart: \/\.\+\//);
    assert.deepEqual(up.tools[1].function.parameters.required, ["input"]);
    const done = f.filter((x) => x.event === "response.output_item.done").map((x) => x.data.item);
    assert.equal(done.length, 2);
    assert.equal(done[0].type, "function_call");
    assert.equal(done[0].name, "lookup");
    assert.equal(done[0].namespace, "mcp__files");
    assert.equal(done[0].call_id, "callns");
    assert.equal(done[1].type, "custom_tool_call");
    assert.equal(done[1].name, "apply_patch");
    assert.equal(done[1].input, "*** Begin Patch\n*** End Patch");
    assert.ok(f.some((x) => x.event === "response.custom_tool_call_input.done"));
    assert.equal(f.at(-1)!.event, "response.completed");

    // The calls sent back as history become chat tool calls again, under their chat names.
    fake.setScript(defaultScript);
    await client.responses.create({
      model: UP,
      input: [
        { role: "user", content: "edit it" },
        { type: "reasoning", id: "rs_1", summary: [] },
        { type: "function_call", call_id: "callns", name: "lookup", namespace: "mcp__files", arguments: "{}" },
        { type: "custom_tool_call", call_id: "callcu", name: "apply_patch", input: "PATCH" },
        { type: "function_call_output", call_id: "callns", output: [{ type: "input_text", text: "found" }] },
        { type: "custom_tool_call_output", call_id: "callcu", output: "applied" },
        { type: "web_search_call", id: "ws_1", status: "completed" },
        { role: "user", content: [{ type: "input_text", text: "now?" }] },
      ] as any,
      tools: tools as any,
    });
    const back = fake.mainRequests().at(-1)!.body.messages;
    assert.deepEqual(back, [
      { role: "user", content: "edit it" },
      {
        role: "assistant",
        content: null,
        tool_calls: [
          { id: "callns", type: "function", function: { name: "mcp__files__lookup", arguments: "{}" } },
          { id: "callcu", type: "function", function: { name: "apply_patch", arguments: '{"input":"PATCH"}' } },
        ],
      },
      { role: "tool", tool_call_id: "callns", content: "found" },
      { role: "tool", tool_call_id: "callcu", content: "applied" },
      { role: "user", content: "now?" },
    ]);
  });

  test("an input_image (data URL) reaches the upstream as an image_url part, detail kept", async () => {
    fake.setScript(() => ({ kind: "text", chunks: ["A dot."] }));
    const r = await client.responses.create({
      model: UP,
      input: [
        {
          role: "user",
          content: [
            { type: "input_text", text: "What is this?" },
            { type: "input_image", image_url: PNG, detail: "low" },
          ],
        },
      ],
    });
    assert.equal(r.output_text, "A dot.");
    const content = fake.mainRequests().at(-1)!.body.messages.at(-1).content;
    assert.deepEqual(content, [
      { type: "text", text: "What is this?" },
      { type: "image_url", image_url: { url: PNG, detail: "low" } },
    ]);
  });

  test("finish reason length: response.incomplete, status incomplete, incomplete_details.reason max_output_tokens", async () => {
    fake.setScript(() => ({ kind: "text", chunks: ["cut"], finishReason: "length" }));
    const res = await post({ model: UP, input: "long story", max_output_tokens: 16, stream: true });
    const { frames: f } = await frames(res);
    const last = f.at(-1)!;
    assert.equal(last.event, "response.incomplete");
    assert.equal(last.data.response.status, "incomplete");
    assert.deepEqual(last.data.response.incomplete_details, { reason: "max_output_tokens" });
    const r = await client.responses.create({ model: UP, input: "long story", max_output_tokens: 16 });
    assert.equal(r.status, "incomplete");
    assert.deepEqual(r.incomplete_details, { reason: "max_output_tokens" });
  });

  test("store: false keeps nothing (GET 404, continuing it 404); unknown previous_response_id is 404 previous_response_not_found", async () => {
    fake.setScript(defaultScript);
    const r = await client.responses.create({ model: UP, input: "forget me", store: false });
    assert.equal((r as { store?: boolean }).store, false);
    const get = await fetch(`${bridge.baseURL}/responses/${r.id}`);
    assert.equal(get.status, 404);
    assert.equal(((await get.json()) as any).error.code, "response_not_found");
    for (const id of [r.id, "resp_doesnotexist"]) {
      const err = await client.responses.create({ model: UP, input: "hi", previous_response_id: id }).then(
        () => undefined,
        (e: unknown) => e,
      );
      assert.ok(err instanceof OpenAI.NotFoundError, String(err));
      assert.equal(err.code, "previous_response_not_found");
      assert.equal(err.param, "previous_response_id");
      assert.match(err.message, new RegExp(`'${id}' not found.*send the whole conversation as input`));
    }
  });

  test("DELETE /v1/responses/:id forgets it; input_items lists what the client sent", async () => {
    fake.setScript(defaultScript);
    const r = await client.responses.create({
      model: UP,
      input: [
        { role: "user", content: "one" },
        { role: "user", content: "two" },
      ],
    });
    const items = await client.responses.inputItems.list(r.id, { order: "asc" });
    assert.deepEqual(
      items.data.map((i: any) => [i.type, i.content]),
      [
        ["message", "one"],
        ["message", "two"],
      ],
    );
    const page = await fetch(`${bridge.baseURL}/responses/${r.id}/input_items?limit=1`).then((x) => x.json() as any);
    assert.equal(page.data.length, 1);
    assert.equal(page.data[0].content, "two");
    assert.equal(page.has_more, true);
    await client.responses.delete(r.id);
    assert.equal((await fetch(`${bridge.baseURL}/responses/${r.id}`)).status, 404);
    assert.equal((await fetch(`${bridge.baseURL}/responses/${r.id}`, { method: "DELETE" })).status, 404);
  });

  test("bad input gets a 400 in the OpenAI shape naming the field", async () => {
    const cases: Array<[unknown, string, RegExp]> = [
      [{ input: "hi" }, "model", /model is required/],
      [{ model: UP }, "input", /input must be a string or an array/],
      [{ model: UP, input: 42 }, "input", /input must be a string or an array/],
      [{ model: UP, input: [{ foo: 1 }] }, "input[0]", /needs a `type`, or, for a message, a `role`/],
      [{ model: UP, input: ["hi"] }, "input[0]", /must be an object/],
      [{ model: UP, input: [{ role: "robot", content: "x" }] }, "input[0].role", /unknown role/],
      [{ model: UP, input: [{ role: "user", content: 7 }] }, "input[0].content", /string or an array/],
      [
        { model: UP, input: [{ role: "user", content: [{ type: "input_image", file_id: "f" }] }] },
        "input[0].content[0].image_url",
        /data URL.*file_id is not supported/,
      ],
      [{ model: UP, input: [{ type: "function_call_output", output: "x" }] }, "input[0].call_id", /must be a string/],
      [{ model: UP, input: "hi", tools: "all" }, "tools", /expected array/],
      [{ model: UP, input: "hi", tools: [{ type: "function" }] }, "tools[0].name", /needs a name/],
      [{ model: UP, input: "hi", temperature: 5 }, "temperature", /2/],
      [{ model: UP, input: "hi", max_output_tokens: -1 }, "max_output_tokens", /.+/],
      [{ model: UP, input: "hi", stream: "yes" }, "stream", /boolean/],
      [{ model: UP, input: "hi", background: true }, "background", /not supported/],
      [
        { model: UP, input: "hi", tools: [weatherTool], tool_choice: { type: "function", name: "nope" } },
        "tool_choice.name",
        /no function tool "nope"/,
      ],
      [{ model: UP, input: [] }, "input", /nothing to answer/],
    ];
    for (const [body, param, message] of cases) {
      const res = await post(body);
      const json = (await res.json()) as any;
      assert.equal(res.status, 400, JSON.stringify(body));
      assert.equal(json.error.type, "invalid_request_error");
      assert.equal(json.error.param, param, `${JSON.stringify(body)} → ${json.error.message}`);
      assert.match(json.error.message, message);
    }
    const unknown = await post({ model: "no-such-model", input: "hi" });
    assert.equal(unknown.status, 404);
    assert.equal(((await unknown.json()) as any).error.code, "model_not_found");
  });

  test("a backend failing mid-stream ends the stream with response.failed (no hang); not streamed it is an HTTP error", async () => {
    fake.setScript(() => ({ kind: "reset", afterChunks: ["partial "] }));
    const s = await client.responses.create({ model: UP, input: "fail please", stream: true });
    const seen: string[] = [];
    let failed: OpenAI.Responses.Response | undefined;
    for await (const ev of s) {
      seen.push(ev.type);
      if (ev.type === "response.failed") failed = ev.response;
    }
    assert.ok(failed, seen.join(", "));
    assert.equal(seen.at(-1), "response.failed");
    assert.equal(failed.status, "failed");
    assert.equal(failed.error?.code, "server_error");
    assert.ok(failed.error?.message);
    // The partial text stays an (incomplete) item.
    assert.equal((failed.output[0] as any)?.status, "incomplete");
    // Not stored: a failed response cannot be fetched.
    assert.equal((await fetch(`${bridge.baseURL}/responses/${failed.id}`)).status, 404);

    const err = await client.responses.create({ model: UP, input: "fail please" }).then(
      () => undefined,
      (e: unknown) => e,
    );
    assert.ok(err instanceof OpenAI.APIError, String(err));
    assert.ok((err.status ?? 0) >= 500, String(err.status));
  });

  test("a CLI backend (the real Claude Code, resume mode): a streamed turn and a previous_response_id follow-up in the same session", async () => {
    const turns = () => anthropic.messageCalls();
    const n0 = turns().length;
    const s = await client.responses.create({ model: CC, input: "My name is Ada.", stream: true });
    let r1: OpenAI.Responses.Response | undefined;
    for await (const ev of s) if (ev.type === "response.completed") r1 = ev.response;
    assert.ok(r1);
    assert.equal(outputText(r1), "Claude heard: My name is Ada.");
    const r2 = await client.responses.create({ model: CC, input: "What is my name?", previous_response_id: r1.id });
    assert.equal(r2.output_text, "Claude heard: What is my name?");
    const calls = turns()
      .slice(n0)
      .filter((c: RecordedRequest) => c.stream);
    assert.ok(calls.length >= 2, `two model calls (${calls.length})`);
    const sessionOf = (c: RecordedRequest) => {
      try {
        return JSON.parse(String(c.body?.metadata?.user_id)).session_id as string;
      } catch {
        return undefined;
      }
    };
    const first = sessionOf(calls[0]!);
    assert.ok(first, "claude names its session");
    assert.equal(sessionOf(calls.at(-1)!), first, "the follow-up resumed the chain's session");
    // Claude Code's own transcript carries turn 1: the bridge sent only the new message.
    const texts = JSON.stringify(calls.at(-1)!.body.messages);
    assert.match(texts, /My name is Ada/);
    assert.equal(path.isAbsolute(home), true);
  });
});
