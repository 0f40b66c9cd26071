/**
 * The chat pipeline on its own: a scripted in-memory backend (it stands where a CLI or an upstream
 * would) and the real session store on an in-memory SQLite database. No process, no socket: these
 * run in milliseconds. What is checked is the pipeline's own work: the backend contract, counted
 * usage, resume binding and healing, the interrupted-turn reset, abort, the turn deadline, the
 * queue's typed refusals and drain; and, with a real PostgreSQL, the conversation's lock across
 * instances (two pipelines on two pools stand for two bridges).
 */
import assert from "node:assert/strict";
import { after, afterEach, before, beforeEach, describe, test } from "node:test";
import type { Backend, BackendEvent, BackendHealth, TurnInput } from "../../src/backends/contract/backend.js";
import { resolveConfig } from "../../src/core/config/load.js";
import type { Config } from "../../src/core/config/schema.js";
import type { Conversation } from "../../src/request/identity/conversation.js";
import { DebugLog } from "../../src/core/log/debug-log.js";
import { createLogger } from "../../src/core/log/logger.js";
import { chatRequestSchema, type ChatRequest } from "../../src/request/chat-api/schema.js";
import { ChatPipeline } from "../../src/request/pipeline/chat.js";
import { QueueRejected, TurnScheduler, WaitAborted } from "../../src/request/queue/scheduler.js";
import type { Route } from "../../src/request/models/routes.js";
import { openSessionStore, type SessionStore } from "../../src/core/store/index.js";
import { Cancellation } from "../../src/core/util/cancel.js";
import { PostgresDb } from "../../src/core/db/postgres.js";
import { PgConversationLocks, type ConversationLocks } from "../../src/request/queue/conversation-locks.js";
import { freshSchema } from "../helpers/pg-schema.js";
import { startPostgres, type TestPostgres } from "../../testkit/postgres.js";

type Script = (turn: TurnInput) => AsyncGenerator<BackendEvent>;

/** A backend that answers each turn with the next script, and keeps every input it was given. */
class ScriptedBackend implements Backend {
  readonly type = "scripted";
  readonly inputs: TurnInput[] = [];
  private readonly scripts: Script[] = [];
  constructor(
    readonly name = "scripted",
    readonly timeoutSeconds?: number,
  ) {}
  then(...scripts: Script[]): this {
    this.scripts.push(...scripts);
    return this;
  }
  run(turn: TurnInput): AsyncIterable<BackendEvent> {
    this.inputs.push(turn);
    const script = this.scripts.shift();
    if (!script) throw new Error("no script left for this turn");
    return script(turn);
  }
  async health(): Promise<BackendHealth> {
    return { usable: true, detail: "scripted" };
  }
}

/** Resolves when `cancel` aborts (bounded: a test that never aborts fails instead of hanging). */
function aborted(turn: TurnInput, ms = 5000): Promise<void> {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error("never cancelled")), ms);
    turn.cancel.onAbort(() => {
      clearTimeout(t);
      resolve();
    });
  });
}

const answer = (text: string, opts: { session?: string; usage?: boolean } = {}): Script =>
  async function* () {
    if (opts.session) yield { type: "session", id: opts.session };
    yield { type: "text", text };
    if (opts.usage) yield { type: "usage", usage: { promptTokens: 7, completionTokens: 3, totalTokens: 10 } };
    yield { type: "done", finishReason: "stop" };
  };

function config(mode: "stateless" | "resume"): Config {
  return resolveConfig(
    {
      dataDir: "/tmp/clawbridge-pipeline-test",
      backends: { cc: { type: "claude-code" } },
      models: [{ id: "m", backend: "cc", session: { mode } }],
    },
    "test",
  );
}

const request = (text: string, earlier: ChatRequest["messages"] = []): ChatRequest =>
  chatRequestSchema.parse({
    model: "m",
    messages: [{ role: "system", content: "You are helpful." }, ...earlier, { role: "user", content: text }],
  });

const conv = (key: string): Conversation => ({ key, source: "header" });

async function collect(events: AsyncIterable<BackendEvent>): Promise<BackendEvent[]> {
  const out: BackendEvent[] = [];
  for await (const ev of events) {
    out.push(ev);
    if (out.length > 1000) throw new Error("too many events");
  }
  return out;
}

const terminal = (evs: BackendEvent[]) => evs.filter((e) => e.type === "done" || e.type === "error");
const errorOf = (evs: BackendEvent[]) =>
  evs.find((e): e is Extract<BackendEvent, { type: "error" }> => e.type === "error")?.error;
const textOf = (evs: BackendEvent[]) => evs.flatMap((e) => (e.type === "text" ? [e.text] : [])).join("");

interface Rig {
  pipeline: ChatPipeline;
  scheduler: TurnScheduler;
  store: SessionStore;
  backend: ScriptedBackend;
  route: Route;
  /** One whole turn of conversation `key`. */
  turn(key: string, req: ChatRequest, cancel?: Cancellation): Promise<BackendEvent[]>;
}

async function rig(
  mode: "stateless" | "resume",
  backend = new ScriptedBackend(),
  sched = { maxConcurrent: 4, maxQueue: 8, queueTimeoutMs: 2000 },
  locks?: ConversationLocks,
): Promise<Rig> {
  const cfg = config(mode);
  cfg.server.queueTimeoutSeconds = sched.queueTimeoutMs / 1000;
  const store = await openSessionStore({ kind: "memory" });
  const scheduler = new TurnScheduler(sched);
  const pipeline = new ChatPipeline({
    config: cfg,
    scheduler,
    logger: createLogger("silent"),
    debugLog: new DebugLog(null),
    store,
    ...(locks ? { locks } : {}),
  });
  const route: Route = { model: cfg.models[0]!, backend };
  return {
    pipeline,
    scheduler,
    store,
    backend,
    route,
    async turn(key, req, cancel = new Cancellation()) {
      const prepared = await pipeline.prepare({ request: req, route, conversation: conv(key) }, cancel);
      return collect(prepared.events);
    },
  };
}

let r: Rig;

/** A turn whose client goes away once the backend has started answering. */
async function interrupted(key: string, req: ChatRequest): Promise<void> {
  const cancel = new Cancellation();
  r.backend.then(async function* (turn) {
    yield { type: "text", text: "working on it…" };
    await aborted(turn);
    yield { type: "error", error: { code: "aborted", message: "the turn was cancelled", status: 499 } };
  });
  const prepared = await r.pipeline.prepare({ request: req, route: r.route, conversation: conv(key) }, cancel);
  for await (const ev of prepared.events) if (ev.type === "text") cancel.abort();
}
afterEach(async () => {
  assert.equal(r.pipeline.activeTurns, 0, "every turn ended");
  assert.equal(r.scheduler.stats().running, 0, "every slot released");
  await r.store.close();
});

describe("pipeline: the backend contract", () => {
  beforeEach(async () => (r = await rig("stateless")));

  test("a backend that throws ends the turn with one backend_failed error, and the slot is released", async () => {
    r.backend.then(async function* () {
      yield { type: "text", text: "partial " };
      throw new Error("parser exploded");
    }, answer("next turn works"));
    const evs = await r.turn("c1", request("hi"));
    assert.deepEqual(terminal(evs), [evs.at(-1)]);
    assert.equal(errorOf(evs)?.code, "backend_failed");
    assert.match(errorOf(evs)!.message, /scripted.*parser exploded/);
    assert.equal(errorOf(evs)?.status, 502);
    assert.equal(
      textOf(await r.turn("c1", request("again"))),
      "next turn works",
      "the conversation is not left locked",
    );
  });

  test("a backend that throws before yielding anything is an error event too", async () => {
    r.backend.then(() => {
      throw new Error("cannot start");
    });
    const evs = await r.turn("c1", request("hi"));
    assert.equal(evs.length, 1);
    assert.equal(errorOf(evs)?.code, "backend_failed");
  });

  test("a backend that ends without a terminal event gets one error, never an empty success", async () => {
    r.backend.then(async function* () {
      yield { type: "text", text: "half an answer" };
    });
    const evs = await r.turn("c1", request("hi"));
    assert.deepEqual(
      evs.map((e) => e.type),
      ["text", "error"],
    );
    assert.match(errorOf(evs)!.message, /ended without an answer/);
  });

  test("a backend that sends two terminal events: the first ends the turn, nothing after it passes", async () => {
    let after = false;
    r.backend.then(async function* () {
      yield { type: "text", text: "ok" };
      yield { type: "usage", usage: { promptTokens: 1, completionTokens: 1, totalTokens: 2 } };
      yield { type: "done", finishReason: "stop" };
      after = true;
      yield { type: "error", error: { code: "backend_failed", message: "late" } };
      yield { type: "text", text: "ghost" };
    });
    const evs = await r.turn("c1", request("hi"));
    assert.deepEqual(
      evs.map((e) => e.type),
      ["text", "usage", "done"],
    );
    assert.equal(after, false, "the backend is not read past its terminal event");
  });

  test("a backend that reports no usage gets counted usage, marked estimated, before done", async () => {
    r.backend.then(answer("The capital of Estonia is Tallinn."));
    const evs = await r.turn("c1", request("What is the capital of Estonia?"));
    const types = evs.map((e) => e.type);
    assert.deepEqual(types, ["text", "usage", "done"]);
    const usage = (evs[1] as Extract<BackendEvent, { type: "usage" }>).usage;
    assert.equal(usage.estimated, true);
    assert.ok(usage.promptTokens > 5, `prompt counted: ${usage.promptTokens}`);
    assert.ok(
      usage.completionTokens >= 7 && usage.completionTokens <= 12,
      `completion counted: ${usage.completionTokens}`,
    );
    assert.equal(usage.totalTokens, usage.promptTokens + usage.completionTokens);
  });

  test("reported usage is passed on as it is, and nothing is counted", async () => {
    r.backend.then(answer("hello", { usage: true }));
    const evs = await r.turn("c1", request("hi"));
    const usages = evs.filter((e) => e.type === "usage");
    assert.equal(usages.length, 1);
    assert.deepEqual((usages[0] as Extract<BackendEvent, { type: "usage" }>).usage, {
      promptTokens: 7,
      completionTokens: 3,
      totalTokens: 10,
    });
  });

  test("a stateless turn gives the backend the compact prompt, the conversation key and turn 0", async () => {
    r.backend.then(answer("ok"));
    await r.turn(
      "c9",
      request("second question", [
        { role: "user", content: "first question" },
        { role: "assistant", content: "first answer" },
      ]),
    );
    const input = r.backend.inputs[0]!;
    assert.equal(input.session.key, "c9");
    assert.equal(input.session.turn, 0);
    assert.equal(input.session.backendSessionId, undefined);
    assert.match(input.prompt.text, /first question[\s\S]*first answer[\s\S]*second question/);
  });
});

describe("pipeline: abort and deadline", () => {
  test("abort in the middle of a turn: the backend sees it, the turn ends with aborted, the slot is free", async () => {
    r = await rig("stateless");
    const cancel = new Cancellation();
    r.backend.then(async function* (turn) {
      yield { type: "text", text: "thinking…" };
      await aborted(turn);
      yield { type: "error", error: { code: "aborted", message: "the turn was cancelled", status: 499 } };
    }, answer("after"));
    const prepared = await r.pipeline.prepare(
      { request: request("long job"), route: r.route, conversation: conv("c1") },
      cancel,
    );
    const seen: BackendEvent[] = [];
    for await (const ev of prepared.events) {
      seen.push(ev);
      if (ev.type === "text") cancel.abort();
    }
    assert.deepEqual(
      seen.map((e) => e.type),
      ["text", "error"],
    );
    assert.equal(errorOf(seen)?.code, "aborted");
    assert.equal(r.pipeline.activeTurns, 0);
    assert.equal(textOf(await r.turn("c1", request("next"))), "after");
  });

  test("a consumer that stops reading early releases the turn", async () => {
    r = await rig("stateless");
    let closed = false;
    r.backend.then(async function* () {
      try {
        yield { type: "text", text: "a" };
        yield { type: "text", text: "b" };
        yield { type: "done", finishReason: "stop" };
      } finally {
        closed = true;
      }
    });
    const prepared = await r.pipeline.prepare(
      { request: request("hi"), route: r.route, conversation: conv("c1") },
      new Cancellation(),
    );
    for await (const ev of prepared.events) if (ev.type === "text") break;
    assert.equal(closed, true, "the backend's generator was closed");
  });

  test("the turn deadline is the pipeline's: a backend that only stops when cancelled ends with backend_timeout", async () => {
    r = await rig("stateless", new ScriptedBackend("slowpoke", 0.05));
    let reason: unknown;
    r.backend.then(async function* (turn) {
      await aborted(turn);
      reason = turn.cancel.reason;
      yield { type: "error", error: { code: "aborted", message: "the turn was cancelled", status: 499 } };
    });
    const evs = await r.turn("c1", request("hi"));
    assert.equal(evs.length, 1);
    assert.deepEqual(errorOf(evs), {
      code: "backend_timeout",
      message: "slowpoke did not finish within 0.05s and was stopped",
      status: 504,
      retryable: true,
    });
    assert.equal((reason as Error).name, "TurnDeadline");
  });

  test("a backend's own timeout wording is kept when the deadline passes", async () => {
    r = await rig("stateless", new ScriptedBackend("up", 0.05));
    r.backend.then(async function* (turn) {
      await aborted(turn);
      yield {
        type: "error",
        error: {
          code: "backend_timeout",
          message: "upstream http://127.0.0.1:1/v1 did not finish within 0.05 s",
          status: 504,
          retryable: true,
        },
      };
    });
    const evs = await r.turn("c1", request("hi"));
    assert.match(errorOf(evs)!.message, /upstream http/);
  });

  test("a turn that finishes in time is not cancelled later by its deadline", async () => {
    r = await rig("stateless", new ScriptedBackend("quick", 0.05));
    const cancel = new Cancellation();
    r.backend.then(answer("fast"));
    await r.turn("c1", request("hi"), cancel);
    await new Promise((res) => setTimeout(res, 120));
    assert.equal(cancel.aborted, false, "the deadline was disarmed when the turn ended");
  });
});

describe("pipeline: refusals and drain", () => {
  test("a full queue is a typed QueueRejected with Retry-After seconds, not an HTTP status", async () => {
    r = await rig("stateless", new ScriptedBackend(), { maxConcurrent: 1, maxQueue: 0, queueTimeoutMs: 1000 });
    const holder = new Cancellation();
    r.backend.then(async function* (turn) {
      await aborted(turn);
      yield { type: "error", error: { code: "aborted", message: "cancelled" } };
    });
    const first = await r.pipeline.prepare(
      { request: request("one"), route: r.route, conversation: conv("a") },
      holder,
    );
    const running = collect(first.events);
    await assert.rejects(
      r.pipeline.prepare({ request: request("two"), route: r.route, conversation: conv("b") }, new Cancellation()),
      (err: unknown) => {
        assert.ok(err instanceof QueueRejected);
        assert.ok(err.retryAfterSeconds >= 1);
        return true;
      },
    );
    holder.abort();
    await running;
  });

  test("a turn cancelled while it waits is a typed WaitAborted", async () => {
    r = await rig("stateless");
    const holder = new Cancellation();
    r.backend.then(async function* (turn) {
      await aborted(turn);
      yield { type: "error", error: { code: "aborted", message: "cancelled" } };
    });
    const first = await r.pipeline.prepare(
      { request: request("one"), route: r.route, conversation: conv("same") },
      holder,
    );
    const running = collect(first.events);
    const waiting = new Cancellation();
    const second = r.pipeline.prepare({ request: request("two"), route: r.route, conversation: conv("same") }, waiting);
    waiting.abort();
    await assert.rejects(second, (err: unknown) => err instanceof WaitAborted);
    holder.abort();
    await running;
  });

  test("drain waits for running turns, then aborts what is left", async () => {
    r = await rig("stateless");
    r.backend.then(async function* (turn) {
      yield { type: "text", text: "working" };
      await aborted(turn);
      yield { type: "error", error: { code: "aborted", message: "cancelled" } };
    });
    const prepared = await r.pipeline.prepare(
      { request: request("job"), route: r.route, conversation: conv("c1") },
      new Cancellation(),
    );
    const running = collect(prepared.events);
    await new Promise((res) => setImmediate(res));
    await r.pipeline.drain(20);
    const evs = await running;
    assert.equal(errorOf(evs)?.code, "aborted");
    // After drain, a new turn is refused before it reaches the backend.
    await assert.rejects(r.turn("c2", request("late")), (err: unknown) => err instanceof WaitAborted);
    assert.equal(r.backend.inputs.length, 1);
  });
});

describe("pipeline: resume binding, healing and reset", () => {
  beforeEach(async () => (r = await rig("resume")));

  test("the binding is written only once the backend confirmed its session, then continued", async () => {
    r.backend.then(answer("first", { session: "s-1" }), answer("second"));
    await r.turn("k", request("hello"));
    const b = await r.store.get("k");
    assert.equal(b?.backendSessionId, "s-1");
    assert.equal(b?.turns, 1);
    assert.equal(b?.lastError ?? null, null, "done clears the in-progress marker");
    await r.turn(
      "k",
      request("and then?", [
        { role: "user", content: "hello" },
        { role: "assistant", content: "first" },
      ]),
    );
    assert.equal(r.backend.inputs[1]!.session.backendSessionId, "s-1");
    assert.equal(r.backend.inputs[1]!.session.turn, 1);
    assert.equal((await r.store.get("k"))?.turns, 2);
  });

  test("a backend that fails before confirming a session leaves no binding", async () => {
    r.backend.then(async function* () {
      yield { type: "error", error: { code: "upstream_error", message: "model refused", status: 400 } };
    });
    await r.turn("k", request("hello"));
    assert.equal(await r.store.get("k"), undefined);
  });

  test("session_not_found before any output: the dead binding is dropped, healed, and a new session is seeded", async () => {
    r.backend.then(answer("one", { session: "s-old" }));
    await r.turn("k", request("my name is Ada"));
    r.backend.then(
      async function* () {
        yield {
          type: "error",
          error: { code: "session_not_found", message: "No conversation found with session ID: s-old" },
        };
      },
      answer("Your name is Ada.", { session: "s-new" }),
    );
    const evs = await r.turn(
      "k",
      request("what is my name?", [
        { role: "user", content: "my name is Ada" },
        { role: "assistant", content: "one" },
      ]),
    );
    assert.equal(errorOf(evs), undefined, "the client never sees the lost session");
    assert.equal(textOf(evs), "Your name is Ada.");
    const [, lost, healed] = r.backend.inputs;
    assert.equal(lost!.session.backendSessionId, "s-old");
    assert.equal(healed!.session.backendSessionId, undefined, "the retry starts a new session");
    assert.match(
      `${healed!.prompt.system}\n${healed!.prompt.text}`,
      /my name is Ada/,
      "seeded from the conversation in the request",
    );
    assert.equal((await r.store.get("k"))?.backendSessionId, "s-new");
    const events = await r.store.listEvents("k");
    assert.ok(
      events.some((e) => e.kind === "healed" && /s-old/.test(e.reason ?? "")),
      JSON.stringify(events),
    );
  });

  test("session_not_found after output is not healed: the error reaches the client", async () => {
    r.backend.then(answer("one", { session: "s-old" }));
    await r.turn("k", request("hi"));
    r.backend.then(async function* () {
      yield { type: "text", text: "partial" };
      yield { type: "error", error: { code: "session_not_found", message: "gone" } };
    });
    const evs = await r.turn(
      "k",
      request("next", [
        { role: "user", content: "hi" },
        { role: "assistant", content: "one" },
      ]),
    );
    assert.equal(errorOf(evs)?.code, "session_not_found");
    assert.equal(r.backend.inputs.length, 2, "no second attempt");
  });

  test("healing happens once: a new session that is also not found ends the turn with the error", async () => {
    r.backend.then(answer("one", { session: "s-old" }));
    await r.turn("k", request("hi"));
    const lost: Script = async function* () {
      yield { type: "error", error: { code: "session_not_found", message: "gone" } };
    };
    r.backend.then(lost, lost);
    const evs = await r.turn("k", request("next"));
    assert.equal(errorOf(evs)?.code, "session_not_found");
    assert.equal(r.backend.inputs.length, 3);
  });

  test("a retry of an interrupted turn starts a new seeded session (reset); a different message continues", async () => {
    r.backend.then(answer("one", { session: "s-1" }));
    await r.turn("k", request("hello"));
    const history: ChatRequest["messages"] = [
      { role: "user", content: "hello" },
      { role: "assistant", content: "one" },
    ];
    // The client goes away in the middle of "book it": the binding keeps the in-progress marker.
    await interrupted("k", request("book it", history));
    assert.match((await r.store.get("k"))?.lastError ?? "", /^in-progress [0-9a-f]{16}$/);

    // OpenClaw retries the same message: a new session, seeded, never the same message twice on s-1.
    r.backend.then(answer("booked", { session: "s-2" }));
    const evs = await r.turn("k", request("book it", history));
    assert.equal(textOf(evs), "booked");
    assert.equal(r.backend.inputs[2]!.session.backendSessionId, undefined);
    assert.match(r.backend.inputs[2]!.prompt.text + r.backend.inputs[2]!.prompt.system, /hello/);
    assert.equal((await r.store.get("k"))?.backendSessionId, "s-2");
    assert.ok((await r.store.listEvents("k")).some((e) => e.kind === "reset"));

    // An interrupted turn followed by a DIFFERENT message continues the session.
    await interrupted("k", request("also lunch", history));
    r.backend.then(answer("ok"));
    await r.turn("k", request("never mind lunch", history));
    assert.equal(r.backend.inputs[4]!.session.backendSessionId, "s-2");
  });

  test("a backend error after the session is confirmed is recorded on the binding", async () => {
    r.backend.then(answer("one", { session: "s-1" }));
    await r.turn("k", request("hi"));
    r.backend.then(async function* () {
      yield { type: "error", error: { code: "upstream_error", message: "rate limited by the model API", status: 429 } };
    });
    await r.turn("k", request("again"));
    assert.equal((await r.store.get("k"))?.lastError, "rate limited by the model API");
  });

  test("a conversation that moves to another backend starts a new session there", async () => {
    r.backend.then(answer("one", { session: "s-1" }));
    await r.turn("k", request("hi"));
    const other = new ScriptedBackend("other").then(answer("fresh", { session: "o-1" }));
    const prepared = await r.pipeline.prepare(
      { request: request("hi again"), route: { ...r.route, backend: other }, conversation: conv("k") },
      new Cancellation(),
    );
    await collect(prepared.events);
    assert.equal(other.inputs[0]!.session.backendSessionId, undefined);
    const b = await r.store.get("k");
    assert.equal(b?.backend, "other");
    assert.equal(b?.backendSessionId, "o-1");
  });
});

describe("pipeline: one conversation's turns across instances (a real PostgreSQL)", () => {
  let pg: TestPostgres;
  /** Instance A's pool, instance B's, and an onlooker's (to see whether a conversation is free). */
  let dbs: PostgresDb[] = [];
  let a: Rig;
  let b: Rig;
  const sched = { maxConcurrent: 4, maxQueue: 8, queueTimeoutMs: 600 };

  before(async () => {
    pg = await startPostgres();
  });
  after(async () => {
    await pg?.stop();
  });
  beforeEach(async () => {
    const url = await freshSchema(pg);
    dbs = await Promise.all([0, 1, 2].map(() => PostgresDb.open({ url, poolSize: 4 })));
    a = await rig("stateless", new ScriptedBackend("a"), sched, new PgConversationLocks(dbs[0]!, () => 3));
    b = await rig("stateless", new ScriptedBackend("b"), sched, new PgConversationLocks(dbs[1]!, () => 3));
    r = a;
  });
  afterEach(async () => {
    assert.equal(b.pipeline.activeTurns, 0, "every turn of B ended");
    assert.equal(b.scheduler.stats().running, 0, "every slot of B released");
    await b.store.close();
    for (const db of dbs) await db.close();
  });

  /** Whether no turn holds the conversation on any instance now (bounded wait for a release in flight). */
  async function free(key: string): Promise<boolean> {
    for (let i = 0; i < 100; i++) {
      const l = await dbs[2]!.tryLock("conversation", key);
      if (l) {
        await l.release();
        return true;
      }
      await new Promise((res) => setTimeout(res, 20));
    }
    return false;
  }

  /** A script that answers once `gate` resolves; `started` resolves when the backend has the turn. */
  function held(text: string): { script: Script; started: Promise<void>; open: () => void } {
    let open!: () => void;
    let started!: () => void;
    const gate = new Promise<void>((res) => (open = res));
    const began = new Promise<void>((res) => (started = res));
    return {
      script: async function* () {
        started();
        await gate;
        yield { type: "text", text };
        yield { type: "done", finishReason: "stop" };
      },
      started: began,
      open,
    };
  }

  test("B's turn of a conversation A is answering waits for A's turn to end, then runs; other conversations do not wait", async () => {
    const first = held("from A");
    a.backend.then(first.script);
    const turnA = a.turn("c", request("one"));
    await first.started;
    b.backend.then(answer("other conversation"), answer("from B"));
    assert.equal(textOf(await b.turn("d", request("elsewhere"))), "other conversation");
    let bDone = false;
    const turnB = b.turn("c", request("two")).then((evs) => ((bDone = true), evs));
    await new Promise((res) => setTimeout(res, 150));
    assert.equal(bDone, false, "B waits while A's turn runs");
    assert.equal(b.backend.inputs.length, 1, "B's backend has not been given the turn");
    first.open();
    assert.equal(textOf(await turnA), "from A");
    assert.equal(textOf(await turnB), "from B");
    assert.ok(await free("c"));
  });

  test("past the queue timeout B's turn is refused like a full queue (QueueRejected, conversation) and B's slot is freed", async () => {
    const first = held("from A");
    a.backend.then(first.script);
    const turnA = a.turn("c", request("one"));
    await first.started;
    await assert.rejects(
      b.turn("c", request("two")),
      (e: unknown) => e instanceof QueueRejected && e.scope === "conversation" && e.retryAfterSeconds === 3,
    );
    assert.equal(b.scheduler.stats().running, 0);
    first.open();
    await turnA;
    assert.ok(await free("c"));
  });

  test("a client that goes away while its turn waits for the conversation is a WaitAborted", async () => {
    const first = held("from A");
    a.backend.then(first.script);
    const turnA = a.turn("c", request("one"));
    await first.started;
    const cancel = new Cancellation();
    const waiting = b.turn("c", request("two"), cancel);
    setTimeout(() => cancel.abort(), 100);
    await assert.rejects(waiting, WaitAborted);
    first.open();
    await turnA;
    assert.ok(await free("c"));
  });

  test("the conversation is free again however a turn ends: done, a backend that throws, an abort, the deadline", async () => {
    a.backend.then(answer("fine"));
    assert.equal(textOf(await a.turn("c", request("one"))), "fine");
    assert.ok(await free("c"), "after done");

    a.backend.then(async function* () {
      yield { type: "text", text: "partial" };
      throw new Error("parser exploded");
    });
    assert.equal(errorOf(await a.turn("c", request("two")))?.code, "backend_failed");
    assert.ok(await free("c"), "after an error");

    const cancel = new Cancellation();
    a.backend.then(async function* (turn) {
      yield { type: "text", text: "thinking…" };
      await aborted(turn);
      yield { type: "error", error: { code: "aborted", message: "the turn was cancelled", status: 499 } };
    });
    const prepared = await a.pipeline.prepare(
      { request: request("three"), route: a.route, conversation: conv("c") },
      cancel,
    );
    for await (const ev of prepared.events) if (ev.type === "text") cancel.abort();
    assert.ok(await free("c"), "after an abort");

    const slow = await rig(
      "stateless",
      new ScriptedBackend("slow", 0.05),
      sched,
      new PgConversationLocks(dbs[0]!, () => 3),
    );
    slow.backend.then(async function* (turn) {
      await aborted(turn);
      yield { type: "error", error: { code: "aborted", message: "the turn was cancelled", status: 499 } };
    });
    assert.equal(errorOf(await slow.turn("c", request("four")))?.code, "backend_timeout");
    await slow.store.close();
    assert.ok(await free("c"), "after the deadline");
    assert.equal(dbs[0]!.pool.waitingCount, 0);
  });
});
