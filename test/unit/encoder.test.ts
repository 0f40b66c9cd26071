/**
 * The SSE encoder (writeSse) driven through a real HTTP server on 127.0.0.1 with a hand-made stream
 * of BackendEvents (our own code under test, synthetic input). The client reads the raw bytes.
 */
import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import type { BackendEvent } from "../../src/backends/contract/backend.js";
import { collectCompletion } from "../../src/request/encoder/json.js";
import { writeSse, type EncodeResult, type SseOptions } from "../../src/request/encoder/sse.js";

/** An async iterable the test feeds by hand; records whether the consumer stopped it early. */
class Feed implements AsyncIterable<BackendEvent> {
  private readonly queue: Array<BackendEvent | Error | null> = [];
  private wake: (() => void) | undefined;
  returned = false;

  push(...evs: BackendEvent[]): this {
    this.queue.push(...evs);
    this.wake?.();
    return this;
  }
  /** End without a terminal event. */
  end(): this {
    this.queue.push(null);
    this.wake?.();
    return this;
  }
  fail(err: Error): this {
    this.queue.push(err);
    this.wake?.();
    return this;
  }
  [Symbol.asyncIterator](): AsyncIterator<BackendEvent> {
    return {
      next: async () => {
        for (let i = 0; i < 1_000_000; i++) {
          if (this.queue.length) {
            const item = this.queue.shift()!;
            if (item === null) return { done: true, value: undefined };
            if (item instanceof Error) throw item;
            return { done: false, value: item };
          }
          await new Promise<void>((r) => (this.wake = r));
          this.wake = undefined;
        }
        throw new Error("feed loop bound");
      },
      return: async () => {
        this.returned = true;
        return { done: true, value: undefined };
      },
    };
  }
}

interface Served {
  feed: Feed;
  opts: SseOptions;
  result?: Promise<EncodeResult>;
  /** Resolves when the server saw the client's connection close. */
  closed?: Promise<void>;
}

let server: http.Server;
let base: string;
let current: Served | undefined;

before(async () => {
  server = http.createServer((req, res) => {
    const s = current!;
    s.closed = new Promise((r) => res.on("close", () => r()));
    s.result = writeSse(res, s.feed, s.opts);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

after(async () => {
  server.closeAllConnections();
  await new Promise<void>((r) => server.close(() => r()));
});

const defaults: SseOptions = { model: "test/model", includeUsage: false, heartbeatMs: 60_000 };

/** Start a response for `feed`; returns a reader of SSE data payloads. */
async function open(feed: Feed, opts: Partial<SseOptions> = {}, signal?: AbortSignal) {
  const served: Served = { feed, opts: { ...defaults, ...opts } };
  current = served;
  const res = await fetch(`${base}/`, { signal });
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let raw = "";
  let buf = "";
  const frames: string[] = [];
  /** Read until `until(frames)` holds or the stream ends (bounded). */
  const readUntil = async (until: (f: string[]) => boolean = () => false) => {
    for (let i = 0; i < 100_000 && !until(frames); i++) {
      const { done, value } = await reader.read();
      if (done) break;
      const text = decoder.decode(value, { stream: true });
      raw += text;
      buf += text;
      let sep: number;
      while ((sep = buf.indexOf("\n\n")) >= 0) {
        const block = buf.slice(0, sep);
        buf = buf.slice(sep + 2);
        const data = block
          .split("\n")
          .filter((l) => l.startsWith("data: "))
          .map((l) => l.slice(6))
          .join("\n");
        if (data) frames.push(data);
      }
    }
    return frames;
  };
  return { res, served, frames, readUntil, raw: () => raw, reader };
}

const json = (frames: string[]) => frames.filter((f) => f !== "[DONE]").map((f) => JSON.parse(f));
const isHeartbeat = (c: any) =>
  c.choices?.[0]?.delta &&
  Object.keys(c.choices[0].delta).length === 1 &&
  c.choices[0].delta.content === "" &&
  c.choices[0].finish_reason === null;

describe("writeSse", () => {
  test("role chunk first, content deltas in order, finish chunk, then [DONE]", async () => {
    const feed = new Feed().push(
      { type: "text", text: "Hel" },
      { type: "text", text: "lo, " },
      { type: "text", text: "world" },
      { type: "done", finishReason: "stop" },
    );
    const s = await open(feed, { headers: { "x-clawbridge-conversation": "conv-1" } });
    assert.equal(s.res.status, 200);
    assert.match(s.res.headers.get("content-type") ?? "", /^text\/event-stream/);
    assert.equal(s.res.headers.get("cache-control"), "no-cache, no-transform");
    assert.equal(s.res.headers.get("x-clawbridge-conversation"), "conv-1", "extra headers are sent");
    const frames = await s.readUntil();
    assert.equal(frames.at(-1), "[DONE]");
    const chunks = json(frames);
    assert.deepEqual(chunks[0].choices[0].delta, { role: "assistant", content: "" });
    assert.deepEqual(
      chunks.slice(1, 4).map((c) => c.choices[0].delta),
      [{ content: "Hel" }, { content: "lo, " }, { content: "world" }],
    );
    assert.deepEqual(chunks[4].choices[0], { index: 0, delta: {}, logprobs: null, finish_reason: "stop" });
    assert.equal(chunks.length, 5);
    for (const c of chunks) {
      assert.equal(c.object, "chat.completion.chunk");
      assert.equal(c.model, "test/model");
      assert.equal(c.id, chunks[0].id, "one id for the whole stream");
      assert.match(c.id, /^chatcmpl-[A-Za-z0-9]+$/);
    }
    const r = await s.served.result!;
    assert.equal(r.outcome, "completed");
    assert.equal(r.text, "Hello, world");
    assert.equal(r.contentChars, 12);
    assert.equal(r.finishReason, "stop");
  });

  test("the role chunk goes out before the backend says anything", async () => {
    const feed = new Feed();
    const s = await open(feed);
    const frames = await s.readUntil((f) => f.length >= 1);
    assert.deepEqual(JSON.parse(frames[0]!).choices[0].delta, { role: "assistant", content: "" });
    feed.push({ type: "done", finishReason: "stop" });
    await s.readUntil();
    await s.served.result;
  });

  test('silence gets heartbeat chunks with delta.content "" (never SSE comment lines)', async () => {
    const feed = new Feed().push({ type: "text", text: "thinking..." });
    const s = await open(feed, { heartbeatMs: 50 });
    // Wait (bounded by the test runner) until three heartbeats arrived, then let the backend finish.
    await s.readUntil((f) => json(f).filter(isHeartbeat).length >= 3);
    feed.push({ type: "text", text: " done" }, { type: "done", finishReason: "stop" });
    const frames = await s.readUntil();
    const chunks = json(frames);
    const beats = chunks.filter(isHeartbeat);
    assert.ok(beats.length >= 3);
    for (const b of beats) assert.equal(b.id, chunks[0].id);
    assert.ok(!/^:/m.test(s.raw()), "no comment lines");
    assert.ok(
      s
        .raw()
        .split("\n\n")
        .filter(Boolean)
        .every((block) => block.startsWith("data: ")),
      "every frame is a data frame",
    );
    assert.equal(
      chunks.map((c) => c.choices[0]?.delta?.content ?? "").join(""),
      "thinking... done",
      "heartbeats add nothing to the text",
    );
    assert.equal(frames.at(-1), "[DONE]");
    assert.equal((await s.served.result!).text, "thinking... done");
  });

  test("usage chunk only when includeUsage, after the finish chunk and before [DONE]", async () => {
    const usage = { promptTokens: 120, completionTokens: 7, totalTokens: 127, cachedTokens: 100, reasoningTokens: 3 };
    const withUsage = await open(
      new Feed().push({ type: "text", text: "ok" }, { type: "usage", usage }, { type: "done", finishReason: "stop" }),
      { includeUsage: true },
    );
    const f1 = await withUsage.readUntil();
    const c1 = json(f1);
    const last = c1.at(-1);
    assert.deepEqual(last.choices, []);
    assert.deepEqual(last.usage, {
      prompt_tokens: 120,
      completion_tokens: 7,
      total_tokens: 127,
      prompt_tokens_details: { cached_tokens: 100 },
      completion_tokens_details: { reasoning_tokens: 3 },
    });
    assert.equal(c1.at(-2).choices[0].finish_reason, "stop");
    assert.equal(f1.at(-1), "[DONE]");
    assert.deepEqual((await withUsage.served.result!).usage, usage);

    const without = await open(
      new Feed().push({ type: "text", text: "ok" }, { type: "usage", usage }, { type: "done", finishReason: "stop" }),
      { includeUsage: false },
    );
    const f2 = await without.readUntil();
    assert.ok(!json(f2).some((c) => "usage" in c), "no usage chunk unless asked");
    assert.equal(json(f2).at(-1).choices[0].finish_reason, "stop");
    await without.served.result;
  });

  test("includeUsage without a usage event: no usage chunk, still finish + [DONE]", async () => {
    const s = await open(new Feed().push({ type: "text", text: "x" }, { type: "done", finishReason: "length" }), {
      includeUsage: true,
    });
    const frames = await s.readUntil();
    assert.equal(json(frames).at(-1).choices[0].finish_reason, "length");
    assert.equal(frames.at(-1), "[DONE]");
    await s.served.result;
  });

  test('an error event becomes data: {"error":…} with the real reason, and no [DONE]', async () => {
    const feed = new Feed().push(
      { type: "text", text: "partial " },
      {
        type: "error",
        error: { code: "backend_timeout", message: "the backend did not finish within 300s", status: 504 },
      },
      { type: "text", text: "never sent" },
    );
    const s = await open(feed);
    const frames = await s.readUntil();
    assert.ok(!frames.includes("[DONE]"));
    const last = JSON.parse(frames.at(-1)!);
    assert.deepEqual(last, {
      error: {
        message: "the backend did not finish within 300s",
        type: "backend_error",
        code: "backend_timeout",
        param: null,
      },
    });
    assert.ok(!json(frames).some((c) => c.choices?.[0]?.finish_reason), "no finish chunk on failure");
    assert.ok(!s.raw().includes("never sent"));
    const r = await s.served.result!;
    assert.equal(r.outcome, "error");
    assert.equal(r.error, "the backend did not finish within 300s");
    assert.ok(feed.returned, "the event stream was closed after the error");
  });

  test("a 429 backend error is typed rate_limit_error", async () => {
    const s = await open(
      new Feed().push({ type: "error", error: { code: "upstream_error", message: "slow down", status: 429 } }),
    );
    const last = JSON.parse((await s.readUntil()).at(-1)!);
    assert.equal(last.error.type, "rate_limit_error");
    await s.served.result;
  });

  test("a stream that ends without done/error is an SSE error, never an empty success", async () => {
    const s = await open(new Feed().end());
    const frames = await s.readUntil();
    assert.ok(!frames.includes("[DONE]"));
    const last = JSON.parse(frames.at(-1)!);
    assert.equal(last.error.code, "backend_failed");
    assert.match(last.error.message, /stopped without finishing/);
    assert.equal((await s.served.result!).outcome, "error");
  });

  test("an event stream that throws is an SSE error", async () => {
    const s = await open(new Feed().push({ type: "text", text: "a" }).fail(new Error("kaboom")));
    const frames = await s.readUntil();
    const last = JSON.parse(frames.at(-1)!);
    assert.equal(last.error.code, "backend_failed");
    assert.match(last.error.message, /kaboom/);
    assert.ok(!frames.includes("[DONE]"));
    assert.equal((await s.served.result!).outcome, "error");
  });

  test("tool_call events → delta.tool_calls, id/type/name in each call's first chunk; finish_reason tool_calls", async () => {
    const feed = new Feed().push(
      { type: "text", text: "Let me check." },
      { type: "tool_call", index: 0, id: "callA1b2", name: "read", argumentsDelta: '{"path":' },
      { type: "tool_call", index: 0, argumentsDelta: '"a.txt"}' },
      { type: "tool_call", index: 1, id: "callC3d4", name: "web_search", argumentsDelta: "" },
      { type: "tool_call", index: 1, argumentsDelta: '{"query":"x"}' },
      { type: "done", finishReason: "stop" },
    );
    const s = await open(feed);
    const chunks = json(await s.readUntil());
    const deltas = chunks.filter((c) => c.choices[0]?.delta?.tool_calls).map((c) => c.choices[0].delta.tool_calls);
    assert.equal(deltas.length, 4);
    assert.ok(
      deltas.every((d) => d.length === 1),
      "one call per chunk",
    );
    assert.deepEqual(deltas[0][0], {
      index: 0,
      id: "callA1b2",
      type: "function",
      function: { name: "read", arguments: '{"path":' },
    });
    assert.deepEqual(deltas[1][0], { index: 0, function: { arguments: '"a.txt"}' } });
    assert.deepEqual(deltas[2][0], {
      index: 1,
      id: "callC3d4",
      type: "function",
      function: { name: "web_search", arguments: "" },
    });
    assert.deepEqual(deltas[3][0], { index: 1, function: { arguments: '{"query":"x"}' } });
    // Reassembled the way OpenClaw's client does it: appended by index.
    const calls: Array<{ id?: string; name?: string; args: string }> = [];
    for (const d of deltas)
      for (const tc of d) {
        calls[tc.index] ??= { args: "" };
        if (tc.id) calls[tc.index]!.id = tc.id;
        if (tc.function.name) calls[tc.index]!.name = tc.function.name;
        calls[tc.index]!.args += tc.function.arguments;
      }
    assert.deepEqual(calls, [
      { id: "callA1b2", name: "read", args: '{"path":"a.txt"}' },
      { id: "callC3d4", name: "web_search", args: '{"query":"x"}' },
    ]);
    assert.equal(chunks.at(-1).choices[0].finish_reason, "tool_calls", "stop + tool calls → tool_calls");
    assert.equal((await s.served.result!).finishReason, "tool_calls");
  });

  test("reasoning → delta.reasoning_content; session and tool_activity send nothing", async () => {
    const s = await open(
      new Feed().push(
        { type: "session", id: "ses_1" },
        { type: "reasoning", text: "hmm" },
        { type: "tool_activity", name: "bash", status: "started" },
        { type: "text", text: "answer" },
        { type: "tool_activity", name: "bash", status: "completed" },
        { type: "done", finishReason: "stop" },
      ),
    );
    const chunks = json(await s.readUntil());
    assert.deepEqual(
      chunks.map((c) => c.choices[0].delta),
      [{ role: "assistant", content: "" }, { reasoning_content: "hmm" }, { content: "answer" }, {}],
    );
    assert.equal((await s.served.result!).text, "answer", "reasoning is not answer text");
  });

  test("empty text events are not sent", async () => {
    const s = await open(
      new Feed().push({ type: "text", text: "" }, { type: "text", text: "a" }, { type: "done", finishReason: "stop" }),
    );
    const chunks = json(await s.readUntil());
    assert.equal(chunks.length, 3);
    await s.served.result;
  });

  test("nothing is written after done; the event stream is closed", async () => {
    const feed = new Feed().push({ type: "done", finishReason: "stop" }, { type: "text", text: "late" });
    const s = await open(feed);
    const frames = await s.readUntil();
    assert.equal(frames.at(-1), "[DONE]");
    assert.ok(!s.raw().includes("late"));
    await s.served.result;
    assert.ok(feed.returned);
  });

  test("a client that goes away: outcome client_gone and the event stream is closed (so the turn is released)", async () => {
    const feed = new Feed().push({ type: "text", text: "a" });
    const ac = new AbortController();
    const s = await open(feed, {}, ac.signal);
    await s.readUntil((f) => f.length >= 2);
    ac.abort();
    await s.served.closed;
    feed.push({ type: "text", text: "b" }, { type: "text", text: "c" });
    const r = await s.served.result!;
    assert.equal(r.outcome, "client_gone");
    assert.ok(feed.returned, "the backend's stream was told to stop");
  });
});

describe("collectCompletion (non-streaming) agrees with the SSE encoder", () => {
  test("text, tool calls and usage collected into one chat.completion", async () => {
    const r = await collectCompletion(
      new Feed().push(
        { type: "text", text: "a" },
        { type: "tool_call", index: 0, id: "c1", name: "read", argumentsDelta: "{}" },
        { type: "usage", usage: { promptTokens: 1, completionTokens: 2, totalTokens: 3 } },
        { type: "done", finishReason: "stop" },
      ),
      "m",
    );
    assert.ok(r.ok);
    const body = r.body as any;
    assert.equal(body.choices[0].finish_reason, "tool_calls");
    assert.deepEqual(body.choices[0].message.tool_calls, [
      { id: "c1", type: "function", function: { name: "read", arguments: "{}" } },
    ]);
    assert.deepEqual(body.usage, { prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 });
  });

  test("a stream without a terminal event is a failure", async () => {
    const r = await collectCompletion(new Feed().push({ type: "text", text: "half" }).end(), "m");
    assert.equal(r.ok, false);
    assert.ok(!r.ok && r.error.code === "backend_failed" && r.partialText === "half");
  });
});
