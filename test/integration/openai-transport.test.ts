/**
 * The openai backend's transport (issue 19: `UpstreamTurn` on undici's dispatch API, the body
 * decoded per chunk with an ASCII fast path) against a fake upstream that writes raw bytes, each
 * write its own read: text split inside a UTF-8 character, a truncated sequence, a byte-order mark
 * at the start of the body (dropped, as a TextDecoder does) and one in the middle (kept), a
 * non-streamed answer, and nothing sent for an event stream nobody reads.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import type http from "node:http";
import pino from "pino";
import { openaiBackend, openaiOptionsSchema } from "../../src/backends/openai/backend.js";
import type { Backend, BackendEvent, TurnInput } from "../../src/backends/contract/backend.js";
import type { ChatRequest } from "../../src/request/chat-api/schema.js";
import { Cancellation } from "../../src/core/util/cancel.js";
import { startFakeOpenAI, type FakeOpenAI } from "../../testkit/fakes/openai-api.js";

const backends: Backend[] = [];
function makeBackend(baseUrl: string): Backend {
  const b = openaiBackend.create("local", openaiOptionsSchema.parse({ baseUrl }), {
    logger: pino({ level: "silent" }),
    dataDir: "/tmp",
  });
  backends.push(b);
  return b;
}

function turn(stream = true): TurnInput {
  const request = {
    model: "client-model",
    messages: [{ role: "user" as const, content: "hello" }],
    stream,
  } as ChatRequest;
  const cancel = new Cancellation();
  return {
    model: "upstream-model",
    prompt: { system: "", text: "hello" },
    request,
    session: { key: "k", turn: 0 },
    cancel,
    get signal() {
      return cancel.signal;
    },
  };
}

async function collect(events: AsyncIterable<BackendEvent>): Promise<BackendEvent[]> {
  const out: BackendEvent[] = [];
  for await (const ev of events) out.push(ev);
  return out;
}
const text = (evs: BackendEvent[]) =>
  evs
    .filter((e): e is Extract<BackendEvent, { type: "text" }> => e.type === "text")
    .map((e) => e.text)
    .join("");

/** A step that writes `bytes` and waits a little, so that the next write is a separate read. */
const bytes =
  (b: Buffer) =>
  (res: http.ServerResponse): Promise<void> =>
    new Promise((r) => res.write(b, () => setTimeout(r, 15)));

const frame = (content: string, finish: string | null = null) =>
  `data: ${JSON.stringify({ id: "x", object: "chat.completion.chunk", created: 1, model: "m", choices: [{ index: 0, delta: { content }, finish_reason: finish }] })}\n\n`;

describe("openai backend transport", () => {
  let fake: FakeOpenAI;
  before(async () => {
    fake = await startFakeOpenAI();
  });
  after(async () => {
    for (const b of backends) await b.close?.();
    await fake.close();
  });

  it("a UTF-8 character split between two reads, after a byte-order mark that opens the body", async () => {
    const body = Buffer.concat([
      Buffer.from([0xef, 0xbb, 0xbf]),
      Buffer.from(frame("Grüße, 世界 🦀") + frame("", "stop") + "data: [DONE]\n\n"),
    ]);
    const cut = body.indexOf(Buffer.from("ü")) + 1; // inside the two bytes of "ü"
    const cut2 = body.indexOf(Buffer.from("🦀")) + 2; // inside the four bytes of the crab
    fake.setScript(() => ({
      kind: "steps",
      steps: [bytes(body.subarray(0, cut)), bytes(body.subarray(cut, cut2)), bytes(body.subarray(cut2))],
    }));
    const evs = await collect(makeBackend(fake.url).run(turn()));
    assert.equal(text(evs), "Grüße, 世界 🦀");
    assert.deepEqual(evs.at(-1), { type: "done", finishReason: "stop" });
  });

  it("a byte-order mark in the middle of the body is text (only the body's first one is dropped)", async () => {
    const head = 'data: {"choices":[{"index":0,"delta":{"content":"';
    fake.setScript(() => ({
      kind: "steps",
      steps: [
        bytes(Buffer.from(frame("a"))),
        bytes(Buffer.from(head)),
        // A read that starts with the three bytes of U+FEFF, after ASCII-only reads.
        bytes(Buffer.from('\uFEFFb"},"finish_reason":null}]}\n\n')),
        frame("", "stop"),
        "data: [DONE]\n\n",
      ],
    }));
    const evs = await collect(makeBackend(fake.url).run(turn()));
    assert.equal(text(evs), "a\uFEFFb");
  });

  it("a truncated UTF-8 sequence at the end of a read, followed by ASCII, becomes U+FFFD as with a TextDecoder", async () => {
    const head = 'data: {"choices":[{"index":0,"delta":{"content":"x';
    fake.setScript(() => ({
      kind: "steps",
      steps: [
        bytes(Buffer.concat([Buffer.from(head), Buffer.from([0xc3])])), // a lead byte whose continuation never comes
        bytes(Buffer.from('y"},"finish_reason":null}]}\n\n')),
        frame("z", "stop"),
        "data: [DONE]\n\n",
      ],
    }));
    const evs = await collect(makeBackend(fake.url).run(turn()));
    assert.equal(text(evs), "x\uFFFDyz");
  });

  it("a non-streamed answer goes through the same transport: one JSON body, translated once", async () => {
    fake.setScript(() => ({ kind: "text", chunks: ["one ", "two"] }));
    const evs = await collect(makeBackend(fake.url).run(turn(false)));
    assert.equal(text(evs), "one two");
    assert.deepEqual(evs.at(-1), { type: "done", finishReason: "stop" });
    assert.equal(fake.mainRequests().at(-1)!.body.stream, false);
  });

  it("nothing is sent for an event stream nobody reads; closing it is enough", async () => {
    fake.setScript(() => ({ kind: "text", chunks: ["x"] }));
    const before = fake.mainRequests().length;
    const it = makeBackend(fake.url).run(turn())[Symbol.asyncIterator]();
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(fake.mainRequests().length, before);
    assert.deepEqual(await it.return!(), { value: undefined, done: true });
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(fake.mainRequests().length, before);
  });
});
