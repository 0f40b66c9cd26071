/**
 * The OpenAI upstream translator (src/backends/openai/translate.ts) fed with the upstream stream
 * fixtures (test/fixtures/upstream/): the exact events of every fixture, the finish-reason and
 * usage mapping, and split invariance — the same stream cut at other network-chunk or delta
 * boundaries gives the same events. No server: the SSE frames are parsed here, or framed by
 * `sseEvents` (transport.ts) from a fake body reader. The HTTP side of the same fixtures is
 * test/integration/backend-openai.test.ts.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { TextDecoder } from "node:util";
import type { BackendError, BackendEvent, FinishReason, Usage } from "../../src/backends/contract/backend.js";
import {
  mapFinish,
  mapUsage,
  StreamTranslator,
  type UpstreamChunk,
  type UpstreamDelta,
  type UpstreamToolCallDelta,
} from "../../src/backends/openai/translate.js";
import { sseEvents } from "../../src/backends/openai/framing.js";

const FIXTURES = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "fixtures", "upstream");
const fixture = (name: string): string => readFileSync(path.join(FIXTURES, name), "utf8");
const TOOLS = ["read", "exec", "write"];
const NO_TOOLS: string[] = [];

/** Every `.sse` fixture that is a complete answer (error-mid-stream.sse ends in an error frame). */
const STREAMS = [
  "vllm-text.sse",
  "vllm-tools.sse",
  "vllm-reasoning.sse",
  "vllm-hermes-text-calls.sse",
  "ollama-text.sse",
  "ollama-content-calls.sse",
  "ollama-native-tools.sse",
  "llamacpp-text.sse",
  "qwen3-xml.sse",
  "interleaved-tools.sse",
  "special-tokens.sse",
  "empty-fields.sse",
  "usage-details.sse",
  "length-finish.sse",
  "content-filter.sse",
];

/** The JSON payloads of a `.sse` fixture's frames, `[DONE]` left out: the translator's input. */
function upstreamChunks(name: string): UpstreamChunk[] {
  const out: UpstreamChunk[] = [];
  for (const frame of fixture(name).split("\n\n")) {
    const data = frame
      .split("\n")
      .filter((l) => l.startsWith("data:"))
      .map((l) => l.slice(5).trimStart())
      .join("\n");
    if (data && data !== "[DONE]") out.push(JSON.parse(data) as UpstreamChunk);
  }
  return out;
}

interface Run {
  /** The events each `chunk()` call returned, in order. */
  perChunk: BackendEvent[][];
  /** The events of `finish()`. */
  finish: BackendEvent[];
  events: BackendEvent[];
  translator: StreamTranslator;
}

function translate(chunks: UpstreamChunk[], tools: readonly string[], maxToolCalls = 20): Run {
  const translator = new StreamTranslator({ tools, extract: true, maxToolCalls });
  const perChunk = chunks.map((c) => translator.chunk(c));
  const finish = translator.finish();
  return { perChunk, finish, events: [...perChunk.flat(), ...finish], translator };
}

function translateWhole(
  body: UpstreamChunk,
  tools: readonly string[],
): { message: BackendEvent[]; finish: BackendEvent[] } {
  const translator = new StreamTranslator({ tools, extract: true, maxToolCalls: 20 });
  return { message: translator.message(body), finish: translator.finish() };
}

/** Ids the bridge made for calls written as text: `call` + 24 letters and digits. */
const GENERATED = "<generated>";
const GENERATED_ID = /^call[A-Za-z0-9]{24}$/;
function generatedIds<T extends BackendEvent[] | BackendEvent[][]>(evs: T): T {
  const fix = (e: BackendEvent): BackendEvent =>
    e.type === "tool_call" && e.id !== undefined && GENERATED_ID.test(e.id) ? { ...e, id: GENERATED } : e;
  return evs.map((x) => (Array.isArray(x) ? x.map(fix) : fix(x))) as T;
}

const text = (t: string): BackendEvent => ({ type: "text", text: t });
const texts = (...ts: string[]): BackendEvent[][] => ts.map((t) => [text(t)]);
const reasoning = (t: string): BackendEvent => ({ type: "reasoning", text: t });
const call = (index: number, argumentsDelta: string, id?: string, name?: string): BackendEvent =>
  id === undefined
    ? { type: "tool_call", index, argumentsDelta }
    : { type: "tool_call", index, id, name, argumentsDelta };
/** A call found written as text (the extractor's), marked `extracted`. */
const xcall = (index: number, argumentsDelta: string, id: string, name: string): BackendEvent => ({
  type: "tool_call",
  index,
  id,
  name,
  argumentsDelta,
  extracted: true,
});
const usage = (
  promptTokens: number,
  completionTokens: number,
  totalTokens: number,
  more: Partial<Usage> = {},
): BackendEvent => ({
  type: "usage",
  usage: { promptTokens, completionTokens, totalTokens, ...more },
});
const done = (finishReason: FinishReason): BackendEvent => ({ type: "done", finishReason });

/** What a client rebuilds from the events: the text, the reasoning, the calls, usage and the end. */
function joined(evs: BackendEvent[]) {
  const calls: Array<{ id: string; name: string; args: string }> = [];
  for (const e of evs) {
    if (e.type !== "tool_call") continue;
    if (e.id !== undefined)
      calls[e.index] = { id: GENERATED_ID.test(e.id) ? GENERATED : e.id, name: e.name ?? "", args: "" };
    calls[e.index]!.args += e.argumentsDelta;
  }
  return {
    text: evs.map((e) => (e.type === "text" ? e.text : "")).join(""),
    reasoning: evs.map((e) => (e.type === "reasoning" ? e.text : "")).join(""),
    calls,
    ends: evs.filter((e) => e.type === "usage" || e.type === "done" || e.type === "error"),
  };
}

// --- re-chunking: the same upstream answer cut at other delta boundaries ---

const pieces = (s: string, n: number): string[] =>
  s ? Array.from({ length: Math.ceil(s.length / n) }, (_, i) => s.slice(i * n, i * n + n)) : [""];
const STRING_FIELDS = ["reasoning_content", "reasoning", "content", "refusal"] as const;

/** Every string delta (reasoning, content, tool-call arguments) cut into `n`-character deltas, one chunk each; finish_reason and usage stay on the last. */
function resplit(chunks: UpstreamChunk[], n: number): UpstreamChunk[] {
  const out: UpstreamChunk[] = [];
  for (const c of chunks) {
    const choice = c.choices?.[0];
    const d = choice?.delta;
    if (!choice || !d) {
      out.push(c);
      continue;
    }
    const deltas: UpstreamDelta[] = [];
    for (const key of STRING_FIELDS) {
      const v = d[key];
      if (typeof v === "string" && v) for (const p of pieces(v, n)) deltas.push({ [key]: p });
    }
    for (const tc of d.tool_calls ?? []) {
      const args = typeof tc.function?.arguments === "string" ? tc.function.arguments : "";
      pieces(args, n).forEach((p, i) => {
        const part: UpstreamToolCallDelta =
          i === 0
            ? { ...tc, function: { ...tc.function, arguments: p } }
            : { index: tc.index, function: { arguments: p } };
        deltas.push({ tool_calls: [part] });
      });
    }
    if (deltas.length === 0) deltas.push({});
    deltas.forEach((delta, i) => {
      const last = i === deltas.length - 1;
      out.push({
        choices: [{ index: 0, delta, finish_reason: last ? choice.finish_reason : null }],
        ...(last && c.usage ? { usage: c.usage } : {}),
      });
    });
  }
  return out;
}

/** The one string field of a chunk that carries nothing else (no finish, usage or tool call). */
function soleText(c: UpstreamChunk): (typeof STRING_FIELDS)[number] | undefined {
  if (c.usage || c.choices?.length !== 1 || c.choices[0]!.finish_reason) return undefined;
  const d = c.choices[0]!.delta;
  if (!d || (Array.isArray(d.tool_calls) && d.tool_calls.length > 0)) return undefined;
  const keys = STRING_FIELDS.filter((k) => typeof d[k] === "string" && d[k]);
  return keys.length === 1 ? keys[0] : undefined;
}

/** Consecutive text-only (or reasoning-only) deltas merged into one chunk. */
function coalesce(chunks: UpstreamChunk[]): UpstreamChunk[] {
  const out: UpstreamChunk[] = [];
  let prevKey: string | undefined;
  for (const c of chunks) {
    const key = soleText(c);
    const value = key ? (c.choices![0]!.delta![key] as string) : "";
    const prev = out[out.length - 1]?.choices?.[0]?.delta as Record<string, string> | undefined;
    if (key && key === prevKey && prev) prev[key] += value;
    else out.push(key ? { choices: [{ index: 0, delta: { [key]: value }, finish_reason: null }] } : c);
    prevKey = key;
  }
  return out;
}

/** The streamed answer as one `chat.completion` (what the server answers a non-streamed request). */
function assemble(chunks: UpstreamChunk[]): UpstreamChunk {
  let content = "";
  let reasoningText = "";
  let finish: string | null = null;
  let lastUsage: UpstreamChunk["usage"];
  const calls: Array<{ index: number; id?: string; name?: string; args: string }> = [];
  for (const c of chunks) {
    if (c.usage) lastUsage = c.usage;
    const ch = c.choices?.[0];
    if (!ch) continue;
    if (ch.finish_reason) finish = ch.finish_reason;
    const d = ch.delta ?? {};
    if (typeof d.content === "string") content += d.content;
    if (typeof d.reasoning_content === "string") reasoningText += d.reasoning_content;
    else if (typeof d.reasoning === "string") reasoningText += d.reasoning;
    for (const tc of d.tool_calls ?? []) {
      // A new call: a new index, or a new id on a reused index (Ollama).
      let cur = calls.findLast((x) => x.index === tc.index);
      if (!cur || (tc.id && cur.id && tc.id !== cur.id)) calls.push((cur = { index: tc.index ?? 0, args: "" }));
      if (tc.id) cur.id = tc.id;
      if (tc.function?.name) cur.name = tc.function.name;
      if (typeof tc.function?.arguments === "string") cur.args += tc.function.arguments;
    }
  }
  const message: UpstreamDelta = {
    role: "assistant",
    content: content || null,
    reasoning_content: reasoningText || null,
  };
  if (calls.length)
    message.tool_calls = calls.map((x) => ({
      id: x.id,
      type: "function",
      function: { name: x.name, arguments: x.args },
    }));
  return { choices: [{ index: 0, message, finish_reason: finish }], usage: lastUsage };
}

// --- the event-stream framing (transport.ts) over a fake body cut at byte boundaries ---

type Cut = (i: number) => number;

/** A body reader that hands out `bytes` in pieces of `cut(i)` bytes. */
function bodyReader(bytes: Buffer, cut: Cut) {
  let pos = 0;
  let i = 0;
  const reader = {
    ended: false,
    async next(): Promise<Buffer | null> {
      if (pos >= bytes.length) {
        reader.ended = true;
        return null;
      }
      const piece = bytes.subarray(pos, pos + Math.max(1, cut(i++)));
      pos += piece.length;
      return piece;
    },
  };
  return reader;
}

/** Deterministic pseudo-random cuts of 1..max bytes. */
function randomCuts(seed: number, max: number): Cut {
  let s = seed;
  return () => {
    s = (s * 1103515245 + 12345) % 2147483648;
    return 1 + (s % max);
  };
}

async function viaSse(
  body: string,
  tools: readonly string[],
  cut?: Cut,
  initialChars = 0,
): Promise<{ events: BackendEvent[]; sawDone: boolean }> {
  const translator = new StreamTranslator({ tools, extract: true, maxToolCalls: 20 });
  const state = { sawDone: false };
  const failure = (err: unknown): BackendError => {
    throw err;
  };
  // No cut: the whole body is already read (how a whole answer that is an event stream is parsed).
  const reader = cut
    ? bodyReader(Buffer.from(body.slice(initialChars), "utf8"), cut)
    : { ended: true, next: async (): Promise<Buffer | null> => null };
  const initial = cut ? body.slice(0, initialChars) : body;
  const events: BackendEvent[] = [];
  for await (const ev of sseEvents(
    translator,
    initial,
    reader,
    new TextDecoder("utf-8"),
    failure,
    "http://127.0.0.1:8000/v1/chat/completions",
    state,
  ))
    events.push(ev);
  return { events, sawDone: state.sawDone };
}

const CUTS: Array<[string, Cut | undefined, number]> = [
  ["whole body at once", undefined, 0],
  ["1 byte", () => 1, 0],
  ["2 bytes", () => 2, 0],
  ["7 bytes", () => 7, 0],
  ["64 bytes", () => 64, 0],
  ["random 1-40 bytes", randomCuts(7, 40), 0],
  ["sniffed start (23 chars) then random 1-300 bytes", randomCuts(11, 300), 23],
];

describe("openai translator: fixtures → exact events", () => {
  it("vllm-text.sse: one text event per delta, returned by the chunk that carried it; usage from the `choices: []` chunk", () => {
    const r = translate(upstreamChunks("vllm-text.sse"), NO_TOOLS);
    assert.deepEqual(r.perChunk, [
      [],
      ...texts(
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
      ),
      [], // finish chunk with empty content
      [], // usage chunk: usage is held for the end
    ]);
    assert.deepEqual(r.finish, [usage(1432, 18, 1450), done("stop")]);
    assert.equal(r.translator.sawFinish, true);
  });

  it("vllm-text.sse with tools offered: a whitespace-only delta is held by the extractor and joined to the next", () => {
    const r = translate(upstreamChunks("vllm-text.sse"), TOOLS);
    assert.deepEqual(r.perChunk.slice(12, 16), [[text(" capital")], [text(" since")], [], [text(" 9")]]);
    assert.equal(joined(r.events).text, "The capital of France is Paris. It has been the capital since 987.");
  });

  it("vllm-reasoning.sse: reasoning_content → reasoning events, then text; reasoning_tokens in usage", () => {
    const r = translate(upstreamChunks("vllm-reasoning.sse"), NO_TOOLS);
    assert.deepEqual(r.events, [
      ...["Okay", ",", " the", " user", " wants", " 2", "+", "2", "."].map(reasoning),
      ...["\n\n", "2", " +", " 2", " =", " 4", "."].map(text),
      usage(96, 52, 148, { reasoningTokens: 9 }),
      done("stop"),
    ]);
  });

  it("usage-details.sse: `delta.reasoning`, multi-byte text, cached and reasoning tokens", () => {
    const r = translate(upstreamChunks("usage-details.sse"), NO_TOOLS);
    assert.deepEqual(r.events, [
      ...["L’utilisateur", " veut", " un", " café", " ☕", "."].map(reasoning),
      ...["Un", " café", ",", " s’il", " vous", " plaît", " ☕", " —", " 日本", "語", "も", "。"].map(text),
      usage(2200, 31, 2231, { cachedTokens: 2048, reasoningTokens: 12 }),
      done("stop"),
    ]);
  });

  it("llamacpp-text.sse: null content in the role chunk, usage (and timings) on the finish chunk", () => {
    const r = translate(upstreamChunks("llamacpp-text.sse"), NO_TOOLS);
    assert.deepEqual(r.perChunk, [
      [],
      ...texts("Sure", ".", " Here", " is", " a", " haiku", ":\n\n", "Quiet", " loop", "back", " port"),
      [],
    ]);
    assert.deepEqual(r.finish, [usage(48, 11, 59), done("stop")]);
  });

  it("length-finish.sse: finish_reason length → length; cached_tokens 0 is not reported", () => {
    const r = translate(upstreamChunks("length-finish.sse"), NO_TOOLS);
    assert.deepEqual(r.events, [
      ...["1", ".", " Check", " the", " logs", "\n", "2", ".", " Restart"].map(text),
      usage(812, 9, 821),
      done("length"),
    ]);
  });

  it("content-filter.sse: Azure's empty-choices prompt-filter chunk is skipped; finish content_filter; no usage sent, none reported", () => {
    const r = translate(upstreamChunks("content-filter.sse"), TOOLS);
    assert.deepEqual(r.perChunk, [[], [], ...texts("Here", " is", " how", " to"), []]);
    assert.deepEqual(r.finish, [done("content_filter")]);
  });

  it("ollama-text.sse: role on every delta, an empty finish chunk, a usage chunk", () => {
    const r = translate(upstreamChunks("ollama-text.sse"), NO_TOOLS);
    assert.deepEqual(r.events, [
      ...["Hello", "!", " How", " can", " I", " help", " you", " today", "?"].map(text),
      usage(26, 10, 36),
      done("stop"),
    ]);
  });

  it("empty-fields.sse: `tool_calls: []`, null reasoning_content and refusal give nothing", () => {
    const r = translate(upstreamChunks("empty-fields.sse"), TOOLS);
    assert.deepEqual(r.perChunk, [[], ...texts("All", " good", "."), []]);
    assert.deepEqual(r.finish, [done("stop")]);
  });

  it("vllm-tools.sse: native calls — id sanitised, id and name on the first delta only, every argument delta passed on", () => {
    const r = translate(upstreamChunks("vllm-tools.sse"), TOOLS);
    const read = "chatcmpltool4c1d8e0f2a3b4c5d9e8f7a6b5c4d3e2f";
    const exec = "chatcmpltool7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d";
    assert.deepEqual(r.perChunk, [
      [],
      [call(0, "", read, "read")],
      ...['{"path": "', "/home/", "user", "/notes", ".txt", '"}'].map((a) => [call(0, a)]),
      [call(1, "", exec, "exec")],
      ...['{"command": "', "ls", " -la", " /tmp", '"}'].map((a) => [call(1, a)]),
      [],
      [],
    ]);
    assert.deepEqual(r.finish, [usage(5120, 41, 5161), done("tool_calls")]);
    assert.equal(r.translator.toolCalls, 2);
  });

  it("interleaved-tools.sse: the second call is held until the first is complete, then sent whole", () => {
    const r = translate(upstreamChunks("interleaved-tools.sse"), TOOLS);
    assert.deepEqual(r.perChunk, [
      [],
      [call(0, "", "callA1", "read")],
      [], // call B starts while A is live: buffered
      [call(0, '{"path":')],
      [], // B's arguments: buffered
      [call(0, '"/tmp/x"}')],
      [call(1, '{"command":"pwd"}', "callB2", "exec")], // A looks complete: B goes out with what it had
      [],
    ]);
    assert.deepEqual(r.finish, [done("tool_calls")]);
  });

  it("ollama-native-tools.sse: calls reusing index 0 are told apart by id; finish stop → tool_calls", () => {
    const r = translate(upstreamChunks("ollama-native-tools.sse"), TOOLS);
    assert.deepEqual(r.perChunk, [
      [call(0, '{"path":"/tmp/a.txt"}', "callk3j2l1m0", "read")],
      [call(1, '{"path":"/tmp/b.txt"}', "callp9o8i7u6", "read")],
      [],
      [],
    ]);
    assert.deepEqual(r.finish, [usage(812, 40, 852), done("tool_calls")]);
  });

  it("vllm-hermes-text-calls.sse: a <tool_call> written as text becomes a call with a generated id; the text before it stays", () => {
    const r = translate(upstreamChunks("vllm-hermes-text-calls.sse"), TOOLS);
    const ids = r.events.flatMap((e) => (e.type === "tool_call" && e.id ? [e.id] : []));
    assert.equal(ids.length, 1);
    assert.match(ids[0]!, GENERATED_ID);
    const evs = generatedIds(r.perChunk);
    assert.deepEqual(evs.slice(0, 7), [[], ...texts("I'll", " read", " the", " file", " first", ".")]);
    assert.deepEqual(evs.slice(7, 25).flat(), [], "the call's text is held while it is being written");
    assert.deepEqual(
      evs[25],
      [xcall(0, '{"path":"/etc/hostname"}', GENERATED, "read")],
      "emitted by the chunk with </tool_call>",
    );
    assert.deepEqual(r.finish, [usage(3000, 30, 3030), done("tool_calls")]);
  });

  it("vllm-hermes-text-calls.sse without tools: the same text passes unchanged, finish stop", () => {
    const chunks = upstreamChunks("vllm-hermes-text-calls.sse");
    const raw = chunks.map((c) => c.choices?.[0]?.delta?.content ?? "").join("");
    const r = translate(chunks, NO_TOOLS);
    assert.deepEqual(joined(r.events), {
      text: raw,
      reasoning: "",
      calls: [],
      ends: [usage(3000, 30, 3030), done("stop")],
    });
  });

  it("qwen3-xml.sse: a Qwen3-Coder <function=…><parameter=…> call becomes JSON arguments", () => {
    const r = translate(upstreamChunks("qwen3-xml.sse"), TOOLS);
    assert.deepEqual(generatedIds(r.events), [
      ...["Let", " me", " check", "."].map(text),
      xcall(0, '{"command":"git status"}', GENERATED, "exec"),
      usage(2048, 17, 2065),
      done("tool_calls"),
    ]);
    assert.deepEqual(
      generatedIds(r.perChunk)[17],
      [xcall(0, '{"command":"git status"}', GENERATED, "exec")],
      "emitted by the chunk with </tool_call>",
    );
  });

  it("ollama-content-calls.sse: bare JSON lines in content → two calls with distinct ids, no text", () => {
    const r = translate(upstreamChunks("ollama-content-calls.sse"), TOOLS);
    const ids = r.events.flatMap((e) => (e.type === "tool_call" && e.id ? [e.id] : []));
    assert.equal(ids.length, 2);
    assert.notEqual(ids[0], ids[1]);
    assert.deepEqual(generatedIds(r.events), [
      xcall(0, '{"path":"/tmp/a.txt","content":"hello"}', GENERATED, "write"),
      xcall(1, '{"path":"/tmp/b.txt","content":"world"}', GENERATED, "write"),
      usage(4410, 52, 4462),
      done("tool_calls"),
    ]);
    // The first call is out when its line ends; the second (no newline after it) when the stream ends.
    assert.deepEqual(generatedIds(r.perChunk[23]!), [
      xcall(0, '{"path":"/tmp/a.txt","content":"hello"}', GENERATED, "write"),
    ]);
    assert.equal(generatedIds(r.finish)[0]!.type, "tool_call");
  });

  it("special-tokens.sse: <|im_end|>, a split <|im_start|>assistant and <|endoftext|> are stripped", () => {
    const r = translate(upstreamChunks("special-tokens.sse"), NO_TOOLS);
    assert.deepEqual(r.perChunk, [
      [],
      ...texts("Done", "."),
      [],
      [text("\n")],
      [],
      [],
      [],
      [],
      ...texts("Anything", " else", "?"),
      [],
      [],
    ]);
    assert.deepEqual(r.finish, [done("stop")]);
    // With tools the extractor strips them (and holds the newline until the next visible text).
    assert.deepEqual(translate(upstreamChunks("special-tokens.sse"), TOOLS).events, [
      text("Done"),
      text("."),
      text("\nAnything"),
      text(" else"),
      text("?"),
      done("stop"),
    ]);
  });

  it("special tokens in reasoning are stripped too, also when split across deltas", () => {
    const deltas = ["Think", "<|im_", "end|>", " more", "<|endoftext|>"].map(
      (r): UpstreamChunk => ({ choices: [{ index: 0, delta: { reasoning_content: r } }] }),
    );
    const r = translate(
      [...deltas, { choices: [{ index: 0, delta: { content: "ok" }, finish_reason: "stop" }] }],
      NO_TOOLS,
    );
    assert.deepEqual(r.events, [reasoning("Think"), reasoning(" more"), text("ok"), done("stop")]);
  });

  it("plain-json-text.json: a whole chat.completion → text, usage, stop", () => {
    const r = translateWhole(JSON.parse(fixture("plain-json-text.json")) as UpstreamChunk, TOOLS);
    assert.deepEqual(r.message, [text("Paris is the capital of France.")]);
    assert.deepEqual(r.finish, [usage(21, 8, 29), done("stop")]);
  });

  it("plain-json-tools.json: reasoning and a native call from a whole message", () => {
    const r = translateWhole(JSON.parse(fixture("plain-json-tools.json")) as UpstreamChunk, TOOLS);
    assert.deepEqual(r.message, [
      reasoning("Need the file."),
      call(0, '{"path": "/tmp/a.txt"}', "chatcmpltoolaa11bb22", "read"),
    ]);
    assert.deepEqual(r.finish, [usage(300, 20, 320), done("tool_calls")]);
  });

  it("vllm-tools.sse with maxToolCalls 1: the second call is dropped and the cap is flagged by the chunk that started it", () => {
    const chunks = upstreamChunks("vllm-tools.sse");
    const translator = new StreamTranslator({ tools: TOOLS, extract: true, maxToolCalls: 1 });
    const perChunk = chunks.map((c) => {
      const evs = translator.chunk(c);
      return { evs, cap: translator.capReached };
    });
    assert.equal(
      perChunk.findIndex((x) => x.cap),
      8,
      "the chunk that names the second call",
    );
    assert.deepEqual(
      perChunk.slice(8).flatMap((x) => x.evs),
      [],
    );
    assert.deepEqual(translator.finish(), [usage(5120, 41, 5161), done("tool_calls")]);
    assert.equal(translator.toolCalls, 1);
  });

  it("error-mid-stream.sse: the events before vLLM's error frame, then the upstream's error; nothing after", async () => {
    const body = fixture("error-mid-stream.sse");
    for (const [name, cut, initial] of CUTS) {
      const r = await viaSse(body, TOOLS, cut, initial);
      assert.deepEqual(
        r.events,
        [
          text("Let"),
          text(" me"),
          {
            type: "error",
            error: {
              code: "upstream_error",
              message: "upstream error: EngineCore encountered an issue. See stack trace (above) for the root cause.",
              status: 500,
              retryable: true,
            },
          },
        ],
        name,
      );
      assert.equal(r.sawDone, false, name);
    }
  });
});

describe("openai translator: finish-reason and usage mapping", () => {
  it("mapFinish", () => {
    const cases: Array<[string | null | undefined, FinishReason]> = [
      ["stop", "stop"],
      ["length", "length"],
      ["content_filter", "content_filter"],
      ["tool_calls", "tool_calls"],
      ["function_call", "tool_calls"],
      ["eos", "stop"],
      ["abort", "stop"],
      ["", "stop"],
      [null, "stop"],
      [undefined, "stop"],
    ];
    for (const [upstream, want] of cases) assert.equal(mapFinish(upstream), want, String(upstream));
  });

  it("finish tool_calls without any call is stop; a call makes any finish tool_calls", () => {
    const end = (chunks: UpstreamChunk[], tools = TOOLS) => translate(chunks, tools).finish.at(-1);
    const fin = (reason: string): UpstreamChunk => ({ choices: [{ index: 0, delta: {}, finish_reason: reason }] });
    assert.deepEqual(end([{ choices: [{ index: 0, delta: { content: "hi" } }] }, fin("tool_calls")]), done("stop"));
    assert.deepEqual(
      end([
        {
          choices: [
            { index: 0, delta: { tool_calls: [{ index: 0, id: "c1", function: { name: "read", arguments: "{}" } }] } },
          ],
        },
        fin("length"),
      ]),
      done("tool_calls"),
    );
    assert.deepEqual(end([fin("function_call")]), done("stop"));
  });

  it("mapUsage", () => {
    assert.equal(mapUsage(undefined), undefined);
    assert.equal(mapUsage(null), undefined);
    assert.equal(mapUsage({}), undefined, "no token counts: no usage");
    assert.equal(mapUsage({ total_tokens: 5 }), undefined);
    assert.deepEqual(mapUsage({ prompt_tokens: 7 }), { promptTokens: 7, completionTokens: 0, totalTokens: 7 });
    assert.deepEqual(
      mapUsage({ prompt_tokens: 7, completion_tokens: 3 }),
      { promptTokens: 7, completionTokens: 3, totalTokens: 10 },
      "total computed when missing",
    );
    assert.deepEqual(
      mapUsage({ prompt_tokens: 7, completion_tokens: 3, total_tokens: 11 }),
      { promptTokens: 7, completionTokens: 3, totalTokens: 11 },
      "the upstream's total wins",
    );
    assert.deepEqual(
      mapUsage({
        prompt_tokens: 7,
        completion_tokens: 3,
        total_tokens: 10,
        prompt_tokens_details: { cached_tokens: 0 },
        completion_tokens_details: { reasoning_tokens: 0 },
      }),
      { promptTokens: 7, completionTokens: 3, totalTokens: 10 },
      "zero details are left out",
    );
    assert.deepEqual(
      mapUsage({
        prompt_tokens: 7,
        completion_tokens: 3,
        prompt_tokens_details: null,
        completion_tokens_details: null,
      }),
      { promptTokens: 7, completionTokens: 3, totalTokens: 10 },
    );
    assert.deepEqual(
      mapUsage({
        prompt_tokens: 7,
        completion_tokens: 3,
        prompt_tokens_details: { cached_tokens: 4 },
        completion_tokens_details: { reasoning_tokens: 2 },
      }),
      {
        promptTokens: 7,
        completionTokens: 3,
        totalTokens: 10,
        cachedTokens: 4,
        reasoningTokens: 2,
      },
    );
  });

  it("refusal text is answer text: with the content of the same delta, one event", () => {
    const r = translate(
      [{ choices: [{ index: 0, delta: { content: "I can't", refusal: " help with that." }, finish_reason: "stop" }] }],
      NO_TOOLS,
    );
    assert.deepEqual(r.events, [text("I can't help with that."), done("stop")]);
  });

  it("the last usage seen wins (a usage chunk after the finish chunk)", () => {
    const r = translate(
      [
        { choices: [{ index: 0, delta: { content: "x" } }], usage: { prompt_tokens: 1, completion_tokens: 1 } },
        { choices: [{ index: 0, delta: {}, finish_reason: "stop" }] },
        { choices: [], usage: { prompt_tokens: 9, completion_tokens: 4, total_tokens: 13 } },
      ],
      NO_TOOLS,
    );
    assert.deepEqual(r.finish, [usage(9, 4, 13), done("stop")]);
  });
});

describe("openai translator: split invariance", () => {
  it("every .sse fixture is covered", () => {
    const all = readdirSync(FIXTURES).filter((f) => f.endsWith(".sse"));
    assert.deepEqual(
      all.filter((f) => !STREAMS.includes(f) && f !== "error-mid-stream.sse"),
      [],
      "add new complete streams to STREAMS",
    );
  });

  for (const name of STREAMS) {
    for (const tools of [NO_TOOLS, TOOLS]) {
      const label = `${name}${tools.length ? " (tools offered)" : ""}`;

      it(`${label}: any network-chunk boundaries give exactly the events of the parsed frames`, async () => {
        const expected = generatedIds(translate(upstreamChunks(name), tools).events);
        const body = fixture(name);
        for (const [cutName, cut, initial] of CUTS) {
          const r = await viaSse(body, tools, cut, initial);
          assert.deepEqual(generatedIds(r.events), expected, cutName);
          assert.equal(r.sawDone, true, cutName);
        }
      });

      it(`${label}: other delta boundaries give the same text, reasoning, calls, usage and finish`, () => {
        const chunks = upstreamChunks(name);
        const want = joined(translate(chunks, tools).events);
        const variants: Array<[string, UpstreamChunk[]]> = [
          ["1-character deltas", resplit(chunks, 1)],
          ["4-character deltas", resplit(chunks, 4)],
          ["text deltas merged", coalesce(chunks)],
          ["1-character deltas merged again", coalesce(resplit(chunks, 1))],
        ];
        assert.ok(variants[0]![1].length > chunks.length, "the variants really cut the stream differently");
        for (const [variant, cs] of variants) {
          const r = translate(cs, tools);
          assert.deepEqual(joined(r.events), want, variant);
          // The text of one upstream chunk goes out as one event.
          for (const evs of r.perChunk)
            assert.ok(
              !evs.some((e, i) => e.type === "text" && evs[i + 1]?.type === "text"),
              `${variant}: two text events from one chunk`,
            );
        }
      });

      it(`${label}: the same answer as one whole chat.completion gives the same result`, () => {
        const chunks = upstreamChunks(name);
        const whole = translateWhole(assemble(chunks), tools);
        assert.deepEqual(joined([...whole.message, ...whole.finish]), joined(translate(chunks, tools).events));
      });
    }
  }
});
