/**
 * EventHub (src/ops/events/hub.ts, with filter.ts and redact.ts): increasing ids and SSE frames,
 * the bounded ring and replay after an id (no gap, no duplicate, a `gap` frame when events are
 * gone), filters (conversation, run — step events matched through their run.started —, system,
 * type prefixes), the redaction rule and `includeText`, a subscriber that stops draining dropped
 * while memory stays bounded and others keep receiving, a draining one never dropped for a burst,
 * heartbeats, and close; `instance` in every event's data; and with a shared log (in memory here,
 * PostgreSQL in cluster-events.test.ts): events numbered by the log, a Last-Event-ID not read yet,
 * an unknown id or a log that cannot be read.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { EventBus, type NewEvent } from "../../src/ops/events/bus.js";
import { FilterError, parseFilter, type EventFilter } from "../../src/ops/events/filter.js";
import {
  EventHub,
  type EventLog,
  type EventSink,
  type HubOptions,
  type LogEntry,
  type LogPage,
} from "../../src/ops/events/hub.js";
import { MAX_TEXT_CHARS, redact } from "../../src/ops/events/redact.js";

/** Past the hub's batching (flushMs 1 here). */
const settle = () => new Promise((r) => setTimeout(r, 5));

interface Frame {
  id?: number;
  event?: string;
  data?: any; // eslint-disable-line @typescript-eslint/no-explicit-any
  comment?: string;
}

/** A sink that records what it was given; `draining: false` makes every write report a full buffer. */
class FakeSink implements EventSink {
  chunks: string[] = [];
  ended = false;
  last?: string;
  drainFns: Array<() => void> = [];
  constructor(public draining = true) {}
  write(chunk: string): boolean {
    this.chunks.push(chunk);
    return this.draining;
  }
  onDrain(fn: () => void): void {
    this.drainFns.push(fn);
  }
  end(last?: string): void {
    this.ended = true;
    this.last = last;
  }
  drain(): void {
    this.draining = true;
    const fns = this.drainFns;
    this.drainFns = [];
    for (const f of fns) f();
  }
  frames(): Frame[] {
    return parseFrames(this.chunks.join("") + (this.last ?? ""));
  }
  events(): Frame[] {
    return this.frames().filter((f) => f.event !== undefined);
  }
}

function parseFrames(text: string): Frame[] {
  const out: Frame[] = [];
  for (const block of text.split("\n\n")) {
    if (!block) continue;
    const f: Frame = {};
    for (const line of block.split("\n")) {
      if (line.startsWith(":")) f.comment = line.slice(1).trim();
      else if (line.startsWith("id: ")) f.id = Number(line.slice(4));
      else if (line.startsWith("event: ")) f.event = line.slice(7);
      else if (line.startsWith("data: ")) f.data = JSON.parse(line.slice(6));
    }
    out.push(f);
  }
  return out;
}

function hub(opts: Partial<HubOptions> = {}) {
  const bus = new EventBus((err) => {
    throw err;
  });
  const h = new EventHub(bus, {
    ringSize: 100,
    includeText: false,
    maxQueued: 50,
    heartbeatMs: 0,
    flushMs: 1,
    ...opts,
  });
  return { bus, hub: h };
}

const turnStarted = (turnId: string, conversation = "c1"): NewEvent => ({
  type: "turn.started",
  turnId,
  conversation,
  model: "m",
  backend: "b",
  mode: "stateless",
  queuedMs: 0,
});

describe("ids, frames, ring and replay", () => {
  test("every event gets the next id and one frame `id / event / data`", async () => {
    const { bus, hub: h } = hub();
    const sink = new FakeSink();
    h.subscribe(sink);
    bus.emit(turnStarted("t1"));
    bus.emit({ type: "backend.health", backend: "b", usable: true, detail: "ok" });
    await settle();
    const evs = sink.events();
    assert.deepEqual(
      evs.map((f) => [f.id, f.event, f.data.type]),
      [
        [1, "turn.started", "turn.started"],
        [2, "backend.health", "backend.health"],
      ],
    );
    assert.equal(typeof evs[0]!.data.at, "number");
    assert.match(sink.chunks[0]!, /^retry: 3000\n/);
    // The two events of one tick left in one write.
    assert.equal(sink.chunks.length, 2);
  });

  test("with `instance`, every event's data names the bridge that published it (redacted or with includeText)", async () => {
    for (const includeText of [false, true]) {
      const { bus, hub: h } = hub({ instance: "host-1:42", includeText });
      const sink = new FakeSink();
      h.subscribe(sink);
      bus.emit(turnStarted("t1"));
      bus.emit({ type: "run.output", runId: "r", step: "s", text: "hi" });
      await settle();
      assert.deepEqual(
        sink.events().map((f) => f.data.instance),
        ["host-1:42", "host-1:42"],
      );
    }
  });

  test("replay after an id: exactly the later events, then live ones, no gap and no duplicate", async () => {
    const { bus, hub: h } = hub();
    for (let i = 1; i <= 10; i++) bus.emit(turnStarted(`t${i}`));
    const sink = new FakeSink();
    h.subscribe(sink, {}, 6);
    bus.emit(turnStarted("t11"));
    await settle();
    assert.deepEqual(
      sink.events().map((f) => f.id),
      [7, 8, 9, 10, 11],
    );
    assert.equal(
      sink.events().some((f) => f.event === "gap"),
      false,
    );
  });

  test("the ring keeps the last ringSize events; an older id gets a gap frame, then what is kept", async () => {
    const { bus, hub: h } = hub({ ringSize: 5 });
    for (let i = 1; i <= 12; i++) bus.emit(turnStarted(`t${i}`));
    assert.equal(h.stats().ring, 5);
    const sink = new FakeSink();
    h.subscribe(sink, {}, 2);
    const evs = sink.events();
    assert.equal(evs[0]!.event, "gap");
    assert.deepEqual(evs[0]!.data, { lastEventId: 2, oldest: 8, lastId: 12 });
    assert.deepEqual(
      evs.slice(1).map((f) => f.id),
      [8, 9, 10, 11, 12],
    );
    // An id right before the oldest kept is not a gap.
    const s2 = new FakeSink();
    h.subscribe(s2, {}, 7);
    assert.deepEqual(
      s2.events().map((f) => f.id),
      [8, 9, 10, 11, 12],
    );
  });

  test("an id from an earlier bridge (larger than any here) gets a gap frame and the whole ring", () => {
    const { bus, hub: h } = hub();
    for (let i = 1; i <= 3; i++) bus.emit(turnStarted(`t${i}`));
    const sink = new FakeSink();
    h.subscribe(sink, {}, 500);
    assert.deepEqual(
      sink.events().map((f) => (f.event === "gap" ? "gap" : f.id)),
      ["gap", 1, 2, 3],
    );
  });

  test("without an id nothing is replayed", async () => {
    const { bus, hub: h } = hub();
    bus.emit(turnStarted("t1"));
    const sink = new FakeSink();
    h.subscribe(sink);
    bus.emit(turnStarted("t2"));
    await settle();
    assert.deepEqual(
      sink.events().map((f) => f.id),
      [2],
    );
  });
});

describe("filters", () => {
  const sample = (bus: EventBus) => {
    bus.emit(turnStarted("t1", "c1"));
    bus.emit(turnStarted("t2", "c2"));
    bus.emit({ type: "run.started", runId: "r1", system: "blog", conversation: "c1" });
    bus.emit({ type: "step.started", runId: "r1", step: "draft", attempt: 1 });
    bus.emit({ type: "run.started", runId: "r2", system: "news", conversation: "c2" });
    bus.emit({ type: "step.completed", runId: "r2", step: "fetch", ms: 3 });
    bus.emit({
      type: "node.created",
      system: "blog",
      node: { id: "n1", type: "agent", label: "Writer", properties: {}, position: { x: 0, y: 0 } },
    });
    bus.emit({ type: "backend.health", backend: "b", usable: false, detail: "down" });
    bus.emit({ type: "run.completed", runId: "r1", system: "blog", ms: 9 });
  };
  const seen = async (filter: EventFilter) => {
    const { bus, hub: h } = hub();
    const sink = new FakeSink();
    h.subscribe(sink, filter);
    sample(bus);
    await settle();
    return sink.events().map((f) => `${f.event}:${f.data.turnId ?? f.data.runId ?? f.data.system ?? f.data.backend}`);
  };

  test("?conversation= also takes the steps of runs started in that conversation", async () => {
    assert.deepEqual(await seen(parseFilter({ conversation: "c1" })), [
      "turn.started:t1",
      "run.started:r1",
      "step.started:r1",
      "run.completed:r1",
    ]);
  });
  test("?run=", async () => {
    assert.deepEqual(await seen(parseFilter({ run: "r2" })), ["run.started:r2", "step.completed:r2"]);
  });
  test("?system= takes run steps and canvas events", async () => {
    assert.deepEqual(await seen(parseFilter({ system: "blog" })), [
      "run.started:r1",
      "step.started:r1",
      "node.created:blog",
      "run.completed:r1",
    ]);
  });
  test("?types= exact types and prefixes (turn.*,node.*), comma lists and repeats", async () => {
    assert.deepEqual(await seen(parseFilter({ types: "turn.*,node.*" })), [
      "turn.started:t1",
      "turn.started:t2",
      "node.created:blog",
    ]);
    assert.deepEqual(await seen(parseFilter({ types: ["backend.health", "run.completed"] })), [
      "backend.health:b",
      "run.completed:r1",
    ]);
  });
  test("filters are ANDed", async () => {
    assert.deepEqual(await seen(parseFilter({ conversation: "c2", types: "step.*" })), ["step.completed:r2"]);
  });
  test("a bad filter names its parameter", () => {
    assert.throws(
      () => parseFilter({ types: "turn.begun" }),
      (e: unknown) => e instanceof FilterError && e.param === "types",
    );
    // Release 0.1.0's names are refused with what they are called now.
    for (const old of ["execution:stepComplete", "node:*"])
      assert.throws(
        () => parseFilter({ types: old }),
        (e: unknown) => e instanceof FilterError && /execution:\* events are now run\.\* and step\.\*/.test(e.message),
      );
    assert.throws(
      () => parseFilter({ types: "nothing.*" }),
      (e: unknown) => e instanceof FilterError && e.param === "types",
    );
    assert.throws(
      () => parseFilter({ conversation: "" }),
      (e: unknown) => e instanceof FilterError && e.param === "conversation",
    );
    assert.deepEqual(parseFilter({}), {});
  });
  test("replay honours the filter", () => {
    const { bus, hub: h } = hub();
    sample(bus);
    const sink = new FakeSink();
    h.subscribe(sink, parseFilter({ types: "run.*" }), 0);
    assert.deepEqual(
      sink.events().map((f) => f.id),
      [3, 5, 9],
    );
  });
});

const R = (n: number) => `[redacted: ${n} chars]`;

describe("redaction", () => {
  test("a fallback keeps its models, backends and reason code; a limit's own words are replaced", () => {
    const fb = {
      type: "turn.fallback" as const,
      at: 1,
      turnId: "req_1",
      conversation: "c",
      model: "claude",
      fromModel: "claude",
      fromBackend: "cc",
      to: "gemini",
      toBackend: "gm",
      reason: "limit_reached",
      resetAt: 2,
    };
    assert.deepEqual(redact(fb), fb);
    assert.deepEqual(
      redact({ type: "backend.limited", at: 1, backend: "cc", message: "You've hit your limit", until: 3 }),
      { type: "backend.limited", at: 1, backend: "cc", message: R(21), until: 3 },
    );
  });

  test("free text is replaced; ids, names, statuses, codes and numbers are kept", () => {
    assert.deepEqual(
      redact({
        type: "turn.failed",
        at: 1,
        turnId: "req_1",
        conversation: "c",
        model: "m",
        backend: "b",
        ms: 5,
        code: "upstream_error",
        message: "upstream said: my secret prompt",
      }),
      {
        type: "turn.failed",
        at: 1,
        turnId: "req_1",
        conversation: "c",
        model: "m",
        backend: "b",
        ms: 5,
        code: "upstream_error",
        message: R(31),
      },
    );
    assert.deepEqual(redact({ type: "run.output", at: 1, runId: "r", step: "s", text: "hello" }), {
      type: "run.output",
      at: 1,
      runId: "r",
      step: "s",
      text: R(5),
    });
    assert.deepEqual(
      redact({
        type: "decision",
        at: 1,
        conversation: "c",
        action: "run",
        system: "blog",
        confidence: 0.9,
        source: "classifier",
        reason: "the person asked: write about X",
      }).reason,
      R(31),
    );
    assert.deepEqual(
      redact({
        type: "gathering",
        at: 1,
        conversation: "c",
        system: "blog",
        collected: ["topic"],
        missing: ["tone"],
        round: 1,
      }).collected,
      ["topic"],
    );
    assert.equal(
      redact({
        type: "turn.aborted",
        at: 1,
        turnId: "t",
        conversation: "c",
        model: "m",
        backend: "b",
        ms: 1,
        reason: "client_gone",
      }).reason,
      "client_gone",
    );
    assert.equal(
      redact({
        type: "intent.executed",
        at: 1,
        conversation: "c",
        model: "m",
        tools: ["web_search"],
        ok: false,
        ms: 3,
        error: "web_search: no results for 'x'",
      }).error,
      R("web_search: no results for 'x'".length),
    );
    assert.deepEqual(
      redact({ type: "intent.executed", at: 1, conversation: "c", model: "m", tools: ["web_search"], ok: false, ms: 3 })
        .tools,
      ["web_search"],
    );
    assert.equal(
      redact({
        type: "session.healed",
        at: 1,
        conversation: "c",
        backend: "b",
        reason: "No conversation found with session ID abc",
      }).reason,
      R(41),
    );
  });

  test("step errors are replaced whole; node properties keep their names, numbers and booleans", () => {
    const out = redact({
      type: "step.failed",
      at: 1,
      runId: "b1",
      system: "s",
      origin: "builder",
      step: "st",
      error: "abc",
      ms: 2,
    });
    assert.equal(out.error, R(3));
    assert.equal(out.origin, "builder");
    const node = redact({
      type: "node.updated",
      at: 1,
      system: "s",
      key: "prompt",
      node: {
        id: "n1",
        type: "agent",
        label: "Writer",
        position: { x: 1, y: 2 },
        properties: {
          prompt: "Write about ${inputs.topic}",
          system: "You are terse",
          headers: { authorization: "Bearer sk-1" },
          setEnv: { TOKEN: "t" },
          temperature: 0.2,
          stream: true,
        },
      },
    }).node as Record<string, unknown>;
    assert.deepEqual(node, {
      id: "n1",
      type: "agent",
      label: "Writer",
      position: { x: 1, y: 2 },
      properties: {
        prompt: R(27),
        system: R(13),
        headers: R(JSON.stringify({ authorization: "Bearer sk-1" }).length),
        setEnv: R(JSON.stringify({ TOKEN: "t" }).length),
        temperature: 0.2,
        stream: true,
      },
    });
  });

  test("the hub redacts unless includeText; with it long strings are cut", async () => {
    for (const includeText of [false, true]) {
      const { bus, hub: h } = hub({ includeText });
      const sink = new FakeSink();
      h.subscribe(sink);
      bus.emit({ type: "run.output", runId: "r", text: "the secret words" });
      bus.emit({ type: "run.output", runId: "r", text: "x".repeat(MAX_TEXT_CHARS + 10) });
      await settle();
      const [a, b] = sink.events().map((f) => f.data.text as string);
      if (includeText) {
        assert.equal(a, "the secret words");
        assert.equal(b, `${"x".repeat(MAX_TEXT_CHARS)}…[+10 chars]`);
      } else {
        assert.equal(a, R(16));
        assert.equal(b, R(MAX_TEXT_CHARS + 10));
        assert.doesNotMatch(sink.chunks.join(""), /secret/);
      }
    }
  });
});

describe("frames made on first use", () => {
  test("turn events published while nobody watches replay redacted, with their ids, once made the same for every watcher", () => {
    const { bus, hub: h } = hub();
    bus.emit(turnStarted("t1"));
    bus.emit({
      type: "turn.failed",
      turnId: "t1",
      conversation: "c1",
      model: "m",
      backend: "b",
      ms: 5,
      code: "backend_failed",
      message: "quoting the secret prompt",
    });
    const first = new FakeSink();
    const second = new FakeSink();
    h.subscribe(first, {}, 0);
    h.subscribe(second, {}, 0);
    const frames = first.events();
    assert.deepEqual(
      frames.map((f) => [f.id, f.event]),
      [
        [1, "turn.started"],
        [2, "turn.failed"],
      ],
    );
    assert.equal(frames[1]!.data.message, R("quoting the secret prompt".length));
    assert.equal(frames[1]!.data.code, "backend_failed");
    assert.doesNotMatch(first.chunks.join(""), /secret/);
    assert.equal(second.chunks.join(""), first.chunks.join(""));
  });

  test("an event holding arrays is serialised when published: a later change by its publisher never shows", () => {
    const { bus, hub: h } = hub();
    const collected = ["city"];
    const missing = ["date"];
    bus.emit({ type: "gathering", conversation: "c1", system: "trip", collected, missing, round: 1 });
    collected.push("changed-after");
    missing.length = 0;
    const sink = new FakeSink();
    h.subscribe(sink, {}, 0);
    const [frame] = sink.events();
    assert.deepEqual(frame!.data.collected, ["city"]);
    assert.deepEqual(frame!.data.missing, ["date"]);
  });
});

describe("slow subscribers, heartbeats, close", () => {
  test("a subscriber that stops draining is dropped past maxQueued; memory stays bounded; others keep receiving", async () => {
    const { bus, hub: h } = hub({ maxQueued: 20 });
    const slow = new FakeSink();
    const fast = new FakeSink();
    h.subscribe(slow);
    h.subscribe(fast);
    bus.emit(turnStarted("t0"));
    await settle();
    slow.draining = false; // its next write fills the buffer
    let maxQueued = 0;
    for (let i = 1; i <= 200; i++) {
      bus.emit(turnStarted(`t${i}`));
      maxQueued = Math.max(maxQueued, h.stats().queued);
      if (i % 10 === 0) await settle();
    }
    await settle();
    assert.equal(slow.ended, true, "the slow subscriber was dropped");
    const last = parseFrames(slow.last ?? "");
    assert.equal(last[0]!.event, "dropped");
    assert.ok(maxQueued <= 21 + 10, `queued stayed bounded (${maxQueued})`);
    assert.equal(h.stats().subscribers, 1);
    assert.equal(h.stats().dropped, 1);
    assert.equal(fast.events().length, 201, "the other subscriber got every event");
    const n = slow.chunks.length;
    bus.emit(turnStarted("t-after"));
    await settle();
    assert.equal(slow.chunks.length, n, "nothing more is written to a dropped subscriber");
  });

  test("a byte budget drops a blocked subscriber too", async () => {
    const { bus, hub: h } = hub({ maxQueued: 10_000, maxQueuedBytes: 10_000, includeText: true });
    const slow = new FakeSink(false);
    h.subscribe(slow);
    for (let i = 0; i < 20; i++) bus.emit({ type: "run.output", runId: "r", text: "y".repeat(1000) });
    assert.equal(slow.ended, true);
    assert.ok(h.stats().queuedBytes === 0 && h.stats().subscribers === 0);
  });

  test("a subscriber that drains is never dropped for a burst larger than maxQueued, and resumes after a drain", async () => {
    const { bus, hub: h } = hub({ maxQueued: 10 });
    const sink = new FakeSink();
    h.subscribe(sink);
    for (let i = 1; i <= 100; i++) bus.emit(turnStarted(`t${i}`));
    await settle();
    assert.equal(sink.ended, false);
    assert.equal(sink.events().length, 100);
    // Blocked for a while, then drained: what waited is written in order.
    sink.draining = false;
    bus.emit(turnStarted("a"));
    await settle();
    for (const t of ["b", "c", "d"]) bus.emit(turnStarted(t));
    await settle();
    assert.equal(h.stats().queued, 3);
    sink.drain();
    assert.deepEqual(
      sink
        .events()
        .slice(-4)
        .map((f) => f.data.turnId),
      ["a", "b", "c", "d"],
    );
  });

  test("heartbeats are comment lines, sent while nothing else is", async () => {
    const { hub: h } = hub({ heartbeatMs: 20 });
    const sink = new FakeSink();
    const sub = h.subscribe(sink);
    await new Promise((r) => setTimeout(r, 90));
    sub.close();
    assert.ok(sink.frames().filter((f) => f.comment === "heartbeat").length >= 2);
    const n = sink.chunks.length;
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(sink.chunks.length, n, "no heartbeat after close");
  });

  test("close writes what is queued, ends every stream with `shutdown` and stops listening", async () => {
    const { bus, hub: h } = hub();
    const sink = new FakeSink();
    h.subscribe(sink);
    bus.emit(turnStarted("t1"));
    h.close();
    assert.equal(sink.ended, true);
    assert.deepEqual(
      sink.events().map((f) => f.event),
      ["turn.started", "shutdown"],
    );
    assert.equal(bus.listenerCount, 0);
    assert.throws(() => h.subscribe(new FakeSink()));
  });
});

/** A log in memory for the hub's side of the contract (the PostgreSQL one: test/unit/cluster-events.test.ts). */
class MemoryLog implements EventLog {
  appended: LogEntry[] = [];
  rows: LogEntry[] = [];
  down = false;
  append(entry: LogEntry): void {
    this.appended.push(entry);
  }
  /** Numbers what was appended (from `next`) and returns it, as the log gives it back. */
  commit(next: number): LogEntry[] {
    const out = this.appended.splice(0).map((e, i) => ({ ...e, id: next + i }));
    this.rows.push(...out);
    return out;
  }
  async read(after: number, upTo: number, limit: number): Promise<LogPage> {
    if (this.down) throw new Error("connection refused");
    const events = this.rows.filter((r) => r.id! > after && r.id! <= upTo).slice(0, limit);
    return { events, oldest: this.rows[0]?.id, newest: this.rows.at(-1)?.id };
  }
}

describe("with a shared log (several instances)", () => {
  test("bus events go to the log (redacted, with their run's conversation), and are streamed under the log's ids once it gives them back", async () => {
    const log = new MemoryLog();
    const { bus, hub: h } = hub({ log, instance: "i1" });
    const sink = new FakeSink();
    h.subscribe(sink);
    bus.emit({ type: "run.started", runId: "r1", system: "blog", conversation: "c9" });
    bus.emit({ type: "run.output", runId: "r1", step: "s", text: "secret words" });
    await settle();
    assert.equal(sink.events().length, 0, "nothing streamed before the log numbers it");
    assert.deepEqual(
      log.appended.map((e) => [e.type, e.conversation, e.system, e.runId, JSON.parse(e.data).instance]),
      [
        ["run.started", "c9", "blog", "r1", "i1"],
        ["run.output", "c9", "blog", "r1", "i1"],
      ],
    );
    assert.match(log.appended[1]!.data, /"text":"\[redacted: 12 chars\]"/);
    for (const e of log.commit(41)) h.ingest(e);
    h.ingest({ ...log.rows[0]!, id: 41 }); // given twice: once only
    await settle();
    assert.deepEqual(
      sink.events().map((f) => [f.id, f.event]),
      [
        [41, "run.started"],
        [42, "run.output"],
      ],
    );
    h.ingest({ type: "turn.started", at: 1, data: '{"type":"turn.started"}' });
    await settle();
    assert.deepEqual(
      sink.events()[2],
      { event: "turn.started", data: { type: "turn.started" } },
      "not kept by the log: no id",
    );
    assert.equal(h.stats().lastId, 42);
  });

  test("Last-Event-ID this instance has not read yet: nothing until the log's later ids, no duplicate", async () => {
    const log = new MemoryLog();
    const { bus, hub: h } = hub({ log, ringSize: 3 });
    for (let i = 1; i <= 3; i++) bus.emit(turnStarted(`t${i}`));
    const [e1, e2, e3] = log.commit(1);
    h.ingest(e1!);
    const sink = new FakeSink();
    h.subscribe(sink, {}, 2);
    h.ingest(e2!);
    h.ingest(e3!);
    await settle();
    assert.deepEqual(
      sink.events().map((f) => f.id),
      [3],
    );
  });

  test("an id the log never gave, or a log that cannot be read: `gap` (with the reason), the ring, then live", async () => {
    for (const down of [false, true]) {
      const log = new MemoryLog();
      const { bus, hub: h } = hub({ log, ringSize: 2 });
      for (let i = 1; i <= 4; i++) bus.emit(turnStarted(`t${i}`));
      for (const e of log.commit(1)) h.ingest(e);
      log.down = down;
      const sink = new FakeSink();
      h.subscribe(sink, {}, down ? 1 : 99);
      await settle();
      bus.emit(turnStarted("t5"));
      for (const e of log.commit(5)) h.ingest(e);
      await settle();
      const [gap, ...rest] = sink.events();
      assert.equal(gap!.event, "gap");
      assert.match(gap!.data.reason, down ? /could not be read \(connection refused\)/ : /never gave/);
      assert.deepEqual(
        rest.map((f) => f.id),
        [3, 4, 5],
      );
    }
  });
});

describe("config: events", () => {
  const base = { backends: { oc: { type: "opencode" } }, models: [{ id: "m", backend: "oc" }] };
  test("defaults, and each key checked with its name", async () => {
    const { resolveConfig, ConfigError } = await import("../../src/core/config/load.js");
    assert.deepEqual(resolveConfig(base, "t").events, {
      ringSize: 1000,
      includeText: false,
      heartbeatSeconds: 15,
      maxQueued: 1000,
    });
    assert.deepEqual(resolveConfig({ ...base, events: { ringSize: 5, includeText: true } }, "t").events, {
      ringSize: 5,
      includeText: true,
      heartbeatSeconds: 15,
      maxQueued: 1000,
    });
    assert.throws(
      () => resolveConfig({ ...base, events: { ringSize: 0, heartbeatSecs: 3 } }, "t"),
      (e: unknown) => e instanceof ConfigError && /events\.ringSize/.test(e.message) && /heartbeatSecs/.test(e.message),
    );
  });
});
