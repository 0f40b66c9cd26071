/**
 * The Anthropic Messages answer (src/request/messages-api): the streaming dialect's frames and
 * their order (blocks opened and closed as the kind changes, tool_use blocks per call, stop
 * reasons, usage, failures, ping), the collected JSON message, and the error shapes by status.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { BackendEvent, FinishReason, Usage } from "../../src/backends/contract/backend.js";
import { ApiError, unauthorized } from "../../src/request/chat-api/errors.js";
import type { FlowEvent } from "../../src/request/encoder/stream.js";
import { messagesErrorBody } from "../../src/request/http/messages-routes.js";
import { collectMessage } from "../../src/request/messages-api/collect.js";
import { MessagesDialect, PING } from "../../src/request/messages-api/dialect.js";
import { anthropicErrorType } from "../../src/request/messages-api/errors.js";

/** Frames as `[event, data]`, each checked: `event: <type>\ndata: <json>\n\n`, data.type the event. */
function parseFrames(text: string): Array<[string, any]> {
  if (!text) return [];
  assert.ok(text.endsWith("\n\n"), `whole frames: ${JSON.stringify(text)}`);
  return text
    .slice(0, -2)
    .split("\n\n")
    .map((block) => {
      const m = /^event: ([a-z_]+)\ndata: ([^\n]*)$/.exec(block);
      assert.ok(m, `frame: ${JSON.stringify(block)}`);
      const data = JSON.parse(m[2]!);
      assert.equal(data.type, m[1]);
      return [m[1]!, data];
    });
}

/** The whole stream of `events`, ended by `finish`. */
function run(events: FlowEvent[], reason: FinishReason = "stop", usage?: Usage): Array<[string, any]> {
  const d = new MessagesDialect("my-model");
  let out = d.open();
  for (const ev of events) out += d.event(ev);
  return parseFrames(out + d.finish(reason, usage));
}

const names = (frames: Array<[string, any]>) =>
  frames.map(([e, d]) =>
    e === "content_block_start"
      ? `start:${d.index}:${d.content_block.type}`
      : e === "content_block_delta"
        ? `delta:${d.index}:${d.delta.type}`
        : e === "content_block_stop"
          ? `stop:${d.index}`
          : e,
  );

describe("the streamed answer", () => {
  test("message_start (the message with no content) then ping; text blocks; message_delta; message_stop", () => {
    const frames = run(
      [
        { type: "text", text: "Hel" },
        { type: "text", text: "lo" },
      ],
      "stop",
      {
        promptTokens: 100,
        completionTokens: 5,
        totalTokens: 105,
        cachedTokens: 40,
      },
    );
    assert.deepEqual(names(frames), [
      "message_start",
      "ping",
      "start:0:text",
      "delta:0:text_delta",
      "delta:0:text_delta",
      "stop:0",
      "message_delta",
      "message_stop",
    ]);
    const msg = frames[0]![1].message;
    assert.match(msg.id, /^msg_/);
    assert.deepEqual(
      { ...msg, id: "" },
      {
        id: "",
        type: "message",
        role: "assistant",
        model: "my-model",
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: { input_tokens: 0, output_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 },
      },
    );
    assert.deepEqual(frames[2]![1].content_block, { type: "text", text: "" });
    assert.deepEqual(frames[3]![1].delta, { type: "text_delta", text: "Hel" });
    assert.deepEqual(frames[6]![1], {
      type: "message_delta",
      delta: { stop_reason: "end_turn", stop_sequence: null },
      // Anthropic's input_tokens leave out the cached ones.
      usage: { input_tokens: 60, output_tokens: 5, cache_creation_input_tokens: 0, cache_read_input_tokens: 40 },
    });
  });

  test("thinking, text, tool calls: each kind its block, closed before the next; one tool_use block per call", () => {
    const frames = run(
      [
        { type: "reasoning", text: "hmm" },
        { type: "text", text: "Let me look." },
        { type: "tool_call", index: 0, id: "c1", name: "Read", argumentsDelta: '{"file' },
        { type: "tool_call", index: 0, argumentsDelta: '_path":"/a"}' },
        { type: "tool_activity", name: "x", status: "started" } as FlowEvent,
        { type: "tool_call", index: 1, id: "c2", name: "Bash", argumentsDelta: "" },
        { type: "tool_call", index: 1, argumentsDelta: '{"command":"ls"}' },
        { type: "usage", usage: { promptTokens: 1, completionTokens: 1, totalTokens: 2 } },
      ],
      "tool_calls",
    );
    assert.deepEqual(names(frames), [
      "message_start",
      "ping",
      "start:0:thinking",
      "delta:0:thinking_delta",
      "stop:0",
      "start:1:text",
      "delta:1:text_delta",
      "stop:1",
      "start:2:tool_use",
      "delta:2:input_json_delta",
      "delta:2:input_json_delta",
      "stop:2",
      "start:3:tool_use",
      "delta:3:input_json_delta",
      "stop:3",
      "message_delta",
      "message_stop",
    ]);
    assert.deepEqual(frames[2]![1].content_block, { type: "thinking", thinking: "", signature: "" });
    assert.deepEqual(frames[3]![1].delta, { type: "thinking_delta", thinking: "hmm" });
    assert.deepEqual(frames[8]![1].content_block, { type: "tool_use", id: "toolu_c1", name: "Read", input: {} });
    const json = frames
      .filter(([e, d]) => e === "content_block_delta" && d.index === 2)
      .map(([, d]) => d.delta.partial_json)
      .join("");
    assert.deepEqual(JSON.parse(json), { file_path: "/a" });
    assert.equal(frames.at(-2)![1].delta.stop_reason, "tool_use");
  });

  test("text after a tool call opens a new text block; a call without an id gets one", () => {
    const frames = run([
      { type: "tool_call", index: 0, name: "t", argumentsDelta: "{}" },
      { type: "text", text: "after" },
    ]);
    assert.deepEqual(names(frames).slice(2, 8), [
      "start:0:tool_use",
      "delta:0:input_json_delta",
      "stop:0",
      "start:1:text",
      "delta:1:text_delta",
      "stop:1",
    ]);
    assert.match(frames[2]![1].content_block.id, /^toolu_call/);
  });

  test("an empty answer: no block at all; stop reasons by finish reason", () => {
    assert.deepEqual(names(run([{ type: "text", text: "" }])), [
      "message_start",
      "ping",
      "message_delta",
      "message_stop",
    ]);
    const reason = (r: FinishReason) => run([], r).at(-2)![1].delta.stop_reason;
    assert.equal(reason("stop"), "end_turn");
    assert.equal(reason("length"), "max_tokens");
    assert.equal(reason("tool_calls"), "tool_use");
    assert.equal(reason("content_filter"), "refusal");
  });

  test("strings that need escaping stay one JSON line per frame", () => {
    const nasty = 'quote " backslash \\ newline \n\n tab \t line-sep \u2028 emoji 🦀 </script>';
    const frames = run([
      { type: "text", text: nasty },
      { type: "tool_call", index: 0, id: 'a"b', name: 'n"\n', argumentsDelta: '{"x":"\\n"}' },
    ]);
    assert.equal(frames[3]![1].delta.text, nasty);
    assert.equal(frames[5]![1].content_block.id, 'toolu_a"b');
    assert.equal(frames[5]![1].content_block.name, 'n"\n');
    assert.equal(frames[6]![1].delta.partial_json, '{"x":"\\n"}');
  });

  test("a failure: event error with the Anthropic body; before anything was sent: the status and body; ping as heartbeat", () => {
    const d = new MessagesDialect("m");
    d.open();
    d.event({ type: "text", text: "partial" });
    const [[event, data]] = parseFrames(d.fail({ code: "backend_failed", message: "upstream closed" })) as [
      [string, any],
    ];
    assert.equal(event, "error");
    assert.deepEqual(data, { type: "error", error: { type: "api_error", message: "upstream closed" } });
    assert.deepEqual(parseFrames(d.fail({ code: "limit_reached", message: "slow down", status: 429 }))[0]![1].error, {
      type: "rate_limit_error",
      message: "slow down",
    });
    const first = d.failFirst({ code: "backend_unavailable", message: "down", status: 503 });
    assert.equal(first.status, 503);
    assert.deepEqual(JSON.parse(first.body), { type: "error", error: { type: "overloaded_error", message: "down" } });
    assert.equal(d.failFirst({ code: "backend_failed", message: "x" }).status, 502);
    assert.equal(d.heartbeat(), PING);
    assert.deepEqual(parseFrames(PING), [["ping", { type: "ping" }]]);
  });
});

async function* events(...evs: BackendEvent[]): AsyncGenerator<BackendEvent> {
  yield* evs;
}

describe("the JSON answer", () => {
  test("the message: blocks in order, tool input parsed, stop_reason tool_use, usage", async () => {
    const r = await collectMessage(
      events(
        { type: "reasoning", text: "a" },
        { type: "reasoning", text: "b" },
        { type: "text", text: "Hi " },
        { type: "text", text: "there" },
        { type: "tool_call", index: 0, id: "c1", name: "Read", argumentsDelta: '{"p":' },
        { type: "tool_call", index: 0, argumentsDelta: "1}" },
        { type: "tool_call", index: 1, id: "c2", name: "Odd", argumentsDelta: "not json" },
        { type: "tool_call", index: 2, id: "c3", name: "None", argumentsDelta: "" },
        { type: "usage", usage: { promptTokens: 10, completionTokens: 4, totalTokens: 14 } },
        { type: "done", finishReason: "stop" },
      ),
      "my-model",
    );
    assert.ok(r.ok);
    const body = r.body as any;
    assert.match(body.id, /^msg_/);
    assert.deepEqual(
      { ...body, id: "" },
      {
        id: "",
        type: "message",
        role: "assistant",
        model: "my-model",
        content: [
          { type: "thinking", thinking: "ab", signature: "" },
          { type: "text", text: "Hi there" },
          { type: "tool_use", id: "toolu_c1", name: "Read", input: { p: 1 } },
          { type: "tool_use", id: "toolu_c2", name: "Odd", input: { _raw: "not json" } },
          { type: "tool_use", id: "toolu_c3", name: "None", input: {} },
        ],
        stop_reason: "tool_use",
        stop_sequence: null,
        usage: { input_tokens: 10, output_tokens: 4, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 },
      },
    );
  });

  test("max_tokens; a failure is returned; a stream without an end is a failure", async () => {
    const long = await collectMessage(
      events({ type: "text", text: "x" }, { type: "done", finishReason: "length" }),
      "m",
    );
    assert.ok(long.ok);
    assert.equal((long.body as any).stop_reason, "max_tokens");
    const failed = await collectMessage(
      events({ type: "text", text: "x" }, { type: "error", error: { code: "backend_failed", message: "boom" } }),
      "m",
    );
    assert.deepEqual(failed, { ok: false, error: { code: "backend_failed", message: "boom" } });
    const cut = await collectMessage(events({ type: "text", text: "x" }), "m");
    assert.equal(cut.ok, false);
  });
});

describe("errors", () => {
  test("the type by status, as the real API names it", () => {
    const table: Array<[number, string]> = [
      [400, "invalid_request_error"],
      [401, "authentication_error"],
      [402, "billing_error"],
      [403, "permission_error"],
      [404, "not_found_error"],
      [413, "request_too_large"],
      [422, "invalid_request_error"],
      [429, "rate_limit_error"],
      [499, "invalid_request_error"],
      [500, "api_error"],
      [502, "api_error"],
      [503, "overloaded_error"],
      [504, "timeout_error"],
      [529, "overloaded_error"],
    ];
    for (const [status, type] of table) assert.equal(anthropicErrorType(status), type, String(status));
  });

  test("the door's bodies: Anthropic-shaped, a 401 saying how an Anthropic client sends its key", () => {
    assert.deepEqual(messagesErrorBody(new ApiError(404, "invalid_request_error", "model_not_found", "no model x")), {
      type: "error",
      error: { type: "not_found_error", message: "no model x" },
    });
    const auth = messagesErrorBody(unauthorized()) as any;
    assert.equal(auth.error.type, "authentication_error");
    assert.match(auth.error.message, /x-api-key.*ANTHROPIC_API_KEY.*Authorization: Bearer/);
  });
});
