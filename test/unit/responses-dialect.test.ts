/**
 * The Responses API dialect (src/request/responses-api/dialect.ts) and its JSON collector, driven by
 * hand-made backend events: the event order of each item kind, sequence numbers, the `event:` line,
 * function and freeform calls (namespaces), reasoning summaries, `length` → `response.incomplete`,
 * failures → `response.failed`, and the stored chat form of the answer. Every stream is also fed to
 * the official `openai` SDK's own accumulator (the one `responses.stream()` uses), which throws on
 * an event it cannot place, and its final snapshot must equal our `response.completed` object.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { accumulateResponse } from "openai/lib/responses/ResponseAccumulator";
import type { BackendEvent, FinishReason, Usage } from "../../src/backends/contract/backend.js";
import { collectResponse } from "../../src/request/responses-api/collect.js";
import {
  ResponsesDialect,
  type FinishedResponse,
  type ResponseContext,
} from "../../src/request/responses-api/dialect.js";
import { translateTools } from "../../src/request/responses-api/translate.js";

const usage: Usage = { promptTokens: 10, completionTokens: 4, totalTokens: 14, cachedTokens: 3, reasoningTokens: 1 };

function context(extra: Partial<ResponseContext> = {}): ResponseContext & { finished: FinishedResponse[] } {
  const finished: FinishedResponse[] = [];
  return {
    id: "resp_test1",
    model: "m",
    createdAt: 1_700_000_000,
    echo: { instructions: null, tools: [], store: true },
    tools: new Map(),
    onFinished: (r) => finished.push(r),
    finished,
    ...extra,
  };
}

interface Frame {
  event: string;
  data: any;
}

function parse(text: string): Frame[] {
  return text
    .split("\n\n")
    .filter(Boolean)
    .map((block) => {
      const lines = block.split("\n");
      assert.equal(lines.length, 2, `one event line and one data line: ${block}`);
      assert.ok(lines[0]!.startsWith("event: "), block);
      assert.ok(lines[1]!.startsWith("data: "), block);
      return { event: lines[0]!.slice(7), data: JSON.parse(lines[1]!.slice(6)) };
    });
}

/** Run events through a dialect as the stream engine does: open, each event, then finish or fail. */
function stream(
  d: ResponsesDialect,
  events: Array<Exclude<BackendEvent, { type: "done" | "error" | "usage" }>>,
  end:
    | { finish: FinishReason; usage?: Usage }
    | { fail: string; code?: "limit_reached" | "backend_failed"; resetAt?: number },
): Frame[] {
  let out = d.open();
  for (const ev of events) out += d.event(ev);
  out +=
    "finish" in end
      ? d.finish(end.finish, end.usage)
      : d.fail({
          code: end.code ?? "backend_failed",
          message: end.fail,
          ...(end.resetAt ? { resetAt: end.resetAt } : {}),
        });
  const frames = parse(out);
  // Wire invariants: the event line names the type; sequence numbers count from 0.
  frames.forEach((f, i) => {
    assert.equal(f.event, f.data.type);
    assert.equal(f.data.sequence_number, i);
  });
  // The SDK's accumulator takes every event; what it built from the deltas before the last
  // (lifecycle) event, which replaces its snapshot, is the final response's output.
  let snapshot: any;
  for (const f of frames.slice(0, -1)) snapshot = accumulateResponse(f.data, snapshot);
  const last = frames.at(-1)!.data.response;
  assert.deepEqual(snapshot.output, last.output, "the SDK's snapshot equals the final response's output");
  accumulateResponse(frames.at(-1)!.data, snapshot);
  return frames;
}

const types = (fs: Frame[]) => fs.map((f) => f.event);

test("text: created, in_progress, one message item, deltas, completed with usage; the chain gets the assistant message", () => {
  const ctx = context();
  const fs = stream(
    new ResponsesDialect(ctx),
    [
      { type: "text", text: "Hel" },
      { type: "text", text: 'lo "x"' },
      { type: "tool_activity", name: "Read", status: "started" },
      { type: "session", id: "s1" },
    ],
    { finish: "stop", usage },
  );
  assert.deepEqual(types(fs), [
    "response.created",
    "response.in_progress",
    "response.output_item.added",
    "response.content_part.added",
    "response.output_text.delta",
    "response.output_text.delta",
    "response.output_text.done",
    "response.content_part.done",
    "response.output_item.done",
    "response.completed",
  ]);
  assert.equal(fs[0]!.data.response.status, "in_progress");
  assert.deepEqual(fs[0]!.data.response.output, []);
  assert.equal(fs[0]!.data.response.usage, null);
  assert.deepEqual(fs[5]!.data, {
    type: "response.output_text.delta",
    item_id: fs[2]!.data.item.id,
    output_index: 0,
    content_index: 0,
    logprobs: [],
    delta: 'lo "x"',
    sequence_number: 5,
  });
  assert.equal(fs[6]!.data.text, 'Hello "x"');
  const done = fs.at(-1)!.data.response;
  assert.equal(done.id, "resp_test1");
  assert.equal(done.status, "completed");
  assert.equal(done.error, null);
  assert.equal(done.incomplete_details, null);
  assert.equal(done.store, true, "the request's fields are echoed");
  assert.deepEqual(done.usage, {
    input_tokens: 10,
    input_tokens_details: { cached_tokens: 3 },
    output_tokens: 4,
    output_tokens_details: { reasoning_tokens: 1 },
    total_tokens: 14,
  });
  assert.equal(ctx.finished.length, 1);
  assert.deepEqual(ctx.finished[0]!.output, { role: "assistant", content: 'Hello "x"' });
  assert.deepEqual(JSON.parse(ctx.finished[0]!.json), done);
});

test("reasoning, then text, then two function calls: one item each, in order; arguments streamed; the chain gets text and tool_calls", () => {
  const ctx = context();
  const fs = stream(
    new ResponsesDialect(ctx),
    [
      { type: "reasoning", text: "Let me " },
      { type: "reasoning", text: "" },
      { type: "reasoning", text: "think." },
      { type: "text", text: "Checking." },
      { type: "tool_call", index: 0, id: "call_a", name: "get_weather", argumentsDelta: '{"city":' },
      { type: "tool_call", index: 0, argumentsDelta: '"Paris"}' },
      { type: "tool_call", index: 1, id: "call_b", name: "get_time", argumentsDelta: "{}" },
    ],
    { finish: "tool_calls" },
  );
  assert.deepEqual(types(fs), [
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
    "response.output_text.done",
    "response.content_part.done",
    "response.output_item.done",
    "response.output_item.added",
    "response.function_call_arguments.delta",
    "response.function_call_arguments.delta",
    "response.function_call_arguments.done",
    "response.output_item.done",
    "response.output_item.added",
    "response.function_call_arguments.delta",
    "response.function_call_arguments.done",
    "response.output_item.done",
    "response.completed",
  ]);
  const out = fs.at(-1)!.data.response.output;
  assert.deepEqual(
    out.map((o: any) => [o.type, out.indexOf(o)]),
    [
      ["reasoning", 0],
      ["message", 1],
      ["function_call", 2],
      ["function_call", 3],
    ],
  );
  assert.deepEqual(out[0].summary, [{ type: "summary_text", text: "Let me think." }]);
  assert.equal(out[2].call_id, "call_a");
  assert.equal(out[2].name, "get_weather");
  assert.equal(out[2].arguments, '{"city":"Paris"}');
  assert.equal(out[2].status, "completed");
  assert.match(out[2].id, /^fc_/);
  const argsDone = fs.find((f) => f.event === "response.function_call_arguments.done")!.data;
  assert.deepEqual(
    {
      name: argsDone.name,
      arguments: argsDone.arguments,
      output_index: argsDone.output_index,
      item_id: argsDone.item_id,
    },
    { name: "get_weather", arguments: '{"city":"Paris"}', output_index: 2, item_id: out[2].id },
  );
  assert.deepEqual(ctx.finished[0]!.output, {
    role: "assistant",
    content: "Checking.",
    tool_calls: [
      { id: "call_a", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } },
      { id: "call_b", type: "function", function: { name: "get_time", arguments: "{}" } },
    ],
  });
});

test("a namespaced tool's call names its tool and namespace; a freeform tool's call is a custom_tool_call with its input", () => {
  const { map } = translateTools([
    { type: "namespace", name: "mcp__files", tools: [{ type: "function", name: "lookup" }] },
    { type: "custom", name: "apply_patch" },
  ]);
  const ctx = context({ tools: map });
  const fs = stream(
    new ResponsesDialect(ctx),
    [
      { type: "tool_call", index: 0, id: "c1", name: "mcp__files__lookup", argumentsDelta: '{"q":1}' },
      { type: "tool_call", index: 1, id: "c2", name: "apply_patch", argumentsDelta: '{"input":"*** Begin' },
      { type: "tool_call", index: 1, argumentsDelta: ' Patch"}' },
    ],
    { finish: "tool_calls" },
  );
  const out = fs.at(-1)!.data.response.output;
  assert.deepEqual(
    { type: out[0].type, name: out[0].name, namespace: out[0].namespace, call_id: out[0].call_id },
    { type: "function_call", name: "lookup", namespace: "mcp__files", call_id: "c1" },
  );
  assert.deepEqual(
    { type: out[1].type, name: out[1].name, input: out[1].input, call_id: out[1].call_id },
    { type: "custom_tool_call", name: "apply_patch", input: "*** Begin Patch", call_id: "c2" },
  );
  assert.match(out[1].id, /^ctc_/);
  assert.deepEqual(types(fs).slice(-5), [
    "response.output_item.added",
    "response.custom_tool_call_input.delta",
    "response.custom_tool_call_input.done",
    "response.output_item.done",
    "response.completed",
  ]);
  // The chain keeps the chat names and arguments, as the model saw them.
  assert.deepEqual(
    ctx.finished[0]!.output.tool_calls!.map((c) => c.function.name),
    ["mcp__files__lookup", "apply_patch"],
  );
});

test("finish reason length → response.incomplete (max_output_tokens); content_filter → incomplete (content_filter)", () => {
  for (const [reason, why] of [
    ["length", "max_output_tokens"],
    ["content_filter", "content_filter"],
  ] as const) {
    const ctx = context();
    const fs = stream(new ResponsesDialect(ctx), [{ type: "text", text: "cut" }], { finish: reason });
    const last = fs.at(-1)!;
    assert.equal(last.event, "response.incomplete");
    assert.equal(last.data.response.status, "incomplete");
    assert.deepEqual(last.data.response.incomplete_details, { reason: why });
    assert.equal(ctx.finished.length, 1, "an incomplete response is kept too");
  }
});

test("a failure ends with response.failed: the open item closed incomplete, error code and message; nothing kept", () => {
  const ctx = context();
  const fs = stream(new ResponsesDialect(ctx), [{ type: "text", text: "part" }], { fail: "upstream went away" });
  assert.deepEqual(types(fs).slice(-5), [
    "response.output_text.delta",
    "response.output_text.done",
    "response.content_part.done",
    "response.output_item.done",
    "response.failed",
  ]);
  const r = fs.at(-1)!.data.response;
  assert.equal(r.status, "failed");
  assert.deepEqual(r.error, { code: "server_error", message: "upstream went away" });
  assert.equal(r.output[0].status, "incomplete");
  assert.equal(ctx.finished.length, 0);

  // A limit: rate_limit_exceeded, with when to try again (Codex reads "try again in Ns").
  const limited = stream(new ResponsesDialect(context()), [], {
    fail: "The account is at its limit.",
    code: "limit_reached",
    resetAt: Date.now() + 90_000,
  });
  assert.deepEqual(types(limited), ["response.created", "response.in_progress", "response.failed"]);
  const err = limited.at(-1)!.data.response.error;
  assert.equal(err.code, "rate_limit_exceeded");
  assert.match(err.message, /^The account is at its limit\. Try again in (89|90)s\.$/);
});

test("heartbeat is an SSE comment; failFirst is an OpenAI-shaped HTTP error", () => {
  const d = new ResponsesDialect(context());
  assert.equal(d.heartbeat(), ": keep-alive\n\n");
  const f = d.failFirst({ code: "limit_reached", message: "slow down", status: 429 });
  assert.equal(f.status, 429);
  assert.deepEqual(JSON.parse(f.body).error.code, "limit_reached");
});

test("collectResponse: the same response object as the stream's; a failure or a stream without an end is returned, not thrown", async () => {
  async function* events(list: BackendEvent[]) {
    for (const e of list) yield e;
  }
  const ok = await collectResponse(
    events([
      { type: "text", text: "Hi" },
      { type: "tool_call", index: 0, id: "c", name: "f", argumentsDelta: "{}" },
      { type: "usage", usage },
      { type: "done", finishReason: "stop" },
    ]),
    new ResponsesDialect(context()),
  );
  assert.ok(ok.ok);
  const body = ok.body as any;
  assert.equal(body.status, "completed");
  assert.deepEqual(
    body.output.map((o: any) => o.type),
    ["message", "function_call"],
  );
  assert.equal(body.usage.total_tokens, 14);
  const failed = await collectResponse(
    events([{ type: "error", error: { code: "backend_failed", message: "boom" } }]),
    new ResponsesDialect(context()),
  );
  assert.deepEqual(failed, { ok: false, error: { code: "backend_failed", message: "boom" } });
  const cut = await collectResponse(events([{ type: "text", text: "x" }]), new ResponsesDialect(context()));
  assert.equal(cut.ok, false);
});
