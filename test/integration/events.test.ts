/**
 * `GET /v1/events` end to end: a real bridge on 127.0.0.1, turns sent with the official `openai`
 * client to a fake OpenAI upstream (the only faked part), a real command system run over HTTP, the
 * stream read with `eventsource-parser`. Checked: a turn's events in order with its tokens, a
 * failed, an aborted and a tool-call-extracting turn, the filters, replay with Last-Event-ID (no
 * gap, no duplicate), the ring bound, redaction on and off, 401 without or with a wrong key,
 * heartbeats, a raw socket that never reads dropped while memory stays bounded and others (and
 * turns) carry on, and a shutdown an open stream does not hold up.
 */
import assert from "node:assert/strict";
import net from "node:net";
import { after, before, describe, test } from "node:test";
import { createParser } from "eventsource-parser";
import OpenAI from "openai";
import { MAX_QUEUED_BYTES } from "../../src/ops/events/hub.js";
import { startFakeOpenAI, type FakeOpenAI, type Reply } from "../../testkit/fakes/openai-api.js";
import { contentPipeline } from "../../testkit/systems.js";
import { cleanup, eventually, startTestBridge, within, type TestBridge } from "../helpers/bridge.js";

const KEY = "events-test-key-0001";
const SECRET = "XYZZY-the-secret-prompt";

interface Ev {
  id?: number;
  event?: string;
  data: any; // eslint-disable-line @typescript-eslint/no-explicit-any
}

/** One `/v1/events` stream, read as it arrives. */
class EventStream {
  readonly events: Ev[] = [];
  readonly comments: string[] = [];
  raw = "";
  status = 0;
  contentType = "";
  ended = false;
  private readonly ctl = new AbortController();
  private done!: Promise<void>;

  static async open(b: TestBridge, query = "", headers: Record<string, string> = {}): Promise<EventStream> {
    const s = new EventStream();
    const res = await fetch(`${b.url}/v1/events${query}`, {
      headers: { authorization: `Bearer ${KEY}`, ...headers },
      signal: s.ctl.signal,
    });
    s.status = res.status;
    s.contentType = res.headers.get("content-type") ?? "";
    if (res.status !== 200) {
      s.raw = await res.text();
      s.ended = true;
      s.done = Promise.resolve();
      return s;
    }
    const parser = createParser({
      onEvent: (e) =>
        s.events.push({ id: e.id === undefined ? undefined : Number(e.id), event: e.event, data: JSON.parse(e.data) }),
      onComment: (c) => s.comments.push(c.trim()),
    });
    s.done = (async () => {
      const decoder = new TextDecoder();
      try {
        for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
          const text = decoder.decode(chunk, { stream: true });
          s.raw += text;
          parser.feed(text);
        }
      } catch {
        /* aborted */
      }
      s.ended = true;
    })();
    return s;
  }

  of(type: string): Ev[] {
    return this.events.filter((e) => e.event === type);
  }

  async waitFor(pred: (e: Ev) => boolean, what: string, ms = 10_000): Promise<Ev> {
    assert.ok(
      await eventually(() => this.events.some(pred), ms),
      `no ${what} on the stream; got ${this.events.map((e) => e.event).join(", ")}`,
    );
    return this.events.find(pred)!;
  }

  async close(): Promise<void> {
    this.ctl.abort();
    await this.done;
  }
}

const turnOf = (turnId: string) => (e: Ev) => e.data?.turnId === turnId;
const isEnd = (e: Ev) => e.event === "turn.completed" || e.event === "turn.failed" || e.event === "turn.aborted";

/** The fake upstream's answer by the person's words. */
function script(lastUser: string): Reply {
  if (lastUser.includes("please fail")) return { kind: "error", status: 400, message: `upstream refused: ${lastUser}` };
  if (lastUser.includes("please hang")) return { kind: "hang", afterChunks: ["partial answer"] };
  if (lastUser.includes("use tools")) {
    const call = (p: string) => `<tool_call>\n{"name": "read", "arguments": {"path": "${p}"}}\n</tool_call>\n`;
    return {
      kind: "text",
      chunks: ["Let me look.\n", call("/a"), call("/b")],
      usage: { prompt_tokens: 30, completion_tokens: 20 },
    };
  }
  return {
    kind: "text",
    chunks: ["You said: ", lastUser.slice(0, 40)],
    usage: { prompt_tokens: 42, completion_tokens: 7 },
  };
}

function bridgeConfig(up: FakeOpenAI, events: Record<string, unknown>, systems = true) {
  return {
    server: { apiKeys: [KEY], shutdownGraceSeconds: 1 },
    backends: { up: { type: "openai", baseUrl: up.url, apiKey: "x" } },
    models: [{ id: "m1", backend: "up" }],
    ...(systems ? { systems: [contentPipeline()] } : {}),
    events,
  };
}

async function startBridge(up: FakeOpenAI, events: Record<string, unknown>, systems = true): Promise<TestBridge> {
  return startTestBridge(bridgeConfig(up, events, systems), { systemsDb: ":memory:" });
}

const client = (b: TestBridge) => new OpenAI({ baseURL: b.baseURL, apiKey: KEY, maxRetries: 0, timeout: 20_000 });

/** One streamed turn in conversation `conv`; returns its request id (the turn id). */
async function streamedTurn(
  b: TestBridge,
  conv: string,
  text: string,
  tools?: OpenAI.ChatCompletionTool[],
): Promise<string> {
  const { data: stream, response } = await client(b)
    .chat.completions.create(
      { model: "m1", stream: true, messages: [{ role: "user", content: text }], ...(tools ? { tools } : {}) },
      { headers: { "x-session-id": conv } },
    )
    .withResponse();
  for await (const _ of stream) {
    /* read it all */
  }
  return response.headers.get("x-request-id")!;
}

async function startRun(b: TestBridge, conversation?: string): Promise<string> {
  const res = await fetch(`${b.url}/v1/systems/content-pipeline/runs`, {
    method: "POST",
    headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json" },
    body: JSON.stringify({
      inputs: { topic: `cats ${SECRET}`, tone: "casual" },
      ...(conversation ? { conversation } : {}),
    }),
  });
  assert.equal(res.status, 202, await res.clone().text());
  return ((await res.json()) as { id: string }).id;
}

let up: FakeOpenAI;
let b: TestBridge;
const dirs: string[] = [];

before(async () => {
  up = await startFakeOpenAI((req) => script(req.lastUser));
  b = await startBridge(up, { heartbeatSeconds: 0.2, ringSize: 500, maxQueued: 64 });
  dirs.push(b.dataDir);
});

after(async () => {
  await b?.close();
  await up?.close();
  for (const d of dirs) cleanup(d);
});

describe("/v1/events: access", () => {
  test("401 without a key and with a wrong key; 200 text/event-stream with the right one", async () => {
    for (const headers of [{}, { authorization: "Bearer wrong-key-0000" }] as Array<Record<string, string>>) {
      const res = await fetch(`${b.url}/v1/events`, { headers });
      assert.equal(res.status, 401);
      const body = (await res.json()) as { error: { code: string } };
      assert.equal(body.error.code, "invalid_api_key");
    }
    const s = await EventStream.open(b);
    assert.equal(s.status, 200);
    assert.match(s.contentType, /^text\/event-stream/);
    await s.close();
  });

  test("a bad filter or Last-Event-ID is 400 naming it", async () => {
    for (const [q, param] of [
      ["?types=turn.begun", "types"],
      ["?conversation=", "conversation"],
      ["?lastEventId=abc", "Last-Event-ID"],
    ]) {
      const s = await EventStream.open(b, q);
      assert.equal(s.status, 400, q);
      assert.equal(JSON.parse(s.raw).error.param, param);
    }
  });

  test("heartbeats: a comment line while nothing happens", async () => {
    const s = await EventStream.open(b, "?conversation=nobody-here");
    assert.ok(await eventually(() => s.comments.includes("heartbeat"), 5000), "no heartbeat");
    await s.close();
  });
});

describe("/v1/events: turns", () => {
  test("a streamed turn: started → firstByte → completed with its tokens, one turn id (x-request-id), ids increasing", async () => {
    const s = await EventStream.open(b, "?conversation=conv-order");
    const turnId = await streamedTurn(b, "conv-order", `hello ${SECRET}`);
    await s.waitFor((e) => e.event === "turn.completed" && e.data.turnId === turnId, "turn.completed");
    const evs = s.events.filter(turnOf(turnId));
    assert.deepEqual(
      evs.map((e) => e.event),
      ["turn.started", "turn.firstByte", "turn.completed"],
    );
    const [started, first, done] = evs as [Ev, Ev, Ev];
    assert.deepEqual(
      [started.data.model, started.data.backend, started.data.conversation, started.data.mode],
      ["m1", "up", "conv-order", "passthrough"],
    );
    assert.ok(started.data.queuedMs >= 0);
    assert.ok(first.data.ms >= 0 && done.data.ms >= first.data.ms);
    assert.equal(done.data.firstByteMs, first.data.ms);
    assert.equal(done.data.promptTokens, 42);
    assert.equal(done.data.completionTokens, 7);
    assert.equal(done.data.finishReason, "stop");
    assert.ok(started.id! < first.id! && first.id! < done.id!, "ids increase");
    assert.doesNotMatch(s.raw, new RegExp(SECRET), "no prompt text on the stream");
    await s.close();
  });

  test("a failed turn: turn.failed with its code, its message redacted; no firstByte", async () => {
    const s = await EventStream.open(b, "?conversation=conv-fail");
    await assert.rejects(
      client(b).chat.completions.create(
        { model: "m1", messages: [{ role: "user", content: `please fail ${SECRET}` }] },
        { headers: { "x-session-id": "conv-fail" } },
      ),
    );
    const failed = await s.waitFor((e) => e.event === "turn.failed", "turn.failed");
    assert.equal(typeof failed.data.code, "string");
    assert.match(failed.data.code, /^(backend_rejected|upstream_error|backend_failed)$/);
    assert.match(failed.data.message, /^\[redacted: \d+ chars\]$/);
    assert.deepEqual(
      s.events.filter(turnOf(failed.data.turnId)).map((e) => e.event),
      ["turn.started", "turn.failed"],
    );
    await s.close();
  });

  test("an aborted turn (the client goes away mid-answer): turn.aborted, reason client_gone", async () => {
    const s = await EventStream.open(b, "?conversation=conv-abort&types=turn.*");
    const ctl = new AbortController();
    const stream = await client(b).chat.completions.create(
      { model: "m1", stream: true, messages: [{ role: "user", content: "please hang" }] },
      { headers: { "x-session-id": "conv-abort" }, signal: ctl.signal },
    );
    // The SDK may end the iteration quietly or throw on abort: either way the client is gone.
    await (async () => {
      for await (const c of stream) if (c.choices[0]?.delta?.content) ctl.abort();
    })().catch(() => {});
    const aborted = await s.waitFor((e) => e.event === "turn.aborted", "turn.aborted");
    assert.equal(aborted.data.reason, "client_gone");
    assert.deepEqual(
      s.events.filter(turnOf(aborted.data.turnId)).map((e) => e.event),
      ["turn.started", "turn.firstByte", "turn.aborted"],
    );
    await s.close();
  });

  test("tool calls written as text: toolcalls.extracted with their count, before turn.completed", async () => {
    const s = await EventStream.open(b, "?conversation=conv-tools");
    const tools: OpenAI.ChatCompletionTool[] = [
      {
        type: "function",
        function: { name: "read", parameters: { type: "object", properties: { path: { type: "string" } } } },
      },
    ];
    const turnId = await streamedTurn(b, "conv-tools", "use tools please", tools);
    await s.waitFor((e) => e.event === "turn.completed" && e.data.turnId === turnId, "turn.completed");
    const x = s.of("toolcalls.extracted");
    assert.equal(x.length, 1);
    assert.deepEqual([x[0]!.data.count, x[0]!.data.model, x[0]!.data.backend], [2, "m1", "up"]);
    const done = s.of("turn.completed")[0]!;
    assert.ok(x[0]!.id! < done.id!);
    assert.equal(done.data.finishReason, "tool_calls");
    await s.close();
  });

  test("backend health: published on its first check, not again while unchanged", async () => {
    const s = await EventStream.open(b, "?types=backend.health", { "last-event-id": "0" });
    const health = async () => (await fetch(`${b.url}/health`, { headers: { authorization: `Bearer ${KEY}` } })).json();
    await health();
    const h = await s.waitFor((e) => e.data.backend === "up", "backend.health");
    assert.equal(h.data.usable, true);
    await health();
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(s.of("backend.health").length, 1);
    await s.close();
  });
});

describe("/v1/events: filters", () => {
  test("?conversation, ?types=turn.*,run.*, ?system each see only theirs", async () => {
    const byConv = await EventStream.open(b, "?conversation=conv-f1");
    const byType = await EventStream.open(b, "?types=turn.*,run.*");
    const bySystem = await EventStream.open(b, "?system=content-pipeline");
    const t1 = await streamedTurn(b, "conv-f1", "first");
    const t2 = await streamedTurn(b, "conv-f2", "second");
    const runId = await startRun(b, "conv-f1");
    for (const s of [byConv, byType, bySystem])
      await s.waitFor((e) => e.event === "run.completed" && e.data.runId === runId, "run.completed");
    await byType.waitFor((e) => e.event === "turn.completed" && e.data.turnId === t2, "turn.completed of conv-f2");

    // The conversation's turn and its run (steps included, matched through run.started), nothing of conv-f2.
    assert.ok(byConv.events.some(turnOf(t1)));
    assert.ok(!byConv.events.some(turnOf(t2)));
    assert.ok(byConv.events.some((e) => e.event === "step.completed" && e.data.runId === runId));
    assert.ok(byConv.events.every((e) => e.data.conversation === "conv-f1" || e.data.runId === runId));

    // turn.* and run.* of everyone, nothing else.
    assert.ok(
      byType.events.every((e) => /^(turn|run)\./.test(e.event!)),
      byType.events.map((e) => e.event).join(),
    );
    assert.ok(byType.events.some(turnOf(t1)) && byType.events.some(turnOf(t2)));
    assert.ok(byType.events.some((e) => e.event === "run.started" && e.data.runId === runId));
    assert.ok(!byType.events.some((e) => e.event?.startsWith("step.")));

    // The system's run and steps; no turn.
    assert.deepEqual([...new Set(bySystem.events.map((e) => e.event!.split(".")[0]))].sort(), ["run", "step"]);
    // The run's output text is redacted by default.
    const out = bySystem.of("run.output");
    assert.ok(out.length > 0, "the command's output is published");
    for (const o of out) assert.match(o.data.text, /^\[redacted: \d+ chars\]$/);
    assert.doesNotMatch(bySystem.raw, new RegExp(SECRET));
    for (const s of [byConv, byType, bySystem]) await s.close();
  });
});

describe("/v1/events: replay", () => {
  test("Last-Event-ID replays what was missed, then goes live: no gap, no duplicate (also ?lastEventId=)", async () => {
    const first = await EventStream.open(b);
    const t1 = await streamedTurn(b, "conv-replay", "one");
    const end1 = await first.waitFor((e) => isEnd(e) && e.data.turnId === t1, "turn end");
    await first.close();
    // Missed while disconnected.
    const t2 = await streamedTurn(b, "conv-replay", "two");
    for (const how of ["header", "query"] as const) {
      const s =
        how === "header"
          ? await EventStream.open(b, "", { "last-event-id": String(end1.id) })
          : await EventStream.open(b, `?lastEventId=${end1.id}`);
      await s.waitFor((e) => e.event === "turn.completed" && e.data.turnId === t2, "the missed turn");
      // And live.
      const t3 = await streamedTurn(b, "conv-replay", `three ${how}`);
      await s.waitFor((e) => e.event === "turn.completed" && e.data.turnId === t3, "the live turn");
      const ids = s.events.map((e) => e.id!);
      assert.equal(ids[0], end1.id! + 1, "starts right after the id given");
      ids.forEach((id, i) => assert.equal(id, ids[0]! + i, `consecutive (${ids.join(",")})`));
      assert.equal(s.of("gap").length, 0);
      await s.close();
    }
  });

  test("the ring keeps ringSize events: an older id gets `gap`, then the last ringSize", async () => {
    const small = await startBridge(up, { ringSize: 5 }, false);
    dirs.push(small.dataDir);
    try {
      for (let i = 0; i < 3; i++) await streamedTurn(small, "conv-ring", `ring ${i}`);
      assert.equal(small.events.stats().lastId >= 9, true);
      const last = small.events.stats().lastId;
      const s = await EventStream.open(small, "", { "last-event-id": "1" });
      await s.waitFor((e) => e.id === last, "the last event");
      assert.equal(s.events[0]!.event, "gap");
      assert.deepEqual(
        s.events.slice(1).map((e) => e.id),
        [last - 4, last - 3, last - 2, last - 1, last],
      );
      await s.close();
    } finally {
      await small.close();
    }
  });
});

describe("/v1/events: includeText, a slow consumer, shutdown", () => {
  let big: TestBridge;
  before(async () => {
    big = await startBridge(up, { includeText: true, maxQueued: 32, heartbeatSeconds: 60 });
    dirs.push(big.dataDir);
  });
  after(async () => {
    await big?.close();
  });

  test("includeText: true streams prompts' fates, error messages and run output as they are", async () => {
    const s = await EventStream.open(big);
    await assert.rejects(
      client(big).chat.completions.create({
        model: "m1",
        messages: [{ role: "user", content: `please fail ${SECRET}` }],
      }),
    );
    const failed = await s.waitFor((e) => e.event === "turn.failed", "turn.failed");
    assert.match(failed.data.message, new RegExp(SECRET));
    const runId = await startRun(big);
    await s.waitFor((e) => e.event === "run.completed" && e.data.runId === runId, "run.completed");
    assert.ok(s.of("run.output").some((o) => o.data.text.includes(`post about cats ${SECRET}`)));
    await s.close();
  });

  test("a raw socket that never reads is dropped; queues stay bounded; another watcher and turns carry on", async () => {
    const watcher = await EventStream.open(big, "?types=run.output");
    const sock = net.connect(big.port, "127.0.0.1");
    await new Promise<void>((r, j) => sock.once("connect", r).once("error", j));
    let closed = false;
    let received = "";
    sock.on("close", () => (closed = true));
    sock.on("error", () => {});
    sock.on("data", (d) => (received += d.toString("utf8")));
    sock.write(`GET /v1/events?types=run.output HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${KEY}\r\n\r\n`);
    assert.ok(await eventually(() => received.includes("retry: 3000"), 5000), "the raw stream started");
    sock.pause(); // never reads again: the kernel buffers fill, then the bridge's queue
    const before = big.events.stats();
    assert.equal(before.subscribers, 2);

    const text = "z".repeat(16 * 1024);
    let sent = 0;
    let maxQueued = 0;
    let maxBytes = 0;
    // At most ~160 MB; in practice it is dropped after a few MB of socket buffers.
    for (let round = 0; round < 10_000 && big.events.stats().dropped === before.dropped; round++) {
      for (let i = 0; i < 8; i++) big.bus.emit({ type: "run.output", runId: "run-flood", text });
      sent += 8;
      const st = big.events.stats();
      maxQueued = Math.max(maxQueued, st.queued);
      maxBytes = Math.max(maxBytes, st.queuedBytes);
      await new Promise((r) => setImmediate(r));
      if (round % 50 === 0) await new Promise((r) => setTimeout(r, 5)); // let the watcher read
    }
    const st = big.events.stats();
    assert.equal(st.dropped, before.dropped + 1, "the slow socket was dropped");
    assert.equal(st.subscribers, 1);
    assert.ok(maxQueued <= 2 * 33, `queued events stayed bounded (${maxQueued})`);
    assert.ok(maxBytes <= MAX_QUEUED_BYTES + text.length * 2, `queued bytes stayed bounded (${maxBytes})`);

    // Let it read now: what reaches it ends with the `dropped` frame, then the connection closes.
    sock.resume();
    assert.ok(await eventually(() => closed, 5000), "the slow socket was closed");
    assert.match(
      received.slice(-300),
      /event: dropped\ndata: \{.*\}\n\n\r\n0\r\n\r\n$/,
      "the last frame, then the chunked body's end",
    );

    // The other watcher got every event, in order.
    assert.ok(
      await eventually(
        () => watcher.of("run.output").filter((e) => e.data.runId === "run-flood").length === sent,
        20_000,
      ),
      "the watcher got every event",
    );
    const ids = watcher.of("run.output").map((e) => e.id!);
    ids.forEach((id, i) => i && assert.ok(id > ids[i - 1]!));
    // And turns are not held up.
    const t0 = Date.now();
    await streamedTurn(big, "conv-after-flood", "still there?");
    assert.ok(Date.now() - t0 < 5000);
    await watcher.close();
    sock.destroy();
  });

  test("shutdown: open streams (one that reads, one that does not) end with `shutdown` and do not hold close() up", async () => {
    // A bridge of its own: only these connections are open when it closes.
    const own = await startBridge(up, {}, false);
    dirs.push(own.dataDir);
    const s = await EventStream.open(own);
    const sock = net.connect(own.port, "127.0.0.1");
    sock.on("error", () => {});
    await new Promise<void>((r) => sock.once("connect", r));
    sock.write(`GET /v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${KEY}\r\n\r\n`);
    assert.ok(await eventually(() => own.events.stats().subscribers === 2, 5000));
    sock.pause();
    const t0 = Date.now();
    await within(own.close(), 4000, "bridge.close() with open event streams");
    assert.ok(Date.now() - t0 < 4000);
    assert.ok(await eventually(() => s.ended, 3000), "the stream ended");
    assert.equal(s.events.at(-1)?.event, "shutdown");
    sock.destroy();
  });
});
