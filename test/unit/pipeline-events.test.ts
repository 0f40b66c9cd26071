/**
 * What the chat pipeline publishes on the bus (src/request/pipeline/turn-events.ts, chat.ts, resume.ts),
 * with a scripted in-memory backend: a turn's started → firstByte → completed with its usage and
 * finish reason; failed with its code; aborted by its client or by the shutdown; a deadline as a
 * failure; extracted tool calls counted; a hand-over named; queue refusals; resume heals and
 * resets; tool pre-execution; and nothing made when nobody listens.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { Backend, BackendEvent, BackendHealth, TurnInput } from "../../src/backends/contract/backend.js";
import { resolveConfig } from "../../src/core/config/load.js";
import { EventBus } from "../../src/ops/events/bus.js";
import type { BridgeEvent } from "../../src/wire/events.js";
import { DebugLog } from "../../src/core/log/debug-log.js";
import { createLogger } from "../../src/core/log/logger.js";
import { chatRequestSchema, type ChatRequest } from "../../src/request/chat-api/schema.js";
import { ChatPipeline, type Enricher } from "../../src/request/pipeline/chat.js";
import { QueueRejected, TurnScheduler } from "../../src/request/queue/scheduler.js";
import type { Route } from "../../src/request/models/routes.js";
import { openSessionStore } from "../../src/core/store/index.js";
import { Cancellation } from "../../src/core/util/cancel.js";

type Script = (turn: TurnInput) => AsyncGenerator<BackendEvent>;

class ScriptedBackend implements Backend {
  readonly type = "scripted";
  private readonly scripts: Script[] = [];
  dispatch?: Backend["dispatch"];
  constructor(
    readonly name = "scripted",
    readonly timeoutSeconds?: number,
  ) {}
  then(...scripts: Script[]): this {
    this.scripts.push(...scripts);
    return this;
  }
  run(turn: TurnInput): AsyncIterable<BackendEvent> {
    const script = this.scripts.shift();
    if (!script) throw new Error("no script left for this turn");
    return script(turn);
  }
  async health(): Promise<BackendHealth> {
    return { usable: true, detail: "scripted" };
  }
}

function aborted(turn: TurnInput, ms = 5000): Promise<void> {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error("never cancelled")), ms);
    turn.cancel.onAbort(() => {
      clearTimeout(t);
      resolve();
    });
  });
}

const request = (text: string): ChatRequest =>
  chatRequestSchema.parse({ model: "m", messages: [{ role: "user", content: text }] });

async function rig(
  opts: {
    mode?: "stateless" | "resume";
    backend?: ScriptedBackend;
    bus?: EventBus | null;
    listen?: boolean;
    enricher?: Enricher;
    sched?: { maxConcurrent: number; maxQueue: number; queueTimeoutMs: number };
  } = {},
) {
  const mode = opts.mode ?? "stateless";
  const cfg = resolveConfig(
    {
      dataDir: "/tmp/clawbridge-pipeline-events-test",
      backends: { cc: { type: "claude-code" } },
      models: [
        { id: "m", backend: "cc", session: { mode } },
        { id: "m2", backend: "cc", session: { mode: "stateless" } },
      ],
    },
    "test",
  );
  const bus = opts.bus === null ? undefined : (opts.bus ?? new EventBus());
  const seen: BridgeEvent[] = [];
  if (opts.listen !== false) bus?.on((e) => seen.push(e));
  const backend = opts.backend ?? new ScriptedBackend();
  const other = new ScriptedBackend("other");
  const store = await openSessionStore({ kind: "memory" });
  const scheduler = new TurnScheduler(opts.sched ?? { maxConcurrent: 4, maxQueue: 8, queueTimeoutMs: 2000 });
  const route: Route = { model: cfg.models[0]!, backend };
  const route2: Route = { model: cfg.models[1]!, backend: other };
  const pipeline = new ChatPipeline({
    config: cfg,
    scheduler,
    logger: createLogger("silent"),
    debugLog: new DebugLog(null),
    store,
    bus,
    enricher: opts.enricher,
    resolveModel: (id) => (id === "m2" ? route2 : undefined),
  });
  const turn = async (key: string, text: string, cancel = new Cancellation(), onEvent?: (ev: BackendEvent) => void) => {
    const p = await pipeline.prepare(
      { request: request(text), route, conversation: { key, source: "header" } },
      cancel,
    );
    const out: BackendEvent[] = [];
    for await (const ev of p.events) {
      out.push(ev);
      onEvent?.(ev);
    }
    return { requestId: p.requestId, events: out };
  };
  return { pipeline, backend, other, store, seen, turn, route };
}

const types = (evs: BridgeEvent[]) => evs.map((e) => e.type);
const ofType = <T extends BridgeEvent["type"]>(evs: BridgeEvent[], t: T) =>
  evs.filter((e): e is Extract<BridgeEvent, { type: T }> => e.type === t);

describe("turn events", () => {
  test("started → firstByte → completed, with the turn id, usage and finish reason", async () => {
    const r = await rig();
    r.backend.then(async function* () {
      yield { type: "text", text: "" }; // empty text is not a first byte
      yield { type: "reasoning", text: "hmm" };
      yield { type: "text", text: "hello" };
      yield { type: "usage", usage: { promptTokens: 11, completionTokens: 4, totalTokens: 15 } };
      yield { type: "done", finishReason: "length" };
    });
    const { requestId } = await r.turn("c1", "hi");
    assert.deepEqual(types(r.seen), ["turn.started", "turn.firstByte", "turn.completed"]);
    const [started, first, done] = r.seen as [
      Extract<BridgeEvent, { type: "turn.started" }>,
      Extract<BridgeEvent, { type: "turn.firstByte" }>,
      Extract<BridgeEvent, { type: "turn.completed" }>,
    ];
    for (const e of [started, first, done])
      assert.deepEqual([e.turnId, e.conversation, e.model, e.backend], [requestId, "c1", "m", "scripted"]);
    assert.equal(started.mode, "stateless");
    assert.equal(done.firstByteMs, first.ms);
    assert.deepEqual(
      [done.promptTokens, done.completionTokens, done.finishReason, done.answeredBy],
      [11, 4, "length", undefined],
    );
  });

  test("a backend error: turn.failed with its code and message, no firstByte", async () => {
    const r = await rig();
    r.backend.then(async function* () {
      yield { type: "error", error: { code: "upstream_error", message: "model refused", status: 400 } };
    });
    await r.turn("c1", "hi");
    assert.deepEqual(types(r.seen), ["turn.started", "turn.failed"]);
    const f = ofType(r.seen, "turn.failed")[0]!;
    assert.deepEqual([f.code, f.message], ["upstream_error", "model refused"]);
  });

  test("the deadline is a failure (backend_timeout), not an abort", async () => {
    const r = await rig({ backend: new ScriptedBackend("slow", 0.05) });
    r.backend.then(async function* (turn) {
      await aborted(turn);
      yield { type: "error", error: { code: "aborted", message: "cancelled" } };
    });
    await r.turn("c1", "hi");
    assert.equal(ofType(r.seen, "turn.failed")[0]?.code, "backend_timeout");
  });

  test("the client goes away: turn.aborted, reason client_gone; the shutdown: reason shutdown", async () => {
    const r = await rig();
    const stopWhenCancelled: Script = async function* (turn) {
      yield { type: "text", text: "working" };
      await aborted(turn);
      yield { type: "error", error: { code: "aborted", message: "cancelled" } };
    };
    r.backend.then(stopWhenCancelled, stopWhenCancelled);
    const cancel = new Cancellation();
    await r.turn("c1", "hi", cancel, (ev) => ev.type === "text" && cancel.abort());
    assert.equal(ofType(r.seen, "turn.aborted")[0]?.reason, "client_gone");

    const p = await r.pipeline.prepare(
      { request: request("again"), route: r.route, conversation: { key: "c2", source: "header" } },
      new Cancellation(),
    );
    const running = (async () => {
      for await (const _ of p.events) {
        /* read */
      }
    })();
    await new Promise((res) => setImmediate(res));
    await r.pipeline.drain(0);
    await running;
    assert.equal(ofType(r.seen, "turn.aborted")[1]?.reason, "shutdown");
  });

  test("calls the backend extracted from text are counted (toolcalls.extracted before turn.completed); native ones are not", async () => {
    const r = await rig();
    r.backend.then(async function* () {
      yield { type: "tool_call", index: 0, id: "call1", name: "read", argumentsDelta: "{}", extracted: true };
      yield { type: "tool_call", index: 1, id: "call2", name: "read", argumentsDelta: "{", extracted: true };
      yield { type: "tool_call", index: 2, id: "call3", name: "write", argumentsDelta: "{" };
      yield { type: "tool_call", index: 2, argumentsDelta: "}" };
      yield { type: "done", finishReason: "tool_calls" };
    });
    await r.turn("c1", "hi");
    assert.deepEqual(types(r.seen), ["turn.started", "turn.firstByte", "toolcalls.extracted", "turn.completed"]);
    const x = ofType(r.seen, "toolcalls.extracted")[0]!;
    assert.deepEqual([x.count, x.model, x.backend], [2, "m", "scripted"]);
  });

  test("a hand-over is named: answeredBy, and the extracting backend is the one that answered", async () => {
    const r = await rig();
    r.backend.dispatch = async () => ({ kind: "handover", model: "m2" });
    r.other.then(async function* () {
      yield { type: "tool_call", index: 0, id: "c1", name: "read", argumentsDelta: "{}", extracted: true };
      yield { type: "done", finishReason: "tool_calls" };
    });
    await r.turn("c1", "hi");
    const done = ofType(r.seen, "turn.completed")[0]!;
    assert.deepEqual([done.model, done.backend, done.answeredBy], ["m", "scripted", "m2"]);
    const x = ofType(r.seen, "toolcalls.extracted")[0]!;
    assert.deepEqual([x.model, x.backend], ["m2", "other"]);
  });

  test("nobody listening: the turn runs and nothing is published (no bus, or a bus without listeners)", async () => {
    const r = await rig({ bus: null });
    r.backend.then(async function* () {
      yield { type: "text", text: "hi" };
      yield { type: "done", finishReason: "stop" };
    });
    assert.equal((await r.turn("c1", "hi")).events.length, 3); // text, counted usage, done
    const bus = new EventBus();
    let calls = 0;
    const emit = bus.emit.bind(bus);
    bus.emit = (e) => {
      calls++;
      emit(e);
    };
    const r2 = await rig({ bus, listen: false });
    r2.backend.then(async function* () {
      yield { type: "text", text: "hi" };
      yield { type: "done", finishReason: "stop" };
    });
    await r2.turn("c1", "hi");
    assert.equal(calls, 0);
  });
});

describe("queue, resume and pre-execution events", () => {
  test("a full queue: queue.rejected with its scope", async () => {
    const r = await rig({ sched: { maxConcurrent: 1, maxQueue: 0, queueTimeoutMs: 1000 } });
    const holder = new Cancellation();
    r.backend.then(async function* (turn) {
      await aborted(turn);
      yield { type: "error", error: { code: "aborted", message: "cancelled" } };
    });
    const first = await r.pipeline.prepare(
      { request: request("one"), route: r.route, conversation: { key: "a", source: "header" } },
      holder,
    );
    const running = (async () => {
      for await (const _ of first.events) {
        /* read */
      }
    })();
    await assert.rejects(
      r.pipeline.prepare(
        { request: request("two"), route: r.route, conversation: { key: "b", source: "header" } },
        new Cancellation(),
      ),
      QueueRejected,
    );
    holder.abort();
    await running;
    const q = ofType(r.seen, "queue.rejected");
    assert.equal(q.length, 1);
    assert.deepEqual([q[0]!.conversation, q[0]!.model, q[0]!.scope], ["b", "m", "bridge"]);
  });

  test("resume: session.healed when a lost session is replaced", async () => {
    const r = await rig({ mode: "resume" });
    r.backend.then(async function* () {
      yield { type: "session", id: "s-old" };
      yield { type: "text", text: "one" };
      yield { type: "done", finishReason: "stop" };
    });
    await r.turn("k", "hello");
    r.backend.then(
      async function* () {
        yield {
          type: "error",
          error: { code: "session_not_found", message: "No conversation found with session ID: s-old" },
        };
      },
      async function* () {
        yield { type: "session", id: "s-new" };
        yield { type: "text", text: "two" };
        yield { type: "done", finishReason: "stop" };
      },
    );
    await r.turn("k", "again");
    const h = ofType(r.seen, "session.healed");
    assert.equal(h.length, 1);
    assert.deepEqual(
      [h[0]!.conversation, h[0]!.backend, h[0]!.reason],
      ["k", "scripted", "No conversation found with session ID: s-old"],
    );
    assert.equal(ofType(r.seen, "turn.completed").length, 2, "the healed turn completes");
  });

  test("resume: session.reset when an interrupted turn is retried", async () => {
    const r = await rig({ mode: "resume" });
    r.backend.then(async function* () {
      yield { type: "session", id: "s-1" };
      yield { type: "text", text: "one" };
      yield { type: "done", finishReason: "stop" };
    });
    await r.turn("k", "hello");
    const cancel = new Cancellation();
    r.backend.then(async function* (turn) {
      yield { type: "text", text: "working" };
      await aborted(turn);
      yield { type: "error", error: { code: "aborted", message: "cancelled" } };
    });
    await r.turn("k", "long job", cancel, (ev) => ev.type === "text" && cancel.abort());
    r.backend.then(async function* () {
      yield { type: "session", id: "s-2" };
      yield { type: "text", text: "done" };
      yield { type: "done", finishReason: "stop" };
    });
    await r.turn("k", "long job");
    const reset = ofType(r.seen, "session.reset");
    assert.equal(reset.length, 1);
    assert.deepEqual([reset[0]!.conversation, reset[0]!.backend], ["k", "scripted"]);
  });

  test("tool pre-execution: intent.executed with the tools, ok, ms and the error", async () => {
    let mode: "ok" | "failed" | "throws" | "nothing" = "ok";
    const enricher: Enricher = async (_text, _route, _signal, _log, report) => {
      if (mode === "nothing") return [];
      if (mode === "throws") throw new Error("search engine down");
      report?.(
        mode === "ok"
          ? { tools: ["web_search"], ok: true }
          : { tools: ["fetch_url"], ok: false, error: "fetch_url: 404" },
      );
      return mode === "ok" ? [{ title: "LIVE WEB SEARCH RESULTS", body: "…" }] : [];
    };
    const r = await rig({ enricher });
    const ok: Script = async function* () {
      yield { type: "text", text: "hi" };
      yield { type: "done", finishReason: "stop" };
    };
    r.backend.then(ok, ok, ok, ok);
    for (const m of ["ok", "failed", "throws", "nothing"] as const) {
      mode = m;
      await r.turn("c1", "what is new today");
    }
    const x = ofType(r.seen, "intent.executed");
    assert.deepEqual(
      x.map((e) => [e.tools, e.ok, e.error]),
      [
        [["web_search"], true, undefined],
        [["fetch_url"], false, "fetch_url: 404"],
        [[], false, "search engine down"],
      ],
    );
    for (const e of x) assert.ok(e.ms >= 0 && e.conversation === "c1" && e.model === "m");
    // Before the turn's model answered: each intent.executed comes between its turn.started and turn.firstByte.
    const order = types(r.seen).filter(
      (t) => t === "intent.executed" || t === "turn.started" || t === "turn.firstByte",
    );
    assert.deepEqual(order.slice(0, 3), ["turn.started", "intent.executed", "turn.firstByte"]);
  });
});
