/**
 * The `type: openai` upstream backend END TO END: a real bridge (real server, real pipeline, real
 * backend) in front of the fake OpenAI-compatible API (testkit/fakes/openai-api.ts), driven by the
 * official `openai` client and by OpenClaw's own client library `@mariozechner/pi-ai` (0.73, the
 * version OpenClaw 2026.5 uses). Only the upstream model server is faked.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import OpenAI from "openai";
import {
  complete,
  stream,
  Type,
  type AssistantMessage,
  type AssistantMessageEvent,
  type Context,
  type ToolCall,
  type ToolResultMessage,
} from "@mariozechner/pi-ai";
import { VERSION } from "../../src/core/version.js";
import { piModel } from "../helpers/pi-model.js";
import { startFakeOpenAI, type FakeOpenAI, type Reply } from "../../testkit/fakes/openai-api.js";
import { cleanup, eventually, readSse, startTestBridge, type TestBridge } from "../helpers/bridge.js";

const FIXTURES = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "fixtures", "upstream");
const fixture = (name: string): string => readFileSync(path.join(FIXTURES, name), "utf8");
/** A fixture split into its SSE frames (the fake writes each one separately). */
const frames = (name: string): string[] =>
  fixture(name)
    .split(/(?<=\n\n)/)
    .filter((f) => f.length > 0);
const replay = (name: string): Reply => ({ kind: "raw", frames: frames(name) });

const sse = (obj: unknown): string => `data: ${JSON.stringify(obj)}\n\n`;
const chunk = (delta: object, finish: string | null = null) =>
  sse({
    id: "chatcmpl-up1",
    object: "chat.completion.chunk",
    created: 1,
    model: "qwen2.5-coder:7b",
    choices: [{ index: 0, delta, finish_reason: finish }],
  });
const DONE = "data: [DONE]\n\n";

/** Token-like pieces of a string (what a local model streams), so extraction must work across chunk borders. */
function pieces(s: string, size = 5): string[] {
  const out: string[] = [];
  for (let i = 0; i < s.length; i += size) out.push(s.slice(i, i + size));
  return out;
}

const MODEL = "local/qwen";
const UPSTREAM_MODEL = "qwen2.5-coder:7b";

const TOOLS: OpenAI.Chat.Completions.ChatCompletionTool[] = ["read", "exec", "write"].map((name) => ({
  type: "function",
  function: {
    name,
    description: `${name} tool`,
    parameters: { type: "object", properties: { path: { type: "string" } } },
    strict: true,
  },
}));

/** A promise the test resolves; it also settles by itself after `ms` so a broken bridge fails instead of hanging. */
function gate(ms = 10_000) {
  let open!: (how: string) => void;
  const p = new Promise<string>((r) => {
    open = r;
    setTimeout(() => r("timeout"), ms).unref();
  });
  return { wait: p, open: () => open("client") };
}

/**
 * An upstream reply that writes `frames` and then holds the response open until the connection
 * closes; `closed()` tells whether that happened (the fake sees the bridge drop THIS request's socket).
 */
function heldOpen(frames: string[]): { reply: () => Reply; closed: () => boolean } {
  let closed = false;
  return {
    reply: () => ({
      kind: "steps",
      steps: [...frames, (res) => new Promise<void>((r) => res.once("close", () => ((closed = true), r())))],
    }),
    closed: () => closed,
  };
}

/** A port nothing listens on. */
async function deadPort(): Promise<number> {
  const s = http.createServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

function bridgeConfig(baseUrl: string, backend: Record<string, unknown> = {}) {
  return {
    server: { maxConcurrent: 8 },
    backends: { local: { type: "openai", baseUrl, ...backend } },
    models: [{ id: MODEL, backend: "local", model: UPSTREAM_MODEL }],
  };
}

async function post(bridge: TestBridge, body: object, signal?: AbortSignal): Promise<Response> {
  return fetch(`${bridge.baseURL}/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
    signal,
  });
}

/** The SSE payloads of a bridge response, parsed ([DONE] kept as the string). */
async function sseObjects(res: Response): Promise<{ objs: any[]; done: boolean; raw: string }> {
  const { frames: f, raw } = await readSse(res);
  return { objs: f.filter((x) => x !== "[DONE]").map((x) => JSON.parse(x)), done: f.includes("[DONE]"), raw };
}

type Chunk = OpenAI.Chat.Completions.ChatCompletionChunk;

/** Drain an openai-client stream (bounded) into its chunks. */
async function drain(s: AsyncIterable<Chunk>): Promise<Chunk[]> {
  const out: Chunk[] = [];
  for await (const c of s) {
    out.push(c);
    if (out.length > 10_000) throw new Error("runaway stream");
  }
  return out;
}

/** Tool calls rebuilt from stream chunks, checking the rules OpenClaw relies on (id+name first, contiguous indexes, letters+digits ids). */
function toolCallsOf(chunks: Chunk[]): Array<{ id: string; name: string; args: string }> {
  const calls: Array<{ id: string; name: string; args: string }> = [];
  let prev = -1;
  for (const c of chunks) {
    for (const tc of c.choices[0]?.delta?.tool_calls ?? []) {
      if (tc.index !== prev) {
        assert.equal(tc.index, prev + 1, "tool-call indexes are contiguous, each call's chunks together");
        assert.ok(tc.id && tc.function?.name, "the first chunk of a call carries id and name");
        assert.match(tc.id, /^[A-Za-z0-9]+$/, "tool-call ids are letters and digits");
        assert.equal(tc.type, "function");
        calls.push({ id: tc.id, name: tc.function.name, args: "" });
        prev = tc.index;
      }
      calls[tc.index]!.args += tc.function?.arguments ?? "";
    }
  }
  return calls;
}

const finishOf = (chunks: Chunk[]) => chunks.map((c) => c.choices[0]?.finish_reason).filter(Boolean);
const textOf = (chunks: Chunk[]) => chunks.map((c) => c.choices[0]?.delta?.content ?? "").join("");

describe("openai upstream through the bridge", () => {
  let fake: FakeOpenAI;
  let bridge: TestBridge;
  let client: OpenAI;

  before(async () => {
    fake = await startFakeOpenAI();
    bridge = await startTestBridge(bridgeConfig(fake.url, { apiKey: "sk-upstream-secret" }));
    client = new OpenAI({ baseURL: bridge.baseURL, apiKey: "unused", maxRetries: 0, timeout: 30_000 });
  });

  after(async () => {
    await bridge?.close(0);
    await fake?.close();
    if (bridge) cleanup(bridge.dataDir);
  });

  // ------------------------------------------------------------------------------------------
  // 1. the official openai client

  describe("openai client", () => {
    test("text streaming: every upstream delta is its own client delta, in order, then stop", async () => {
      const parts = ["The", " capital", " of", " France", " is", " Paris", "."];
      fake.setScript(() => ({ kind: "text", chunks: parts }));
      const chunks = await drain(
        await client.chat.completions.create({
          model: MODEL,
          stream: true,
          messages: [{ role: "user", content: "capital of France?" }],
        }),
      );
      const deltas = chunks
        .map((c) => c.choices[0]?.delta?.content)
        .filter((t): t is string => typeof t === "string" && t.length > 0);
      assert.deepEqual(deltas, parts, "the same number of content deltas the upstream sent, same pieces, same order");
      assert.equal(chunks[0]?.choices[0]?.delta?.role, "assistant", "first chunk carries the role");
      assert.deepEqual(finishOf(chunks), ["stop"]);
      assert.equal(chunks.at(-1)?.choices[0]?.finish_reason, "stop", "the finish chunk is the last chunk");
      const up = fake.mainRequests().at(-1)!;
      assert.equal(up.body.model, UPSTREAM_MODEL, "the configured upstream model name is sent");
      assert.equal(up.headers.authorization, "Bearer sk-upstream-secret");
    });

    test("order-based streaming: the client has chunk 1 before the upstream writes chunk 2", async () => {
      const g = gate();
      let wroteSecond = false;
      fake.setScript(() => ({
        kind: "steps",
        steps: [
          chunk({ role: "assistant", content: "" }),
          chunk({ content: "first" }),
          async () => {
            await g.wait;
          },
          () => {
            wroteSecond = true;
          },
          chunk({ content: " second" }),
          chunk({}, "stop"),
          DONE,
        ],
      }));
      const s = await client.chat.completions.create({
        model: MODEL,
        stream: true,
        messages: [{ role: "user", content: "stream please" }],
      });
      const seen: string[] = [];
      let secondWrittenWhenFirstSeen: boolean | undefined;
      for await (const c of s) {
        const t = c.choices[0]?.delta?.content;
        if (t) seen.push(t);
        if (t === "first") {
          secondWrittenWhenFirstSeen = wroteSecond;
          g.open();
        }
        if (seen.length > 100) break;
      }
      assert.equal(
        await g.wait,
        "client",
        "the client received chunk 1 while the upstream was still holding chunk 2 (no buffering)",
      );
      assert.equal(secondWrittenWhenFirstSeen, false);
      assert.deepEqual(seen, ["first", " second"]);
    });

    test("usage with stream_options.include_usage carries the upstream's counts", async () => {
      fake.setScript(() => ({
        kind: "text",
        chunks: ["Hi", "!"],
        usage: { prompt_tokens: 1234, completion_tokens: 2 },
      }));
      const chunks = await drain(
        await client.chat.completions.create({
          model: MODEL,
          stream: true,
          stream_options: { include_usage: true },
          messages: [{ role: "user", content: "hi" }],
        }),
      );
      const usage = chunks.find((c) => c.usage)?.usage;
      assert.equal(usage?.prompt_tokens, 1234);
      assert.equal(usage?.completion_tokens, 2);
      assert.equal(usage?.total_tokens, 1236);
      const usageIdx = chunks.findIndex((c) => c.usage);
      const finishIdx = chunks.findIndex((c) => c.choices[0]?.finish_reason);
      assert.ok(finishIdx >= 0 && finishIdx < usageIdx, "finish chunk before the usage chunk");
      assert.deepEqual(chunks[usageIdx]?.choices, [], "the usage chunk has no choices (OpenAI shape)");
      // Without include_usage the client gets no usage chunk, but the upstream is still asked for it.
      const plain = await drain(
        await client.chat.completions.create({
          model: MODEL,
          stream: true,
          messages: [{ role: "user", content: "hi" }],
        }),
      );
      assert.equal(
        plain.some((c) => c.usage),
        false,
      );
      assert.deepEqual(fake.mainRequests().at(-1)!.body.stream_options, { include_usage: true });
    });

    test("reasoning_content passes through as delta.reasoning_content, before the answer", async () => {
      fake.setScript(() => replay("vllm-reasoning.sse"));
      const chunks = await drain(
        await client.chat.completions.create({
          model: MODEL,
          stream: true,
          messages: [{ role: "user", content: "2+2?" }],
        }),
      );
      const reasoning = chunks.map(
        (c) => (c.choices[0]?.delta as { reasoning_content?: string } | undefined)?.reasoning_content ?? "",
      );
      assert.equal(reasoning.join(""), "Okay, the user wants 2+2.");
      assert.equal(textOf(chunks), "\n\n2 + 2 = 4.");
      const lastReasoning = reasoning.findLastIndex((r) => r.length > 0);
      const firstText = chunks.findIndex((c) => !!c.choices[0]?.delta?.content);
      assert.ok(lastReasoning < firstText, "reasoning comes before the answer text");
      // Non-streaming: reasoning_content on the message.
      fake.setScript(() => replay("vllm-reasoning.sse"));
      const res = await client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "2+2?" }] });
      assert.equal(
        (res.choices[0]?.message as { reasoning_content?: string }).reasoning_content,
        "Okay, the user wants 2+2.",
      );
      assert.equal(res.choices[0]?.message.content, "\n\n2 + 2 = 4.");
    });

    test("native upstream tool calls (vLLM hermes parser) arrive as delta.tool_calls with clean ids", async () => {
      fake.setScript(() => replay("vllm-tools.sse"));
      const chunks = await drain(
        await client.chat.completions.create({
          model: MODEL,
          stream: true,
          tools: TOOLS,
          messages: [{ role: "user", content: "read my file" }],
        }),
      );
      const calls = toolCallsOf(chunks);
      assert.equal(calls.length >= 1, true);
      assert.equal(calls[0]!.name, "read");
      assert.equal(typeof JSON.parse(calls[0]!.args).path, "string");
      assert.deepEqual(finishOf(chunks), ["tool_calls"]);
    });

    test("native tool calls from the fake's tool_calls reply, streaming and non-streaming", async () => {
      const script = (): Reply => ({
        kind: "tool_calls",
        calls: [
          { name: "read", arguments: { path: "/etc/hosts" }, id: "call_1-x" },
          { name: "exec", arguments: { command: "ls" }, id: "call_2-y" },
        ],
      });
      fake.setScript(script);
      const chunks = await drain(
        await client.chat.completions.create({
          model: MODEL,
          stream: true,
          tools: TOOLS,
          messages: [{ role: "user", content: "two calls" }],
        }),
      );
      const calls = toolCallsOf(chunks);
      assert.deepEqual(
        calls.map((c) => [c.name, JSON.parse(c.args)]),
        [
          ["read", { path: "/etc/hosts" }],
          ["exec", { command: "ls" }],
        ],
      );
      assert.deepEqual(finishOf(chunks), ["tool_calls"]);

      fake.setScript(script);
      const res = await client.chat.completions.create({
        model: MODEL,
        tools: TOOLS,
        messages: [{ role: "user", content: "two calls" }],
      });
      const msg = res.choices[0]!.message;
      assert.equal(res.choices[0]!.finish_reason, "tool_calls");
      assert.equal(msg.tool_calls?.length, 2);
      for (const tc of msg.tool_calls ?? []) assert.match(tc.id, /^[A-Za-z0-9]+$/);
      assert.deepEqual(
        msg.tool_calls?.map((tc) => (tc.type === "function" ? tc.function.name : "")),
        ["read", "exec"],
      );
    });

    test("<tool_call> written as text (vLLM without a tool parser) becomes delta.tool_calls, finish tool_calls", async () => {
      fake.setScript(() => replay("vllm-hermes-text-calls.sse"));
      const chunks = await drain(
        await client.chat.completions.create({
          model: MODEL,
          stream: true,
          tools: TOOLS,
          messages: [{ role: "user", content: "read hostname" }],
        }),
      );
      const calls = toolCallsOf(chunks);
      assert.deepEqual(
        calls.map((c) => [c.name, JSON.parse(c.args)]),
        [["read", { path: "/etc/hostname" }]],
      );
      assert.equal(
        textOf(chunks).trim(),
        "I'll read the file first.",
        "the surrounding text stays, the markup does not",
      );
      assert.ok(!textOf(chunks).includes("<tool_call>"));
      assert.deepEqual(finishOf(chunks), ["tool_calls"], "upstream said stop; the client is told tool_calls");
    });

    test("Qwen2.5 <tools> format, split into tokens, becomes delta.tool_calls", async () => {
      const reply =
        '<tools>\n{"name": "write", "arguments": {"path": "/tmp/x.txt", "content": "hi there"}}\n{"name": "exec", "arguments": {"command": "cat /tmp/x.txt"}}\n</tools>';
      fake.setScript(() => ({ kind: "text", chunks: pieces(reply, 4), finishReason: "stop" }));
      const chunks = await drain(
        await client.chat.completions.create({
          model: MODEL,
          stream: true,
          tools: TOOLS,
          messages: [{ role: "user", content: "write then cat" }],
        }),
      );
      const calls = toolCallsOf(chunks);
      assert.deepEqual(
        calls.map((c) => [c.name, JSON.parse(c.args)]),
        [
          ["write", { path: "/tmp/x.txt", content: "hi there" }],
          ["exec", { command: "cat /tmp/x.txt" }],
        ],
      );
      assert.equal(textOf(chunks).trim(), "", "no markup leaks as text");
      assert.deepEqual(finishOf(chunks), ["tool_calls"]);
    });

    test("Ollama: calls as bare JSON lines in delta.content with finish stop become tool calls (stream and non-stream)", async () => {
      fake.setScript(() => replay("ollama-content-calls.sse"));
      const chunks = await drain(
        await client.chat.completions.create({
          model: MODEL,
          stream: true,
          tools: TOOLS,
          messages: [{ role: "user", content: "write two files" }],
        }),
      );
      const calls = toolCallsOf(chunks);
      assert.deepEqual(
        calls.map((c) => [c.name, JSON.parse(c.args)]),
        [
          ["write", { path: "/tmp/a.txt", content: "hello" }],
          ["write", { path: "/tmp/b.txt", content: "world" }],
        ],
      );
      assert.equal(textOf(chunks).trim(), "");
      assert.deepEqual(finishOf(chunks), ["tool_calls"]);
      assert.notEqual(calls[0]!.id, calls[1]!.id, "distinct ids");

      fake.setScript(() => replay("ollama-content-calls.sse"));
      const res = await client.chat.completions.create({
        model: MODEL,
        tools: TOOLS,
        messages: [{ role: "user", content: "write two files" }],
      });
      assert.equal(res.choices[0]!.finish_reason, "tool_calls");
      assert.equal(res.choices[0]!.message.tool_calls?.length, 2);
      assert.ok(!res.choices[0]!.message.content, "no JSON left in the content");
      assert.equal(res.usage?.prompt_tokens, 4410, "upstream usage in the JSON answer");
    });

    test("the compat rewrite reaches the upstream: max_tokens, no store, developer→system, no strict", async () => {
      fake.setScript(() => ({ kind: "text", chunks: ["ok"] }));
      await drain(
        await client.chat.completions.create({
          model: MODEL,
          stream: true,
          store: false,
          max_completion_tokens: 321,
          reasoning_effort: "low",
          tools: TOOLS,
          tool_choice: "auto",
          messages: [
            { role: "developer", content: "be brief" },
            { role: "user", content: "hello" },
          ],
        }),
      );
      const body = fake.mainRequests().at(-1)!.body;
      assert.equal(body.max_tokens, 321);
      assert.equal("max_completion_tokens" in body, false);
      assert.equal("store" in body, false);
      assert.equal("reasoning_effort" in body, false);
      assert.deepEqual(
        body.messages.map((m: { role: string }) => m.role),
        ["system", "user"],
      );
      assert.equal(body.messages[0].content, "be brief");
      assert.equal(body.tools.length, 3);
      for (const t of body.tools) assert.equal("strict" in t.function, false, "strict removed from every tool");
      assert.equal(body.tool_choice, "auto");
      assert.equal(body.model, UPSTREAM_MODEL);
      assert.equal(body.stream, true);
    });

    test("non-streaming client: the upstream answers JSON, the client gets one chat.completion", async () => {
      fake.setScript(() => ({
        kind: "text",
        chunks: ["plain ", "answer"],
        usage: { prompt_tokens: 10, completion_tokens: 2 },
      }));
      const res = await client.chat.completions.create({
        model: MODEL,
        messages: [{ role: "user", content: "hello" }],
      });
      assert.equal(res.object, "chat.completion");
      assert.equal(res.choices[0]?.message.content, "plain answer");
      assert.equal(res.choices[0]?.finish_reason, "stop");
      assert.equal(res.usage?.total_tokens, 12);
      assert.equal(fake.mainRequests().at(-1)!.body.stream, false);
      assert.equal(fake.mainRequests().at(-1)!.body.stream_options, undefined);
    });

    test("an upstream answering a streaming request with plain JSON is re-wrapped as SSE", async () => {
      fake.setScript(() => ({
        kind: "raw",
        headers: { "content-type": "application/json" },
        frames: [fixture("plain-json-text.json")],
      }));
      const res = await post(bridge, {
        model: MODEL,
        stream: true,
        stream_options: { include_usage: true },
        messages: [{ role: "user", content: "capital?" }],
      });
      assert.equal(res.status, 200);
      assert.match(res.headers.get("content-type") ?? "", /text\/event-stream/);
      assert.equal(res.headers.get("server"), `clawbridge/${VERSION}`);
      assert.equal(res.headers.get("x-clawbridge-backend"), "local");
      const { objs, done } = await sseObjects(res);
      assert.ok(done, "ends with [DONE]");
      assert.equal(objs.map((o) => o.choices?.[0]?.delta?.content ?? "").join(""), "Paris is the capital of France.");
      assert.equal(objs.find((o) => o.choices?.[0]?.finish_reason)?.choices[0].finish_reason, "stop");
      assert.equal(objs.find((o) => o.usage)?.usage.total_tokens, 29);
      for (const o of objs) {
        const d = o.choices?.[0]?.delta ?? {};
        assert.ok(
          !("tool_calls" in d) && !("reasoning_content" in d),
          "empty tool_calls / null reasoning_content are dropped",
        );
      }

      // The same through the openai client, with a tool call in the JSON body.
      fake.setScript(() => ({
        kind: "raw",
        headers: { "content-type": "application/json" },
        frames: [fixture("plain-json-tools.json")],
      }));
      const chunks = await drain(
        await client.chat.completions.create({
          model: MODEL,
          stream: true,
          tools: TOOLS,
          messages: [{ role: "user", content: "read" }],
        }),
      );
      const calls = toolCallsOf(chunks);
      assert.deepEqual(
        calls.map((c) => [c.name, JSON.parse(c.args)]),
        [["read", { path: "/tmp/a.txt" }]],
      );
      assert.deepEqual(finishOf(chunks), ["tool_calls"]);
    });
  });

  // ------------------------------------------------------------------------------------------
  // 2. OpenClaw's client library, driven as OpenClaw drives it

  describe("pi-ai (OpenClaw 2026.5's client)", () => {
    const model = () =>
      piModel(bridge.baseURL, MODEL, "Local Qwen via clawbridge", {
        supportsStore: false,
        supportsDeveloperRole: false,
        supportsReasoningEffort: false,
        maxTokensField: "max_tokens",
      });
    const tools = [
      {
        name: "read",
        description: "Read a file from the workspace",
        parameters: Type.Object({ path: Type.String({ description: "file path" }) }),
      },
      { name: "exec", description: "Run a shell command", parameters: Type.Object({ command: Type.String() }) },
    ];

    test("a full tool loop: text-written tool call → toolCall block → tool result → final answer", async () => {
      const toolText =
        'Let me look.\n<tool_call>\n{"name": "read", "arguments": {"path": "/home/alex/notes.txt"}}\n</tool_call>';
      fake.setScript((req) => {
        const lastMsg = req.body.messages.at(-1);
        if (lastMsg?.role === "tool")
          return {
            kind: "text",
            chunks: ["The notes say: ", String(lastMsg.content)],
            usage: { prompt_tokens: 90, completion_tokens: 8 },
          };
        return {
          kind: "text",
          chunks: pieces(toolText, 6),
          finishReason: "stop",
          usage: { prompt_tokens: 80, completion_tokens: 30 },
        };
      });
      const before = fake.mainRequests().length;
      const context: Context = {
        systemPrompt: "You are Pebble, a helpful otter.",
        messages: [{ role: "user", content: "what is in my notes?", timestamp: Date.now() }],
        tools,
      };

      // Turn 1, streamed as OpenClaw does.
      const events: AssistantMessageEvent[] = [];
      const s = stream(model(), context, { apiKey: "x", maxTokens: 1024, maxRetries: 0 });
      for await (const ev of s) {
        events.push(ev);
        if (events.length > 5000) break;
      }
      const first: AssistantMessage = await s.result();
      assert.equal(first.stopReason, "toolUse", `stopReason toolUse (error: ${first.errorMessage ?? "-"})`);
      const calls = first.content.filter((b): b is ToolCall => b.type === "toolCall");
      assert.equal(calls.length, 1);
      assert.equal(calls[0]!.name, "read");
      assert.deepEqual(calls[0]!.arguments, { path: "/home/alex/notes.txt" });
      assert.match(calls[0]!.id, /^[A-Za-z0-9]+$/);
      assert.ok(
        events.some((e) => e.type === "toolcall_end"),
        "pi-ai emitted toolcall_end",
      );
      const shown = first.content
        .filter((b) => b.type === "text")
        .map((b) => (b as { text: string }).text)
        .join("");
      assert.ok(!shown.includes("<tool_call>"), "no tool-call markup shown to the user");
      assert.equal(first.usage.input, 80);

      const up1 = fake.mainRequests()[before]!.body;
      assert.equal(up1.messages[0].role, "system");
      assert.equal(up1.max_tokens, 1024, "maxTokensField max_tokens");
      assert.deepEqual(
        up1.tools.map((t: { function: { name: string } }) => t.function.name),
        ["read", "exec"],
      );

      // Turn 2: the assistant turn and the tool result are replayed.
      const result: ToolResultMessage = {
        role: "toolResult",
        toolCallId: calls[0]!.id,
        toolName: "read",
        content: [{ type: "text", text: "buy otter snacks" }],
        isError: false,
        timestamp: Date.now(),
      };
      context.messages.push(first, result);
      const second = await complete(model(), context, { apiKey: "x", maxRetries: 0 });
      assert.equal(second.stopReason, "stop", `stopReason stop (error: ${second.errorMessage ?? "-"})`);
      assert.equal(
        second.content
          .filter((b) => b.type === "text")
          .map((b) => (b as { text: string }).text)
          .join(""),
        "The notes say: buy otter snacks",
      );

      const up2 = fake.mainRequests().at(-1)!.body;
      assert.equal(fake.mainRequests().length, before + 2);
      const roles = up2.messages.map((m: { role: string }) => m.role);
      assert.deepEqual(roles, ["system", "user", "assistant", "tool"]);
      const asst = up2.messages[2];
      assert.equal(asst.tool_calls.length, 1);
      assert.equal(asst.tool_calls[0].function.name, "read");
      assert.deepEqual(JSON.parse(asst.tool_calls[0].function.arguments), { path: "/home/alex/notes.txt" });
      const tool = up2.messages[3];
      assert.equal(tool.tool_call_id, asst.tool_calls[0].id, "the tool result answers the replayed call");
      assert.equal(tool.content, "buy otter snacks");
    });

    test("plain text answer streams as text_delta events", async () => {
      fake.setScript(() => ({ kind: "text", chunks: ["Hello", " from", " the", " otter"] }));
      const s = stream(
        model(),
        { messages: [{ role: "user", content: "hi", timestamp: Date.now() }] },
        { apiKey: "x", maxRetries: 0 },
      );
      const deltas: string[] = [];
      for await (const ev of s) if (ev.type === "text_delta") deltas.push(ev.delta);
      const msg = await s.result();
      assert.equal(msg.stopReason, "stop");
      assert.deepEqual(deltas, ["Hello", " from", " the", " otter"]);
    });

    test("an upstream error reaches pi-ai as errorMessage with stopReason error", async () => {
      fake.setScript(() => ({
        kind: "error",
        status: 400,
        message: "model qwen2.5-coder:7b: context length 32768 exceeded",
      }));
      const msg = await complete(
        model(),
        { messages: [{ role: "user", content: "boom", timestamp: Date.now() }] },
        { apiKey: "x", maxRetries: 0 },
      );
      assert.equal(msg.stopReason, "error");
      assert.match(msg.errorMessage ?? "", /context length 32768 exceeded/);

      fake.setScript(() => ({ kind: "error", status: 500, message: "CUDA out of memory" }));
      const msg2 = await complete(
        model(),
        { messages: [{ role: "user", content: "boom again", timestamp: Date.now() }] },
        { apiKey: "x", maxRetries: 0 },
      );
      assert.equal(msg2.stopReason, "error");
      assert.match(msg2.errorMessage ?? "", /CUDA out of memory/);
    });
  });

  // ------------------------------------------------------------------------------------------
  // 3. failures

  describe("failures", () => {
    test("upstream down: SSE error (stream) and 503 JSON (non-stream) saying the upstream cannot be reached", async () => {
      const port = await deadPort();
      const down = await startTestBridge(bridgeConfig(`http://127.0.0.1:${port}/v1`, { connectTimeoutSeconds: 2 }));
      try {
        const res = await post(down, { model: MODEL, stream: true, messages: [{ role: "user", content: "hello?" }] });
        assert.equal(res.status, 200);
        const { objs, done } = await sseObjects(res);
        assert.equal(done, false, "a failed stream is not marked done");
        const err = objs.at(-1)?.error;
        assert.equal(err?.code, "backend_unavailable");
        assert.match(
          err?.message,
          new RegExp(`cannot reach upstream http://127\\.0\\.0\\.1:${port}/v1: connection refused`),
        );

        const res2 = await post(down, { model: MODEL, messages: [{ role: "user", content: "hello?" }] });
        assert.equal(res2.status, 503);
        assert.match(res2.headers.get("content-type") ?? "", /application\/json/);
        assert.equal(res2.headers.get("server"), `clawbridge/${VERSION}`);
        const body = (await res2.json()) as { error: { message: string; code: string } };
        assert.equal(body.error.code, "backend_unavailable");
        assert.match(body.error.message, /connection refused — is the server running\?/);
      } finally {
        await down.close(0);
        cleanup(down.dataDir);
      }
    });

    test("upstream 500: the upstream's message is carried (stream and non-stream)", async () => {
      fake.setScript(() => ({ kind: "error", status: 500, message: "CUDA out of memory" }));
      const res = await post(bridge, { model: MODEL, stream: true, messages: [{ role: "user", content: "x" }] });
      const { objs } = await sseObjects(res);
      assert.match(objs.at(-1)?.error?.message, /upstream 500: CUDA out of memory/);

      fake.setScript(() => ({ kind: "error", status: 500, message: "CUDA out of memory" }));
      await assert.rejects(
        client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "x" }] }),
        (err: InstanceType<typeof OpenAI.APIError>) => err.status === 500 && /CUDA out of memory/.test(err.message),
      );
    });

    test("upstream 429: message and retry-after are carried, status 429 for non-stream", async () => {
      const reply = (): Reply => ({
        kind: "raw",
        status: 429,
        headers: { "content-type": "application/json", "retry-after": "7" },
        frames: [JSON.stringify({ error: { message: "too many requests for qwen", type: "rate_limit" } })],
      });
      fake.setScript(reply);
      const res = await post(bridge, { model: MODEL, stream: true, messages: [{ role: "user", content: "x" }] });
      const { objs } = await sseObjects(res);
      const err = objs.at(-1)?.error;
      assert.match(err?.message, /upstream 429: too many requests for qwen \(retry after 7 s\)/);
      assert.equal(err?.type, "rate_limit_error");

      fake.setScript(reply);
      const res2 = await post(bridge, { model: MODEL, messages: [{ role: "user", content: "x" }] });
      assert.equal(res2.status, 429);
      const body = (await res2.json()) as { error: { message: string } };
      assert.match(body.error.message, /too many requests for qwen/);
    });

    describe("a hanging upstream is cut off by the configured timeouts", () => {
      let hangFake: FakeOpenAI;
      let short: TestBridge;
      before(async () => {
        hangFake = await startFakeOpenAI();
        short = await startTestBridge(
          bridgeConfig(hangFake.url, { firstByteTimeoutSeconds: 1, idleTimeoutSeconds: 1, timeoutSeconds: 3 }),
        );
      });
      after(async () => {
        await short?.close(0);
        await hangFake?.close();
        if (short) cleanup(short.dataDir);
      });

      test("nothing at all (not even headers): first-byte timeout as an SSE error; a non-streaming turn gets the whole-turn limit as 504 JSON", async () => {
        // The step holds the response until the bridge gives up and closes the connection.
        const held = heldOpen([]);
        hangFake.setScript(held.reply);
        const res = await post(short, { model: MODEL, stream: true, messages: [{ role: "user", content: "think" }] });
        const { objs, done } = await sseObjects(res);
        assert.equal(done, false);
        assert.equal(objs.at(-1)?.error?.code, "backend_timeout");
        assert.match(objs.at(-1)?.error?.message, /sent nothing for 1 s after the request \(first-byte timeout\)/);
        assert.ok(await eventually(held.closed, 5000), "the stuck upstream request's connection was closed");

        const held2 = heldOpen([]);
        hangFake.setScript(held2.reply);
        const res2 = await post(short, { model: MODEL, messages: [{ role: "user", content: "think" }] });
        assert.equal(res2.status, 504);
        // A non-streamed upstream answer only starts when it is complete: only the whole-turn limit applies.
        assert.match(
          ((await res2.json()) as { error: { message: string } }).error.message,
          /did not finish within 3 s/,
        );
        assert.ok(await eventually(held2.closed, 5000), "the stuck upstream request's connection was closed");
      });

      test("silence mid-answer: the partial text arrives, then an idle-timeout SSE error", async () => {
        const held = heldOpen([chunk({ role: "assistant", content: "" }), chunk({ content: "partial answer" })]);
        hangFake.setScript(held.reply);
        const res = await post(short, { model: MODEL, stream: true, messages: [{ role: "user", content: "think" }] });
        const { objs, done } = await sseObjects(res);
        assert.equal(done, false);
        assert.equal(objs.map((o) => o.choices?.[0]?.delta?.content ?? "").join(""), "partial answer");
        assert.equal(objs.at(-1)?.error?.code, "backend_timeout");
        assert.match(objs.at(-1)?.error?.message, /went silent for 1 s in the middle of the answer \(idle timeout\)/);
        assert.ok(await eventually(held.closed, 5000), "the stuck upstream request's connection was closed");
      });
    });

    test("client abort mid-stream closes the upstream connection", async () => {
      const held = heldOpen([chunk({ role: "assistant", content: "" }), chunk({ content: "partial" })]);
      fake.setScript(held.reply);
      const ac = new AbortController();
      const res = await post(
        bridge,
        { model: MODEL, stream: true, messages: [{ role: "user", content: "long answer please" }] },
        ac.signal,
      );
      const reader = res.body!.getReader();
      const dec = new TextDecoder();
      let seen = "";
      const guard = setTimeout(() => ac.abort(), 10_000); // a bridge that buffers fails instead of hanging
      try {
        for (let i = 0; i < 100 && !seen.includes('"content":"partial"'); i++) {
          const r = await reader.read();
          if (r.done) break;
          seen += dec.decode(r.value, { stream: true });
        }
      } catch {
        /* aborted by the guard */
      } finally {
        clearTimeout(guard);
      }
      assert.ok(seen.includes('"content":"partial"'), "the partial content was streamed before the abort");
      assert.equal(held.closed(), false, "the upstream request is open while the answer streams");
      ac.abort();
      assert.ok(await eventually(held.closed, 5000), "the upstream connection was closed after the client left");
      assert.ok(await eventually(() => bridge.pipeline.activeTurns === 0, 5000), "the turn ended");
      // The bridge still answers normally afterwards.
      fake.setScript(() => ({ kind: "text", chunks: ["still ", "here"] }));
      const after = await client.chat.completions.create({
        model: MODEL,
        messages: [{ role: "user", content: "again" }],
      });
      assert.equal(after.choices[0]?.message.content, "still here");
    });
  });
});
