/**
 * The OpenAI-compatible upstream backend against the fake OpenAI API on 127.0.0.1, replaying
 * streams in the shapes vLLM, Ollama and llama.cpp emit (test/fixtures/upstream/).
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";
import pino from "pino";
import { openaiBackend, openaiOptionsSchema, buildUpstreamBody } from "../../src/backends/openai/backend.js";
import type { Backend, BackendEvent, TurnInput } from "../../src/backends/contract/backend.js";
import type { ChatRequest } from "../../src/request/chat-api/schema.js";
import { startFakeOpenAI, type FakeOpenAI, type Reply } from "../../testkit/fakes/openai-api.js";
import { eventually } from "../helpers/bridge.js";
import { guardedRun } from "../helpers/backend-turn.js";
import { Cancellation } from "../../src/core/util/cancel.js";

const FIXTURES = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "fixtures", "upstream");

/** A fixture split into its SSE frames (each written separately by the fake). */
function frames(name: string): string[] {
  return readFileSync(path.join(FIXTURES, name), "utf8")
    .split(/(?<=\n\n)/)
    .filter((f) => f.length > 0);
}
const fixture = (name: string): string => readFileSync(path.join(FIXTURES, name), "utf8");
const replay = (name: string): Reply => ({ kind: "raw", frames: frames(name) });
const sse = (obj: unknown): string => `data: ${JSON.stringify(obj)}\n\n`;
const chunk = (delta: object, finish: string | null = null) =>
  sse({
    id: "chatcmpl-t",
    object: "chat.completion.chunk",
    created: 1,
    model: "m",
    choices: [{ index: 0, delta, finish_reason: finish }],
  });

function captureLogger(level = "trace") {
  const lines: string[] = [];
  const logger = pino({ level }, { write: (s: string) => void lines.push(s) });
  return { logger, lines };
}

const silent = pino({ level: "silent" });
const backends: Backend[] = [];

function makeBackend(baseUrl: string, opts: Record<string, unknown> = {}, logger = silent): Backend {
  const options = openaiOptionsSchema.parse({ baseUrl, ...opts });
  const b = openaiBackend.create("local", options, { logger, dataDir: "/tmp" });
  backends.push(b);
  return b;
}

const TOOLS = ["read", "exec", "write"].map((name) => ({
  type: "function",
  function: { name, description: `${name} tool`, parameters: { type: "object", properties: {} }, strict: false },
}));

function turn(
  request: Partial<ChatRequest> = {},
  signal: AbortSignal = new AbortController().signal,
  model = "upstream-model",
): TurnInput {
  const req = {
    model: "client-model",
    messages: [{ role: "user" as const, content: "hello" }],
    stream: true,
    ...request,
  } as ChatRequest;
  const { cancel } = Cancellation.follow(signal);
  return {
    model,
    prompt: { system: "", text: "hello" },
    request: req,
    session: { key: "k", turn: 0 },
    cancel,
    get signal() {
      return cancel.signal;
    },
  };
}

async function collect(events: AsyncIterable<BackendEvent>): Promise<BackendEvent[]> {
  const out: BackendEvent[] = [];
  for await (const ev of events) {
    out.push(ev);
    if (out.length > 10_000) throw new Error("runaway event stream");
  }
  return out;
}

const texts = (evs: BackendEvent[]) =>
  evs.filter((e): e is Extract<BackendEvent, { type: "text" }> => e.type === "text").map((e) => e.text);
const text = (evs: BackendEvent[]) => texts(evs).join("");
const last = (evs: BackendEvent[]) => evs[evs.length - 1];

/** Tool calls rebuilt from the events; asserts the OpenAI streaming rules the clients rely on. */
function toolCalls(evs: BackendEvent[]): Array<{ id: string; name: string; args: string }> {
  const tc = evs.filter((e): e is Extract<BackendEvent, { type: "tool_call" }> => e.type === "tool_call");
  const calls: Array<{ id: string; name: string; args: string }> = [];
  let prev = -1;
  for (const c of tc) {
    if (c.index !== prev) {
      assert.equal(
        c.index,
        prev + 1,
        `tool-call indexes must be contiguous and in order (got ${c.index} after ${prev})`,
      );
      assert.ok(c.id && c.name, "the first chunk of a call carries id and name");
      assert.match(c.id, /^[A-Za-z0-9]+$/, "ids are letters and digits");
      calls.push({ id: c.id, name: c.name, args: "" });
      prev = c.index;
    } else {
      assert.equal(c.id, undefined, "only the first chunk of a call carries the id");
    }
    calls[c.index]!.args += c.argumentsDelta;
  }
  return calls;
}

function assertOneTerminal(evs: BackendEvent[]): void {
  const terminal = evs.filter((e) => e.type === "done" || e.type === "error");
  assert.equal(terminal.length, 1, "exactly one done/error");
  assert.equal(terminal[0], last(evs), "done/error is the last event");
}

describe("openai backend", () => {
  let fake: FakeOpenAI;
  before(async () => {
    fake = await startFakeOpenAI();
  });
  after(async () => {
    for (const b of backends) await b.close?.();
    await fake.close();
  });

  it("module contract: passthrough only, defaults", () => {
    assert.equal(openaiBackend.type, "openai");
    assert.equal(openaiBackend.defaultSessionMode, "passthrough");
    assert.deepEqual([...openaiBackend.sessionModes], ["passthrough"]);
    const o = openaiOptionsSchema.parse({ baseUrl: "http://127.0.0.1:8000/v1" });
    assert.equal(o.timeoutSeconds, 300);
    assert.equal(o.maxToolCalls, 20);
    assert.equal(o.extractToolCalls, true);
    assert.throws(() => openaiOptionsSchema.parse({ baseUrl: "127.0.0.1:8000" }));
    assert.throws(() => openaiOptionsSchema.parse({ baseUrl: "http://x/v1", nope: 1 }), /nope|Unrecognized/);
  });

  it("vLLM stream: one text event per upstream delta, usage, stop; request rewritten for the upstream", async () => {
    fake.setScript(() => replay("vllm-text.sse"));
    const b = makeBackend(fake.url, { apiKey: "sk-local-secret", headers: { "x-team": "a" } });
    const evs = await collect(
      b.run(
        turn({
          messages: [
            { role: "developer", content: "be brief" },
            { role: "user", content: "capital of France?" },
          ],
          max_completion_tokens: 256,
          store: false,
          reasoning_effort: "low",
          tools: TOOLS,
          tool_choice: "auto",
        } as Partial<ChatRequest>),
      ),
    );
    // Tools were offered, so text runs through the extractor: it holds a whitespace-only delta until
    // the next visible character (blanks next to a removed call are dropped). Every other delta is its own event.
    assert.deepEqual(texts(evs), [
      "The",
      " capital",
      " of",
      " France",
      " is",
      " Paris",
      ".",
      " It",
      " has",
      " been",
      " the",
      " capital",
      " since",
      " 9",
      "8",
      "7",
      ".",
    ]);
    assert.deepEqual(
      evs.filter((e) => e.type === "usage"),
      [{ type: "usage", usage: { promptTokens: 1432, completionTokens: 18, totalTokens: 1450 } }],
    );
    assert.deepEqual(last(evs), { type: "done", finishReason: "stop" });
    assertOneTerminal(evs);

    const req = fake.mainRequests().at(-1)!;
    assert.equal(req.path, "/v1/chat/completions");
    assert.equal(req.headers.authorization, "Bearer sk-local-secret");
    assert.equal(req.headers["x-team"], "a");
    const body = req.body;
    assert.equal(body.model, "upstream-model");
    assert.equal(body.stream, true);
    assert.deepEqual(body.stream_options, { include_usage: true });
    assert.equal(body.max_tokens, 256);
    assert.equal("max_completion_tokens" in body, false);
    assert.equal("store" in body, false);
    assert.equal("reasoning_effort" in body, false);
    assert.equal(body.messages[0].role, "system");
    assert.equal(body.tools.length, 3);
    assert.equal("strict" in body.tools[0].function, false);
    assert.equal(body.tool_choice, "auto");
  });

  it("with streamUpstream: always a non-streaming client request is still streamed from the upstream", async () => {
    fake.setScript(() => replay("vllm-text.sse"));
    const b = makeBackend(fake.url, { streamUpstream: "always" });
    const evs = await collect(b.run(turn({ stream: false })));
    // Without tools every upstream delta is one event, whitespace-only ones included.
    assert.deepEqual(texts(evs), [
      "The",
      " capital",
      " of",
      " France",
      " is",
      " Paris",
      ".",
      " It",
      " has",
      " been",
      " the",
      " capital",
      " since",
      " ",
      "9",
      "8",
      "7",
      ".",
    ]);
    assert.equal(fake.mainRequests().at(-1)!.body.stream, true);
  });

  it("Ollama stream (role on every chunk, fp_ollama, usage chunk) with extraBody options", async () => {
    fake.setScript(() => replay("ollama-text.sse"));
    const b = makeBackend(fake.url, { extraBody: { options: { num_ctx: 32768 } }, compat: { dropFields: ["user"] } });
    const evs = await collect(b.run(turn({ user: "someone" })));
    assert.equal(text(evs), "Hello! How can I help you today?");
    assert.equal(texts(evs).length, 9);
    assert.deepEqual(
      evs.find((e) => e.type === "usage"),
      { type: "usage", usage: { promptTokens: 26, completionTokens: 10, totalTokens: 36 } },
    );
    assert.deepEqual(last(evs), { type: "done", finishReason: "stop" });
    const body = fake.mainRequests().at(-1)!.body;
    assert.deepEqual(body.options, { num_ctx: 32768 });
    assert.equal("user" in body, false);
  });

  it("llama.cpp stream: null content in the role chunk, usage on the finish chunk", async () => {
    fake.setScript(() => replay("llamacpp-text.sse"));
    const b = makeBackend(fake.url);
    const evs = await collect(b.run(turn()));
    assert.equal(text(evs), "Sure. Here is a haiku:\n\nQuiet loopback port");
    assert.deepEqual(
      evs.find((e) => e.type === "usage"),
      { type: "usage", usage: { promptTokens: 48, completionTokens: 11, totalTokens: 59 } },
    );
    assert.deepEqual(last(evs), { type: "done", finishReason: "stop" });
    assertOneTerminal(evs);
  });

  it("reasoning_content stream → reasoning events, then text; reasoning tokens in usage", async () => {
    fake.setScript(() => replay("vllm-reasoning.sse"));
    const b = makeBackend(fake.url);
    const evs = await collect(b.run(turn()));
    const reasoning = evs.filter((e) => e.type === "reasoning").map((e) => (e as { text: string }).text);
    assert.equal(reasoning.join(""), "Okay, the user wants 2+2.");
    assert.equal(reasoning.length, 9);
    assert.equal(text(evs), "\n\n2 + 2 = 4.");
    const firstText = evs.findIndex((e) => e.type === "text");
    const lastReasoning = evs.map((e) => e.type).lastIndexOf("reasoning");
    assert.ok(lastReasoning < firstText, "reasoning comes before the answer");
    assert.deepEqual(
      evs.find((e) => e.type === "usage"),
      { type: "usage", usage: { promptTokens: 96, completionTokens: 52, totalTokens: 148, reasoningTokens: 9 } },
    );
  });

  it("`delta.reasoning` (newer servers) is read too, and not doubled when both fields are sent", async () => {
    fake.setScript(() => ({
      kind: "raw",
      frames: [
        chunk({ role: "assistant" }),
        chunk({ reasoning: "think" }),
        chunk({ reasoning: "ing", reasoning_content: "ing" }),
        chunk({ content: "ok" }),
        chunk({}, "stop"),
        "data: [DONE]\n\n",
      ],
    }));
    const b = makeBackend(fake.url);
    const evs = await collect(b.run(turn()));
    assert.deepEqual(
      evs.map((e) => e.type),
      ["reasoning", "reasoning", "text", "done"],
    );
    assert.deepEqual(evs.slice(0, 2), [
      { type: "reasoning", text: "think" },
      { type: "reasoning", text: "ing" },
    ]);
  });

  it("plain JSON reply to a streaming request becomes the same events", async () => {
    fake.setScript(() => ({
      kind: "raw",
      headers: { "content-type": "application/json" },
      frames: [fixture("plain-json-text.json")],
    }));
    const b = makeBackend(fake.url);
    const evs = await collect(b.run(turn()));
    assert.deepEqual(evs, [
      { type: "text", text: "Paris is the capital of France." },
      { type: "usage", usage: { promptTokens: 21, completionTokens: 8, totalTokens: 29 } },
      { type: "done", finishReason: "stop" },
    ]);

    fake.setScript(() => ({
      kind: "raw",
      headers: { "content-type": "application/json; charset=utf-8" },
      frames: [fixture("plain-json-tools.json")],
    }));
    const evs2 = await collect(b.run(turn({ tools: TOOLS })));
    assert.deepEqual(evs2[0], { type: "reasoning", text: "Need the file." });
    assert.deepEqual(toolCalls(evs2), [{ id: "chatcmpltoolaa11bb22", name: "read", args: '{"path": "/tmp/a.txt"}' }]);
    assert.deepEqual(last(evs2), { type: "done", finishReason: "tool_calls" });
    assertOneTerminal(evs2);
  });

  it("a JSON body without a JSON content type is recognised by its first byte", async () => {
    fake.setScript(() => ({
      kind: "raw",
      headers: { "content-type": "text/plain" },
      frames: [fixture("plain-json-text.json")],
    }));
    const b = makeBackend(fake.url);
    const evs = await collect(b.run(turn()));
    assert.equal(text(evs), "Paris is the capital of France.");
    assert.deepEqual(last(evs), { type: "done", finishReason: "stop" });
  });

  it("native tool_calls (vLLM hermes parser): ids sanitised, arguments streamed, finish tool_calls", async () => {
    fake.setScript(() => replay("vllm-tools.sse"));
    const b = makeBackend(fake.url);
    const evs = await collect(b.run(turn({ tools: TOOLS })));
    assert.deepEqual(toolCalls(evs), [
      { id: "chatcmpltool4c1d8e0f2a3b4c5d9e8f7a6b5c4d3e2f", name: "read", args: '{"path": "/home/user/notes.txt"}' },
      { id: "chatcmpltool7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d", name: "exec", args: '{"command": "ls -la /tmp"}' },
    ]);
    // Each upstream argument delta is passed on as its own event (no batching).
    assert.equal(evs.filter((e) => e.type === "tool_call").length, 2 + 6 + 5);
    assert.deepEqual(
      evs.find((e) => e.type === "usage"),
      { type: "usage", usage: { promptTokens: 5120, completionTokens: 41, totalTokens: 5161 } },
    );
    assert.deepEqual(last(evs), { type: "done", finishReason: "tool_calls" });
    assert.equal(texts(evs).length, 0);
  });

  it("two native calls interleaved by the upstream come out contiguous", async () => {
    fake.setScript(() => replay("interleaved-tools.sse"));
    const b = makeBackend(fake.url);
    const evs = await collect(b.run(turn({ tools: TOOLS })));
    assert.deepEqual(toolCalls(evs), [
      { id: "callA1", name: "read", args: '{"path":"/tmp/x"}' },
      { id: "callB2", name: "exec", args: '{"command":"pwd"}' },
    ]);
    assert.deepEqual(
      evs.filter((e) => e.type === "tool_call").map((e) => (e as { index: number }).index),
      [0, 0, 0, 1],
    );
    assert.deepEqual(last(evs), { type: "done", finishReason: "tool_calls" });
  });

  it("Ollama native calls that reuse index 0 become two calls; finish stop → tool_calls", async () => {
    fake.setScript(() => replay("ollama-native-tools.sse"));
    const b = makeBackend(fake.url);
    const evs = await collect(b.run(turn({ tools: TOOLS })));
    assert.deepEqual(toolCalls(evs), [
      { id: "callk3j2l1m0", name: "read", args: '{"path":"/tmp/a.txt"}' },
      { id: "callp9o8i7u6", name: "read", args: '{"path":"/tmp/b.txt"}' },
    ]);
    assert.deepEqual(last(evs), { type: "done", finishReason: "tool_calls" });
  });

  it("calls written as text (<tool_call> JSON) are extracted when tools were offered", async () => {
    fake.setScript(() => replay("vllm-hermes-text-calls.sse"));
    const b = makeBackend(fake.url);
    const evs = await collect(b.run(turn({ tools: TOOLS })));
    const calls = toolCalls(evs);
    assert.equal(calls.length, 1);
    assert.equal(calls[0]!.name, "read");
    assert.deepEqual(JSON.parse(calls[0]!.args), { path: "/etc/hostname" });
    assert.match(text(evs), /^I'll read the file first\.\s*$/);
    assert.doesNotMatch(text(evs), /tool_call/);
    assert.deepEqual(last(evs), { type: "done", finishReason: "tool_calls" });
    assertOneTerminal(evs);
  });

  it("text that looks like a call stays text when no tools were offered, or tool_choice is none, or extraction is off", async () => {
    fake.setScript(() => replay("vllm-hermes-text-calls.sse"));
    const raw = frames("vllm-hermes-text-calls.sse")
      .map((f) => f.slice(6).trim())
      .filter((p) => p !== "[DONE]")
      .map((p) => JSON.parse(p).choices[0]?.delta?.content ?? "")
      .join("");
    const b = makeBackend(fake.url);
    for (const req of [{}, { tools: TOOLS, tool_choice: "none" }]) {
      const evs = await collect(b.run(turn(req as Partial<ChatRequest>)));
      assert.equal(text(evs), raw);
      assert.equal(toolCalls(evs).length, 0);
      assert.deepEqual(last(evs), { type: "done", finishReason: "stop" });
    }
    const off = makeBackend(fake.url, { extractToolCalls: false });
    const evs = await collect(off.run(turn({ tools: TOOLS })));
    assert.equal(text(evs), raw);
    assert.deepEqual(last(evs), { type: "done", finishReason: "stop" });
  });

  it("Ollama: calls streamed as plain content (bare JSON lines) with finish stop → two tool calls", async () => {
    fake.setScript(() => replay("ollama-content-calls.sse"));
    const b = makeBackend(fake.url);
    const evs = await collect(b.run(turn({ tools: TOOLS })));
    const calls = toolCalls(evs);
    assert.deepEqual(
      calls.map((c) => [c.name, JSON.parse(c.args)]),
      [
        ["write", { path: "/tmp/a.txt", content: "hello" }],
        ["write", { path: "/tmp/b.txt", content: "world" }],
      ],
    );
    assert.notEqual(calls[0]!.id, calls[1]!.id);
    assert.equal(text(evs).trim(), "");
    assert.deepEqual(last(evs), { type: "done", finishReason: "tool_calls" });
  });

  it("Qwen3-Coder XML calls in text are extracted", async () => {
    fake.setScript(() => replay("qwen3-xml.sse"));
    const b = makeBackend(fake.url);
    const evs = await collect(b.run(turn({ tools: TOOLS })));
    const calls = toolCalls(evs);
    assert.equal(calls.length, 1);
    assert.equal(calls[0]!.name, "exec");
    assert.deepEqual(JSON.parse(calls[0]!.args), { command: "git status" });
    assert.match(text(evs), /^Let me check\.\s*$/);
    assert.deepEqual(last(evs), { type: "done", finishReason: "tool_calls" });
  });

  it("leaked special tokens are stripped, also when split across chunks", async () => {
    fake.setScript(() => replay("special-tokens.sse"));
    const b = makeBackend(fake.url);
    const evs = await collect(b.run(turn()));
    assert.equal(text(evs), "Done.\nAnything else?");
    assert.ok(
      evs.every((e) => e.type !== "text" || e.text.length > 0),
      "no empty text events",
    );
    assert.deepEqual(last(evs), { type: "done", finishReason: "stop" });
  });

  it("empty tool_calls, null reasoning_content and null refusal produce no events", async () => {
    fake.setScript(() => replay("empty-fields.sse"));
    const b = makeBackend(fake.url);
    const evs = await collect(b.run(turn({ tools: TOOLS })));
    assert.deepEqual(evs, [
      { type: "text", text: "All" },
      { type: "text", text: " good" },
      { type: "text", text: "." },
      { type: "done", finishReason: "stop" },
    ]);
  });

  it("native tool calls are capped; the upstream request is stopped and the drop is logged", async () => {
    let closedEarly = false;
    const calls = Array.from({ length: 25 }, (_, i) =>
      chunk({
        tool_calls: [
          { index: i, id: `call${i}x`, type: "function", function: { name: "read", arguments: `{"path":"/f${i}"}` } },
        ],
      }),
    );
    fake.setScript(() => ({
      kind: "steps",
      steps: [
        chunk({ role: "assistant", content: "" }),
        ...calls,
        (res: http.ServerResponse) =>
          new Promise<void>((r) => (res.destroyed ? r() : res.on("close", () => ((closedEarly = true), r())))),
      ],
      keepOpen: true,
    }));
    const { logger, lines } = captureLogger("warn");
    const b = makeBackend(fake.url, { maxToolCalls: 3 }, logger);
    const evs = await collect(b.run(turn({ tools: TOOLS })));
    assert.deepEqual(
      toolCalls(evs).map((c) => c.args),
      ['{"path":"/f0"}', '{"path":"/f1"}', '{"path":"/f2"}'],
    );
    assert.deepEqual(last(evs), { type: "done", finishReason: "tool_calls" });
    assert.ok(
      lines.some((l) => /tool-call cap/.test(l)),
      "the drop is logged",
    );
    // The stream was never finished by the fake (keepOpen): run() ended because of the cap.
    assert.ok(await eventually(() => closedEarly, 5000), "the upstream connection is closed");
  });

  it("calls extracted from a runaway text reply are capped too", async () => {
    const block = (i: number) => `<tool_call>\n{"name": "exec", "arguments": {"command": "echo ${i}"}}\n</tool_call>\n`;
    fake.setScript(() => ({
      kind: "raw",
      frames: [
        chunk({ role: "assistant", content: "" }),
        ...Array.from({ length: 30 }, (_, i) => chunk({ content: block(i) })),
        chunk({}, "stop"),
        "data: [DONE]\n\n",
      ],
    }));
    const b = makeBackend(fake.url, { maxToolCalls: 2 });
    const evs = await collect(b.run(turn({ tools: TOOLS })));
    const calls = toolCalls(evs);
    assert.deepEqual(
      calls.map((c) => JSON.parse(c.args)),
      [{ command: "echo 0" }, { command: "echo 1" }],
    );
    assert.deepEqual(last(evs), { type: "done", finishReason: "tool_calls" });
  });

  it("upstream 500: upstream_error with the upstream's own message and status", async () => {
    fake.setScript(() => ({ kind: "error", status: 500, message: "CUDA out of memory. Tried to allocate 2.00 GiB" }));
    const b = makeBackend(fake.url);
    const evs = await collect(b.run(turn()));
    assert.equal(evs.length, 1);
    const e = evs[0] as Extract<BackendEvent, { type: "error" }>;
    assert.equal(e.error.code, "upstream_error");
    assert.equal(e.error.status, 500);
    assert.equal(e.error.retryable, true);
    assert.match(e.error.message, /CUDA out of memory\. Tried to allocate 2\.00 GiB/);
  });

  it("upstream 429 keeps retryable and reports Retry-After", async () => {
    fake.setScript(() => ({
      kind: "raw",
      status: 429,
      headers: { "content-type": "application/json", "retry-after": "7" },
      frames: [JSON.stringify({ error: { message: "Too many requests: queue is full", type: "rate_limit_error" } })],
    }));
    const b = makeBackend(fake.url);
    const evs = await collect(b.run(turn()));
    const e = evs[0] as Extract<BackendEvent, { type: "error" }>;
    assert.equal(evs.length, 1);
    assert.equal(e.error.code, "upstream_error");
    assert.equal(e.error.status, 429);
    assert.equal(e.error.retryable, true);
    assert.match(e.error.message, /Too many requests: queue is full/);
    assert.match(e.error.message, /retry after 7 s/);
  });

  it("upstream 400 in vLLM's error shape: not retryable, message carried", async () => {
    fake.setScript(() => ({
      kind: "raw",
      status: 400,
      headers: { "content-type": "application/json" },
      frames: [
        JSON.stringify({
          object: "error",
          message: "This model's maximum context length is 32768 tokens. However, you requested 40000 tokens.",
          type: "BadRequestError",
          param: null,
          code: 400,
        }),
      ],
    }));
    const b = makeBackend(fake.url);
    const [e] = (await collect(b.run(turn()))) as Array<Extract<BackendEvent, { type: "error" }>>;
    assert.equal(e!.error.status, 400);
    assert.equal(e!.error.retryable, false);
    assert.match(e!.error.message, /maximum context length is 32768 tokens/);
  });

  it("an error payload in the middle of the stream ends the turn with that message", async () => {
    fake.setScript(() => ({
      kind: "raw",
      frames: [
        chunk({ role: "assistant", content: "" }),
        chunk({ content: "Par" }),
        sse({ error: { message: "engine died", type: "InternalServerError", code: 500 } }),
      ],
    }));
    const b = makeBackend(fake.url);
    const evs = await collect(b.run(turn()));
    assert.deepEqual(evs[0], { type: "text", text: "Par" });
    const e = evs[1] as Extract<BackendEvent, { type: "error" }>;
    assert.equal(e.type, "error");
    assert.equal(e.error.code, "upstream_error");
    assert.match(e.error.message, /engine died/);
    assertOneTerminal(evs);
  });

  it("malformed stream data → clear error", async () => {
    const b = makeBackend(fake.url);
    fake.setScript(() => ({
      kind: "raw",
      frames: [chunk({ role: "assistant", content: "" }), 'data: {"choices": [{"delta": {"content": "x"\n\n'],
    }));
    let evs = await collect(b.run(turn()));
    assertOneTerminal(evs);
    assert.equal(last(evs)!.type, "error");
    assert.match((last(evs) as { error: { message: string } }).error.message, /malformed stream data/);

    fake.setScript(() => ({ kind: "raw", frames: ["<html><body>502 Bad Gateway</body></html>\n"] }));
    evs = await collect(b.run(turn()));
    assert.equal(evs.length, 1);
    assert.match((evs[0] as { error: { message: string } }).error.message, /not an event stream.*502 Bad Gateway/);

    fake.setScript(() => ({
      kind: "raw",
      frames: [chunk({ role: "assistant", content: "" }), chunk({ content: "half an ans" })],
    }));
    evs = await collect(b.run(turn()));
    assert.deepEqual(evs[0], { type: "text", text: "half an ans" });
    assert.equal(evs[1]!.type, "error");
    assert.match((evs[1] as { error: { message: string } }).error.message, /ended before a finish_reason/);

    fake.setScript(() => ({
      kind: "raw",
      headers: { "content-type": "application/json" },
      frames: ['{"id": "x", "choices": [{"mess'],
    }));
    evs = await collect(b.run(turn()));
    assert.equal(evs.length, 1);
    assert.match((evs[0] as { error: { message: string } }).error.message, /invalid JSON/);
  });

  it("upstream down → backend_unavailable naming the URL", async () => {
    const srv = http.createServer();
    await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
    const port = (srv.address() as AddressInfo).port;
    await new Promise<void>((r) => srv.close(() => r()));
    const b = makeBackend(`http://127.0.0.1:${port}/v1`);
    const evs = await collect(b.run(turn()));
    assert.equal(evs.length, 1);
    const e = evs[0] as Extract<BackendEvent, { type: "error" }>;
    assert.equal(e.error.code, "backend_unavailable");
    assert.equal(e.error.retryable, true);
    assert.match(e.error.message, new RegExp(`127\\.0\\.0\\.1:${port}/v1`));
    assert.match(e.error.message, /ECONNREFUSED/);
    const h = await b.health();
    assert.equal(h.usable, false);
    assert.match(h.detail, /ECONNREFUSED/);
  });

  it("upstream hangs → backend_timeout (idle, first byte, whole request)", async () => {
    // Idle: the role chunk arrives, then nothing.
    fake.setScript(() => ({ kind: "hang" }));
    let b = makeBackend(fake.url, { idleTimeoutSeconds: 0.3 });
    let evs = await collect(b.run(turn()));
    let e = last(evs) as Extract<BackendEvent, { type: "error" }>;
    assert.equal(e.error.code, "backend_timeout");
    assert.match(e.error.message, /idle timeout/);
    assertOneTerminal(evs);

    // First byte: headers sent, no body.
    fake.setScript(() => ({
      kind: "steps",
      steps: [(res: http.ServerResponse) => res.flushHeaders(), () => new Promise(() => {})],
    }));
    b = makeBackend(fake.url, { firstByteTimeoutSeconds: 0.3 });
    evs = await collect(b.run(turn()));
    e = last(evs) as Extract<BackendEvent, { type: "error" }>;
    assert.equal(e.error.code, "backend_timeout");
    assert.match(e.error.message, /first-byte timeout/);

    // First byte: not even headers.
    fake.setScript(() => ({ kind: "steps", steps: [() => new Promise(() => {})] }));
    evs = await collect(b.run(turn()));
    e = last(evs) as Extract<BackendEvent, { type: "error" }>;
    assert.equal(e.error.code, "backend_timeout");
    assert.match(e.error.message, /first-byte timeout/);

    // Whole request: a steady trickle that never ends.
    const trickle: Array<string | (() => Promise<void>)> = [chunk({ role: "assistant", content: "" })];
    for (let i = 0; i < 200; i++)
      trickle.push(chunk({ content: "." }), () => new Promise<void>((r) => setTimeout(r, 20)));
    fake.setScript(() => ({ kind: "steps", steps: trickle }));
    // The whole-turn deadline is the pipeline's: the backend is run the way the pipeline runs it.
    b = makeBackend(fake.url, { timeoutSeconds: 0.4 });
    evs = await collect(guardedRun(b, turn()));
    e = last(evs) as Extract<BackendEvent, { type: "error" }>;
    assert.equal(e.error.code, "backend_timeout");
    assert.match(e.error.message, /did not finish within 0\.4 s/);
    assert.ok(evs.length > 1, "text before the timeout was delivered");
  });

  it("slow upstream: each delta is emitted as soon as it arrives (order relative to server writes)", async () => {
    let releaseSecond!: () => void;
    const gate = new Promise<void>((r) => (releaseSecond = r));
    let secondWritten = false;
    fake.setScript(() => ({
      kind: "steps",
      steps: [
        chunk({ role: "assistant", content: "" }),
        chunk({ content: "first" }),
        () => gate,
        (res: http.ServerResponse) => {
          secondWritten = true;
          res.write(chunk({ content: " second" }));
        },
        chunk({}, "stop"),
        "data: [DONE]\n\n",
      ],
    }));
    const b = makeBackend(fake.url);
    const it = b.run(turn())[Symbol.asyncIterator]();
    const a = await it.next();
    assert.deepEqual(a.value, { type: "text", text: "first" });
    assert.equal(secondWritten, false, "the first delta arrived while the server still held the second");
    releaseSecond();
    const rest: BackendEvent[] = [];
    for (let r = await it.next(); !r.done && rest.length < 100; r = await it.next()) rest.push(r.value);
    assert.deepEqual(rest, [
      { type: "text", text: " second" },
      { type: "done", finishReason: "stop" },
    ]);
  });

  it("abort: the upstream request is cancelled and the turn ends with error aborted", async () => {
    let upstreamClosed = false;
    fake.setScript(() => ({
      kind: "steps",
      steps: [
        chunk({ role: "assistant", content: "" }),
        chunk({ content: "working" }),
        (res: http.ServerResponse) => new Promise<void>((r) => res.on("close", () => ((upstreamClosed = true), r()))),
      ],
      keepOpen: true,
    }));
    const ctl = new AbortController();
    const b = makeBackend(fake.url);
    const it = b.run(turn({}, ctl.signal))[Symbol.asyncIterator]();
    assert.deepEqual((await it.next()).value, { type: "text", text: "working" });
    const pending = it.next();
    ctl.abort();
    const r = await pending;
    assert.equal((r.value as Extract<BackendEvent, { type: "error" }>).error.code, "aborted");
    assert.equal((await it.next()).done, true);
    assert.ok(await eventually(() => upstreamClosed, 5000), "the upstream saw the connection close");

    // Already aborted before the call: nothing is sent.
    const before = fake.mainRequests().length;
    const evs = await collect(b.run(turn({}, AbortSignal.abort())));
    assert.equal((evs[0] as Extract<BackendEvent, { type: "error" }>).error.code, "aborted");
    assert.equal(evs.length, 1);
    assert.equal(fake.mainRequests().length, before);
  });

  it("a consumer that stops early (break) releases the upstream connection", async () => {
    let upstreamClosed = false;
    fake.setScript(() => ({
      kind: "steps",
      steps: [
        chunk({ content: "a" }),
        (res: http.ServerResponse) => new Promise<void>((r) => res.on("close", () => ((upstreamClosed = true), r()))),
      ],
      keepOpen: true,
    }));
    const b = makeBackend(fake.url);
    for await (const ev of b.run(turn())) {
      assert.deepEqual(ev, { type: "text", text: "a" });
      break;
    }
    assert.ok(await eventually(() => upstreamClosed, 5000));
  });

  it("keep-alive: consecutive turns reuse the pooled connection", async () => {
    const ports: number[] = [];
    fake.setScript(() => ({
      kind: "steps",
      steps: [
        (res: http.ServerResponse) => void ports.push(res.socket!.remotePort!),
        chunk({ content: "hi" }, "stop"),
        "data: [DONE]\n\n",
      ],
    }));
    const b = makeBackend(fake.url);
    for (let i = 0; i < 3; i++) {
      assert.equal(text(await collect(b.run(turn()))), "hi");
      // undici marks the socket free on its next turn of the event loop; real turns are never
      // issued in the very same tick as the previous one's end.
      await new Promise((r) => setImmediate(r));
    }
    assert.equal(ports.length, 3);
    assert.equal(new Set(ports).size, 1, "one socket for all three requests");
  });

  it("health(): GET <baseUrl>/models", async () => {
    const b = makeBackend(fake.url);
    const h = await b.health();
    assert.equal(h.usable, true);
    assert.match(h.detail, /fake-model/);
  });

  it("the API key never reaches the logs or error messages", async () => {
    const { logger, lines } = captureLogger("trace");
    fake.setScript(() => ({ kind: "error", status: 401, message: "invalid api key" }));
    const b = makeBackend(fake.url, { apiKey: "sk-very-secret-key-123" }, logger);
    const evs = await collect(b.run(turn()));
    assert.equal((evs[0] as Extract<BackendEvent, { type: "error" }>).error.status, 401);
    assert.ok(lines.length > 0, "something was logged at trace level");
    assert.ok(!lines.join("\n").includes("sk-very-secret-key-123"));
    assert.ok(!JSON.stringify(evs).includes("sk-very-secret-key-123"));
  });

  it("buildUpstreamBody: extraBody cannot change model or stream; per-model compat applies", () => {
    const options = openaiOptionsSchema.parse({
      baseUrl: "http://127.0.0.1:1/v1",
      extraBody: { stream: false, model: "x", top_k: 20 },
      modelCompat: { "gpt-like": { maxTokensField: "max_completion_tokens", supportsStreamOptions: false } },
    });
    const req = { model: "c", messages: [{ role: "user", content: "hi" }], max_tokens: 10 } as ChatRequest;
    const a = buildUpstreamBody(options, { model: "qwen", request: { ...req, stream: true } });
    assert.equal(a.stream, true);
    assert.equal(
      buildUpstreamBody(options, { model: "qwen", request: req }).stream,
      false,
      "a non-streaming client: no upstream stream",
    );
    assert.equal(a.model, "qwen");
    assert.equal(a.top_k, 20);
    assert.equal(a.max_tokens, 10);
    assert.deepEqual(a.stream_options, { include_usage: true });
    const g = buildUpstreamBody(options, { model: "gpt-like", request: req });
    assert.equal(g.max_completion_tokens, 10);
    assert.equal("max_tokens" in g, false);
    assert.equal("stream_options" in g, false);
  });
});
