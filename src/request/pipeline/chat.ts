/**
 * The chat pipeline, independent of HTTP. The caller has validated the request, routed it and
 * resolved its conversation (`TurnRequest`); the pipeline then
 *   waits for the conversation's turn (queue; with a PostgreSQL store also for the conversation's
 *   lock across instances) → fetches live data (tool pre-execution) → builds the
 *   context (stateless / resume / passthrough) → runs the backend under its contract and deadline
 * and hands back a typed event stream; the encoders (src/request/encoder) turn it into SSE or JSON.
 * Refusals are typed values, not HTTP statuses: `QueueRejected` (full, or waited too long) and
 * `WaitAborted` (cancelled while waiting) from src/request/queue; the server maps them.
 */
import type { ModelCatalog } from "../../backends/catalog/catalog.js";
import { didYouMean } from "../../backends/catalog/choose.js";
import type { Logger } from "pino";
import type { Backend, BackendEvent, PromptParts } from "../../backends/contract/backend.js";
import type { Config } from "../../core/config/schema.js";
import { buildStatelessPrompt, type LiveData } from "../context/stateless.js";
import type { Conversation } from "../identity/conversation.js";
import type { DebugLog } from "../../core/log/debug-log.js";
import { lazyChild } from "../../core/log/lazy.js";
import { QueueRejected, WaitAborted, type Lease, type TurnScheduler } from "../queue/scheduler.js";
import type { ConversationLocks, HeldLock } from "../queue/conversation-locks.js";
import type { Route } from "../models/routes.js";
import { MAX_EVENTS_PER_KEY, type SessionStore } from "../../core/store/types.js";
import { Cancellation } from "../../core/util/cancel.js";
import { alnumId } from "../../core/util/ids.js";
import type { ClientToolHub } from "../../backends/client-tools/sessions.js";
import { ApiError } from "../chat-api/errors.js";
import { armDeadline, contract } from "./enforce-contract.js";
import { dispatchInput } from "./dispatch.js";
import { runResume, toolResultsOf } from "./resume.js";
import { TurnEvents } from "./turn-events.js";
import type { EventBus } from "../../ops/events/bus.js";
import { fallbackKey, PassthroughPrompt, Turn, type TurnRequest } from "./turn.js";
import { hasImages, turnImages, withoutImages } from "../images/parts.js";
import { LimitBook } from "../../core/store/limits.js";
import { allExhausted, ANSWERED_BY, chainOf, noteLimit, runChain, type ChainDeps } from "./fallback.js";

export type { TurnRequest } from "./turn.js";

export interface PreparedTurn {
  requestId: string;
  route: Route;
  conversation: Conversation;
  /** The backend's answer. Always iterate it to the end (or break): that releases the turn's slot. */
  events: AsyncGenerator<BackendEvent>;
  /** Facts about the turn the caller may show (the HTTP layer sends them as response headers). */
  headers: Record<string, string>;
  /**
   * The model has a fallback chain: which model answers is known only at the first event, when
   * `headers` name it (`x-clawbridge-answered-by`); a stream's headers wait for that event.
   */
  decidesLate: boolean;
}

/** What tool pre-execution ran (`report` of an `Enricher`; published as `intent.executed`). */
export interface IntentReport {
  tools: string[];
  ok: boolean;
  error?: string;
}

/** Optional step that fetches live data before the model answers (tool pre-execution); it calls `report` (when given) once it ran a tool. */
export type Enricher = (
  userText: string,
  route: Route,
  signal: AbortSignal,
  log: Logger,
  report?: (r: IntentReport) => void,
) => Promise<LiveData[]>;

export interface PipelineDeps {
  config: Config;
  scheduler: TurnScheduler;
  logger: Logger;
  debugLog: DebugLog;
  enricher?: Enricher;
  /** Conversation → backend session bindings (resume mode). */
  store?: SessionStore;
  /** Model id → route, for a dispatching backend (the router) that hands a turn over to another model. */
  resolveModel?: (id: string) => Route | undefined;
  /** Turn, queue, resume and pre-execution events are published here (src/ops/events/bus.ts), when anyone listens. */
  bus?: EventBus;
  /** Client tool calls waiting per conversation (src/backends/client-tools), to refuse tool results that answer none of them. */
  clientTools?: ClientToolHub;
  /** Told when a CLI says it has no such model ("Did you mean …"): the next turn is remapped (src/backends/catalog). */
  catalog?: Pick<ModelCatalog, "noteMissing">;
  /** Backends at their limit, skipped until their reset (src/core/store/limits.ts; fallback.ts): start.ts gives the bridge's (shared by every instance on a PostgreSQL); default: kept in the config's data dir. */
  limits?: LimitBook;
  /** Several instances on one PostgreSQL: a turn also holds its conversation's lock there (src/request/queue/conversation-locks.ts). */
  locks?: ConversationLocks;
}

export class ChatPipeline {
  /** Set on shutdown: every running turn is aborted, and a turn that starts later at once. */
  private shuttingDown = false;
  /** Turns running now, and who waits for that number to reach zero (drain). */
  private running = 0;
  private idleWaiters: Array<() => void> = [];
  /** The cancellation of every running turn: aborted on shutdown (a Set, not one listener per turn). */
  private readonly turnCancels = new Set<Cancellation>();

  constructor(private readonly deps: PipelineDeps) {
    deps.limits ??= new LimitBook(deps.config.dataDir);
  }

  get activeTurns(): number {
    return this.running;
  }

  private idle(): Promise<void> {
    return this.running === 0 ? Promise.resolve() : new Promise((r) => this.idleWaiters.push(r));
  }

  /** Wait until running turns finish (up to `ms`), then abort the rest and wait for them. */
  async drain(ms: number): Promise<void> {
    if (this.running && ms > 0) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([this.idle(), new Promise((r) => (timer = setTimeout(r, ms)))]);
      if (timer) clearTimeout(timer);
    }
    this.shuttingDown = true;
    for (const c of this.turnCancels) c.abort();
    await this.idle();
  }

  /**
   * Wait for the conversation's turn and start it. `client` is the client's signal, or a
   * `Cancellation` the caller owns and aborts when the client goes away: then it is the turn's own
   * (nothing is made or listened to per turn; the pipeline aborts it on shutdown or at the turn's
   * deadline, so the caller should not read "client gone" from it).
   * Throws `QueueRejected` or `WaitAborted` (src/request/queue) when the turn cannot start.
   */
  async prepare(req: TurnRequest, client: AbortSignal | Cancellation): Promise<PreparedTurn> {
    const { logger, limits } = this.deps;
    const { route, conversation } = req;
    // Every model that could answer is at its limit: a 429 at once, with the earliest reset.
    const chain = chainOf(route, this.deps.resolveModel);
    const exhausted = limits && allExhausted(chain, limits);
    if (exhausted)
      throw new ApiError(429, "rate_limit_error", "limit_reached", exhausted.message, null, {
        "retry-after": String(exhausted.retryAfterSeconds),
      });
    const requestId = alnumId("req", 12);
    const accepted = Date.now();
    const linked = this.linkTurn(client);
    // The child logger is made only when something is logged at an enabled level.
    const log = lazyChild(logger, () => ({
      requestId,
      model: route.model.id,
      backend: route.backend.name,
      conversation: conversation.key,
    }));

    let lease: Lease;
    try {
      lease = await this.slot(conversation.key, linked.cancel);
    } catch (err) {
      linked.dispose();
      if (err instanceof QueueRejected) {
        log.warn({ reason: err.message }, "turn refused: queue full");
        this.deps.bus?.emit({
          type: "queue.rejected",
          conversation: conversation.key,
          model: route.model.id,
          scope: err.scope,
        });
      }
      throw err;
    }

    const mismatch = this.toolResultMismatch(req);
    if (mismatch) {
      lease.release();
      linked.dispose();
      log.info({ reason: mismatch }, "turn refused: its tool results do not answer the pending tool calls");
      throw new ApiError(400, "invalid_request_error", "tool_call_mismatch", mismatch, "messages");
    }

    // A request that offers no tools cannot resume a CLI turn suspended on a client tool call:
    // that turn ends first (else it would hold the conversation's CLI until its timeout), its call
    // answered saying why; so does one a pending timeout is ending now.
    const waiting = this.deps.clientTools?.find(conversation.key);
    if (waiting && !(route.model.tools.mode === "bridge" && req.request.tools?.length)) {
      await waiting.endSuspended(
        "No result: the conversation went on without tools (the client's next request offered none and carried no result), so this call was given up.",
      );
    }

    const turn = new Turn(requestId, req.request, route, conversation, linked.cancel, log);
    const headers: Record<string, string> = {
      "x-request-id": requestId,
      "x-clawbridge-conversation": conversation.key,
      "x-clawbridge-conversation-source": conversation.source,
      "x-clawbridge-backend": route.backend.name,
      [ANSWERED_BY]: route.model.id,
    };
    return {
      requestId,
      route,
      conversation,
      events: this.run(turn, lease, linked.dispose, accepted, headers, chain),
      headers,
      decidesLate: chain.length > 1,
    };
  }

  /**
   * The turn's place: its local slot (the queue's order and limits), then, when several instances
   * share a PostgreSQL, its conversation's lock there for the whole turn, waited for within what is
   * left of the queue timeout (at least a second). The lease releases both.
   */
  private async slot(key: string, cancel: Cancellation): Promise<Lease> {
    const { scheduler, locks, config } = this.deps;
    const start = Date.now();
    const lease = await scheduler.acquire(key, cancel);
    if (!locks) return lease;
    let held: HeldLock;
    try {
      const timeoutMs = config.server.queueTimeoutSeconds * 1000;
      // What is left of the queue timeout; at least a moment, so a turn let in at its last moment is not refused a free lock.
      held = await locks.acquire(key, cancel, Math.max(timeoutMs - lease.waitedMs, Math.min(timeoutMs, 1000)));
    } catch (err) {
      lease.release();
      if (err instanceof QueueRejected || err instanceof WaitAborted) throw err;
      throw new ApiError(
        503,
        "server_error",
        "store_unavailable",
        `the turn cannot take its conversation's lock in the store (store.url): ${(err as Error).message}`,
      );
    }
    return {
      waitedMs: Date.now() - start,
      release: () => {
        void held.release();
        lease.release();
      },
    };
  }

  /**
   * While a CLI turn of this conversation waits for client tool results (src/backends/client-tools), a request
   * whose tool messages do not answer exactly those calls is refused (400) before anything streams;
   * one that ends with the person's message goes through (it ends the waiting turn).
   */
  private toolResultMismatch(req: TurnRequest): string | undefined {
    const session = this.deps.clientTools?.find(req.conversation.key);
    if (!session || session.waitingOn !== req.route.backend.name) return undefined;
    const results = toolResultsOf(req.request.messages);
    return results.length ? session.check(results) : undefined;
  }

  /** The turn's cancellation: fires when the client goes away or on shutdown. `dispose` when the turn ends. */
  private linkTurn(client: AbortSignal | Cancellation): { cancel: Cancellation; dispose: () => void } {
    const followed =
      client instanceof Cancellation ? { cancel: client, dispose: undefined } : Cancellation.follow(client);
    const cancel = followed.cancel;
    if (this.shuttingDown) cancel.abort();
    this.turnCancels.add(cancel);
    return {
      cancel,
      dispose: () => {
        this.turnCancels.delete(cancel);
        followed.dispose?.();
      },
    };
  }

  private async *run(
    turn: Turn,
    lease: Lease,
    dispose: () => void,
    accepted: number,
    headers: Record<string, string>,
    chain: readonly Route[],
  ): AsyncGenerator<BackendEvent> {
    this.running++;
    const { debugLog, bus } = this.deps;
    const { cancel, log } = turn;
    // The turn's events on the bus: nothing is made for them when nobody listens.
    const watch = bus?.listenerCount
      ? new TurnEvents(
          bus,
          turn.requestId,
          turn.conversation.key,
          turn.route.model.id,
          turn.route.backend.name,
          accepted,
        )
      : undefined;
    watch?.started(turn.mode);
    // The one turn deadline (the backend's `timeoutSeconds`), from the moment the turn may start.
    let disarm = armDeadline(cancel, turn.route.backend.timeoutSeconds);
    let outcome = "completed";
    let chars = 0;
    let chained = false;
    try {
      let source: AsyncIterable<BackendEvent> | undefined;
      // A dispatching backend (the router, the builder) answers itself or hands the turn to
      // another model, which then runs exactly as if it had been asked directly (its own mode and
      // deadline) — or, when that one dispatches too (router → builder), decides in its turn.
      // Each backend is asked at most once per turn, so a hand-over can never loop.
      const asked = new Set<string>();
      while (!source && turn.route.backend.dispatch) {
        if (asked.has(turn.route.backend.name)) {
          source = failed(
            `${[...asked].join(" → ")} handed the turn back to ${turn.route.backend.name}; a hand-over may not loop`,
          );
          break;
        }
        asked.add(turn.route.backend.name);
        const d = await this.dispatch(turn);
        if (d.kind === "answer") source = d.events;
        else {
          if (d.preface) {
            const ev: BackendEvent = { type: "text", text: d.preface };
            watch?.observe(ev); // the client's first byte
            yield ev;
          }
          turn = turn.withRoute(d.route);
          if (watch) watch.answeredBy = d.route.model.id;
          disarm();
          disarm = armDeadline(cancel, d.route.backend.timeoutSeconds);
        }
      }
      if (!source) {
        const mode = turn.mode;
        if (mode !== "passthrough") turn.live = await this.enrich(turn);
        if (chain.length > 1 && this.deps.limits) {
          // A fallback chain: the first model that can answers (fallback.ts); each model that
          // takes the turn gets its backend's deadline.
          source = runChain(turn, chain, {
            deps: this.chainDeps(),
            answer: (t) => this.answerOn(t),
            switched: (t) => {
              disarm();
              disarm = armDeadline(cancel, t.route.backend.timeoutSeconds);
              if (watch) watch.answeredBy = t.route.model.id;
            },
            headers,
            answered: (t) => this.missedBy(turn, t),
          });
          chained = true;
        } else source = this.answerOn(turn);
      }
      for await (const ev of source) {
        watch?.observe(ev);
        if (ev.type === "text") chars += ev.text.length;
        if (ev.type === "error") {
          outcome = `error:${ev.error.code}`;
          log.warn({ code: ev.error.code, message: ev.error.message }, "backend error");
          if (ev.error.code === "limit_reached" && !chained && this.deps.limits)
            noteLimit(this.chainDeps(), turn.route.backend.name, ev.error);
          const hint = this.deps.catalog && didYouMean(ev.error.message);
          if (hint)
            this.deps.catalog!.noteMissing(turn.route.model.backend, turn.route.model.backendModel, hint.suggestions);
        }
        if (ev.type === "tool_activity") log.debug({ tool: ev.name, status: ev.status }, "backend tool activity");
        yield ev;
      }
    } finally {
      disarm();
      if (cancel.aborted && outcome === "completed") outcome = "aborted";
      watch?.ended(cancel, this.shuttingDown, { model: turn.route.model.id, backend: turn.route.backend.name });
      lease.release();
      dispose();
      log.info({ outcome, contentChars: chars, durationMs: Date.now() - turn.started }, "turn ended");
      if (debugLog.enabled)
        debugLog.line(`LLM response (${chars} chars), ${outcome}, ${((Date.now() - turn.started) / 1000).toFixed(1)}s`);
      if (--this.running === 0) {
        const waiters = this.idleWaiters;
        this.idleWaiters = [];
        for (const w of waiters) w();
      }
    }
  }

  /**
   * Ask the dispatching backend what to do with the turn. Its own answer comes back under the
   * backend contract; a hand-over names a configured model.
   */
  private async dispatch(
    turn: Turn,
  ): Promise<
    { kind: "answer"; events: AsyncIterable<BackendEvent> } | { kind: "handover"; route: Route; preface?: string }
  > {
    const backend = turn.route.backend;
    const input = turn.input({ system: "", text: "" }, { key: turn.conversation.key, turn: 0 });
    const fail = (message: string): { kind: "answer"; events: AsyncIterable<BackendEvent> } => ({
      kind: "answer",
      events: failed(message),
    });
    let d;
    try {
      d = await backend.dispatch!(dispatchInput(input, turn.request.messages));
    } catch (err) {
      turn.log.error({ err }, "router failed");
      return fail(`${backend.name} failed: ${(err as Error).message}`);
    }
    if (d.kind === "answer") {
      const events = d.events;
      const own: Backend = {
        name: backend.name,
        type: backend.type,
        run: () => events,
        health: () => backend.health(),
      };
      return { kind: "answer", events: contract(own, input, () => turn.userText()) };
    }
    const route = this.deps.resolveModel?.(d.model);
    if (!route) return fail(`${backend.name} handed the turn to model "${d.model}", which is not configured`);
    turn.log.debug({ to: d.model }, "turn handed over");
    return { kind: "handover", route, preface: d.preface };
  }

  private async enrich(turn: Turn): Promise<LiveData[]> {
    if (!this.deps.enricher) return [];
    // `intent.executed` only when someone listens on the bus.
    const bus = this.deps.bus?.listenerCount ? this.deps.bus : undefined;
    const t0 = bus ? Date.now() : 0;
    let ran: IntentReport | undefined;
    const executed = (r: IntentReport) => {
      const { conversation, route } = turn;
      bus!.emit({
        type: "intent.executed",
        conversation: conversation.key,
        model: route.model.id,
        tools: r.tools,
        ok: r.ok,
        ms: Date.now() - t0,
        ...(r.error ? { error: r.error } : {}),
      });
    };
    try {
      const live = await this.deps.enricher(
        turn.userText(),
        turn.route,
        turn.cancel.signal,
        turn.log,
        bus ? (r) => (ran = r) : undefined,
      );
      if (bus && (ran || live.length)) executed(ran ?? { tools: [], ok: true });
      return live;
    } catch (err) {
      turn.log.warn({ err: (err as Error).message }, "tool pre-execution failed; answering without it");
      if (bus) executed({ tools: ran?.tools ?? [], ok: false, error: (err as Error).message });
      return [];
    }
  }

  /** Stateless (compact prompt each turn) and passthrough (the request as is) turns. */
  private statelessTurn(turn: Turn): AsyncGenerator<BackendEvent> {
    const { request, route, conversation, log } = turn;
    let prompt: PromptParts;
    if (turn.mode === "passthrough") {
      prompt = new PassthroughPrompt(request.messages);
      log.info({ conversationSource: conversation.source, mode: "passthrough" }, "turn started");
    } else {
      const built = buildStatelessPrompt(request.messages, route.model.context, turn.live);
      prompt = built.prompt;
      this.deps.debugLog.line(
        `Prompt built: ${built.stats.totalChars} chars, tool_context: ${turn.live.length > 0}, history_entries: ${built.stats.historyEntries}`,
      );
      log.info(
        {
          conversationSource: conversation.source,
          mode: "stateless",
          ...built.stats,
          remappedFrom: route.remappedFrom,
        },
        "turn started",
      );
    }
    return contract(
      route.backend,
      turn.input(prompt, { key: conversation.key, turn: 0 }),
      () => `${prompt.system}\n${prompt.text}`,
    );
  }

  /** One model's answer to the turn, in its mode (stateless and passthrough through `contract` only: one generator layer fewer per event). */
  private answerOn(turn: Turn): AsyncGenerator<BackendEvent> {
    if (hasImages(turn.request.messages)) turn = this.imagesFor(turn);
    return turn.mode === "resume" ? this.resumeTurn(turn) : this.statelessTurn(turn);
  }

  /**
   * A turn with images, on the model about to answer it: a model that sees images gets them (its
   * backend in its own way, src/backends/contract `TurnInput.images`); for one that cannot, each
   * image becomes one line saying so (src/request/images/parts.ts), never nothing. Either way the
   * turn's event says what happened.
   */
  private imagesFor(turn: Turn): Turn {
    const { route } = turn;
    const declared = route.model.input;
    const reason = !route.backend.imageInput
      ? `the ${route.backend.type} backend does not pass images on`
      : declared && !declared.includes("image")
        ? `models[${route.model.id}].input does not list image`
        : undefined;
    const replaced = reason ? withoutImages(turn.request, route.model.name || route.model.id) : undefined;
    const next = replaced ? turn.withRequest(replaced.request) : turn;
    if (reason) turn.log.info({ reason }, "images replaced by a line: the model cannot see them");
    const bus = this.deps.bus;
    if (bus?.listenerCount)
      bus.emit({
        type: "turn.images",
        turnId: turn.requestId,
        conversation: turn.conversation.key,
        model: route.model.id,
        backend: route.backend.name,
        images: replaced ? replaced.dropped : turnImages(turn.request.messages).length,
        passed: !reason,
        ...(reason ? { reason } : {}),
      });
    return next;
  }

  /** A fallback model answered a resume-mode turn: the primary's session missed it (see `resumeAfterFallback`). */
  private missedBy(primary: Turn, t: Turn): void {
    const store = this.deps.store;
    if (!store || primary.mode !== "resume") return;
    void store
      .appendEvent(primary.conversation.key, MISSED, t.route.model.id)
      .catch((err: Error) => primary.log.warn({ err: err.message }, "cannot note a turn the session missed"));
  }

  private chainDeps(): ChainDeps {
    const { config, limits, bus } = this.deps;
    return { limits: limits!, settings: (b) => config.backends[b]?.models, ...(bus ? { bus } : {}) };
  }

  /**
   * Resume mode on a model with a fallback chain, back on its own backend: the turns a fallback
   * model answered meanwhile (`missed` events of the conversation since the last `caught-up`) are
   * given to this session before the new message, and the fallbacks' sessions are let go (the next
   * fallback starts a fresh one, seeded).
   */
  private async *resumeAfterFallback(turn: Turn, store: SessionStore): AsyncGenerator<BackendEvent> {
    const backends = new Set(
      turn.route.model.fallback
        .map((id) => this.deps.resolveModel?.(id)?.model.backend)
        .filter((b): b is string => !!b && b !== turn.route.model.backend),
    );
    const key = turn.conversation.key;
    let missed = 0;
    for (const e of await store.listEvents(key, { limit: MAX_EVENTS_PER_KEY })) {
      if (e.kind === CAUGHT_UP) break;
      if (e.kind === MISSED) missed++;
    }
    if (missed) {
      for (const b of backends) {
        const k = fallbackKey(key, b);
        if (await store.get(k)) await store.delete(k);
      }
      if (await store.get(key)) {
        turn.missedTurns = missed;
        turn.log.info({ missedTurns: missed }, "back on the model's own backend: it is given the turns it missed");
      }
      await store.appendEvent(key, CAUGHT_UP, `${missed} turn(s) answered by a fallback model`);
    }
    yield* this.resumeTurn(turn, true);
  }

  private resumeTurn(turn: Turn, caughtUp = false): AsyncGenerator<BackendEvent> {
    const store = this.deps.store;
    if (!store) throw new Error("resume mode needs a session store");
    const primary = turn.conversation.key.indexOf("~fallback:") < 0;
    if (!caughtUp && primary && turn.route.model.fallback.length) return this.resumeAfterFallback(turn, store);
    return runResume(turn, {
      store,
      dataDir: this.deps.config.dataDir,
      debugLog: this.deps.debugLog,
      bus: this.deps.bus,
    });
  }
}

/** Session events of a conversation with a fallback chain: a turn a fallback model answered, and the primary given them. */
const MISSED = "missed";
const CAUGHT_UP = "caught-up";

/** A turn that fails before any backend answered. */
async function* failed(message: string): AsyncGenerator<BackendEvent> {
  yield { type: "error", error: { code: "backend_failed", message, status: 502 } };
}
