/**
 * How the SSE encoder (writeSse) writes (issue 19): the frames produced in one tick leave in one
 * `write()`, the last frames go out with `end()` itself, and the role chunk is written at once,
 * before the backend says anything. Driven with a recording stand-in for the response (the bytes
 * a client sees are tested through a real server in encoder.test.ts).
 */
import assert from "node:assert/strict";
import type { ServerResponse } from "node:http";
import { describe, test } from "node:test";
import type { BackendEvent } from "../../src/backends/contract/backend.js";
import { writeSse } from "../../src/request/encoder/sse.js";

/** A response that records each call: `write` and `end` with their data. */
function recorder() {
  const calls: Array<{ call: "write" | "end"; data: string }> = [];
  const res = {
    destroyed: false,
    writableEnded: false,
    writeHead() {
      return res;
    },
    write(data: string) {
      calls.push({ call: "write", data });
      return true;
    },
    end(data?: string) {
      calls.push({ call: "end", data: data ?? "" });
      res.writableEnded = true;
      return res;
    },
  };
  return { res: res as unknown as ServerResponse, calls };
}

/** An event stream whose events come when the test releases them. */
function gate() {
  const queue: BackendEvent[] = [];
  let wake: (() => void) | undefined;
  const feed: AsyncIterable<BackendEvent> = {
    [Symbol.asyncIterator]: () => ({
      async next() {
        for (let i = 0; i < 1000 && queue.length === 0; i++) await new Promise<void>((r) => (wake = r));
        return { value: queue.shift()!, done: false };
      },
      async return() {
        return { value: undefined, done: true };
      },
    }),
  };
  return {
    feed,
    push(...evs: BackendEvent[]) {
      queue.push(...evs);
      wake?.();
    },
  };
}

const frames = (data: string) => data.split("\n\n").filter(Boolean);
const tick = () => new Promise((r) => setImmediate(r));
const opts = { model: "m", includeUsage: true, heartbeatMs: 60_000 };

describe("writeSse: writes", () => {
  test("the role chunk is written at once, before any event", async () => {
    const { res, calls } = recorder();
    const g = gate();
    const done = writeSse(res, g.feed, opts);
    await tick();
    assert.equal(calls.length, 1);
    assert.equal(calls[0]!.call, "write");
    assert.match(calls[0]!.data, /^data: \{.*"delta":\{"role":"assistant","content":""\}/);
    g.push({ type: "done", finishReason: "stop" });
    await done;
  });

  test("the frames of one tick leave in one write; the last frames with end()", async () => {
    const { res, calls } = recorder();
    const g = gate();
    const done = writeSse(res, g.feed, opts);
    await tick(); // the role chunk
    g.push({ type: "text", text: "a" }, { type: "text", text: "b" }, { type: "text", text: "c" });
    await tick();
    assert.equal(calls.length, 2, "one write for the three frames");
    assert.deepEqual(
      frames(calls[1]!.data).map((f) => JSON.parse(f.slice(6)).choices[0].delta.content),
      ["a", "b", "c"],
    );
    g.push(
      { type: "text", text: "d" },
      { type: "usage", usage: { promptTokens: 1, completionTokens: 2, totalTokens: 3 } },
      { type: "done", finishReason: "stop" },
    );
    const r = await done;
    assert.equal(calls.length, 3);
    assert.equal(calls[2]!.call, "end", "the last frames are the end's data");
    const last = frames(calls[2]!.data);
    assert.equal(last.length, 4, "content, finish, usage, [DONE]");
    assert.equal(JSON.parse(last[0]!.slice(6)).choices[0].delta.content, "d");
    assert.equal(JSON.parse(last[1]!.slice(6)).choices[0].finish_reason, "stop");
    assert.deepEqual(JSON.parse(last[2]!.slice(6)).usage, { prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 });
    assert.equal(last[3], "data: [DONE]");
    assert.equal(r.text, "abcd");
  });

  test("content frames are byte for byte what the general frame builder makes", async () => {
    const { res, calls } = recorder();
    const g = gate();
    const done = writeSse(res, g.feed, opts);
    const text = 'quote " backslash \\ newline \n tab \t unicode é 🦀 </script> \u2028';
    g.push({ type: "text", text }, { type: "done", finishReason: "stop" });
    await done;
    const all = calls.map((c) => c.data).join("");
    const chunks = frames(all)
      .filter((f) => f !== "data: [DONE]")
      .map((f) => JSON.parse(f.slice(6)));
    const content = chunks.find((c) => c.choices[0]?.delta?.content === text);
    assert.ok(content, "the text survives serialisation");
    assert.deepEqual(Object.keys(content), ["id", "object", "created", "model", "choices"]);
    assert.deepEqual(content.choices[0], { index: 0, delta: { content: text }, logprobs: null, finish_reason: null });
  });

  test("an error ends the response in the same write as its frame", async () => {
    const { res, calls } = recorder();
    const g = gate();
    const done = writeSse(res, g.feed, opts);
    g.push(
      { type: "text", text: "partial" },
      { type: "error", error: { code: "upstream_error", message: "boom", status: 502 } },
    );
    const r = await done;
    assert.equal(r.outcome, "error");
    const end = calls.at(-1)!;
    assert.equal(end.call, "end");
    assert.match(end.data, /"content":"partial".*\n\ndata: \{"error":\{"message":"boom"/s);
    assert.equal(calls.filter((c) => c.call === "end").length, 1);
  });
});
