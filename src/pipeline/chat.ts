/**
 * The chat pipeline, independent of HTTP:
 *   request → routing → conversation identity → per-conversation queue → context building → backend
 * It hands the HTTP layer a typed event stream; the encoders (src/encoder) turn it into SSE or JSON.
 */
import { createHash } from "node:crypto";
import type { IncomingHttpHeaders } from "node:http";
import type { Logger } from "pino";
import type { Backend, BackendEvent, PromptParts, TurnInput } from "../backends/types.js";
import type { Config, SessionMode } from "../config/schema.js";
import { buildStatelessPrompt, type LiveData } from "../context/stateless.js";
import { buildResumeTurn } from "../context/resume.js";
import type { SessionStore } from "../store/types.js";
import { conversationWorkDir } from "../util/workdir.js";
import { findCurrentUserTurn } from "../context/metadata.js";
import { resolveConversation, type Conversation } from "../identity/conversation.js";
import type { DebugLog } from "../log/debug-log.js";
import type { ChatRequest } from "../openai/schema.js";
import { QueueRejected, TurnScheduler, WaitAborted, type Lease } from "../queue/scheduler.js";
import { ModelRouter, type Route } from "../routing/router.js";
import { ApiError } from "../server/errors.js";
import { alnumId } from "../util/ids.js";
import { countTokens } from "./usage.js";
import { Cancellation } from "../util/cancel.js";

export interface PreparedTurn {
  requestId: string;
  route: Route;
  conversation: Conversation;
  /** The backend's answer. Always iterate it to the end (or break): that releases the turn's slot. */
  events: AsyncGenerator<BackendEvent>;
  /** Response headers describing the turn. */
  headers: Record<string, string>;
}

/** Optional step that fetches live data before the model answers (tool pre-execution). */
export type Enricher = (userText: string, route: Route, signal: AbortSignal, log: Logger) => Promise<LiveData[]>;

export interface PipelineDeps {
  config: Config;
  router: ModelRouter;
  scheduler: TurnScheduler;
  logger: Logger;
  debugLog: DebugLog;
  enricher?: Enricher;
  /** Conversation → backend session bindings (resume mode). */
  store?: SessionStore;
}

export class ChatPipeline {
  /** Set on shutdown: every running turn is aborted, and a turn that starts later at once. */
  private shuttingDown = false;
  /** Turns running now, and who waits for that number to reach zero (drain). */
  private running = 0;
  private idleWaiters: Array<() => void> = [];
  /** The cancellation of every running turn: aborted on shutdown (a Set, not one listener per turn). */
  private readonly turnCancels = new Set<Cancellation>();

  constructor(private readonly deps: PipelineDeps) {}

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
   * `client` is the client's signal, or a `Cancellation` the caller owns and aborts when the client
   * goes away: then it is the turn's own (nothing is made or listened to per turn; the pipeline
   * aborts it on shutdown, so the caller should not read "client gone" from it).
   */
  async prepare(req: ChatRequest, headers: IncomingHttpHeaders, client: AbortSignal | Cancellation): Promise<PreparedTurn> {
    const { config, router, scheduler, logger } = this.deps;
    const requestId = alnumId("req", 12);
    const route = router.resolve(req.model);
    if (!route) {
      throw new ApiError(
        404,
        "invalid_request_error",
        "model_not_found",
        `The model "${req.model}" is not served here. Available: ${router.models().map((m) => m.id).join(", ")} (GET /v1/models lists them).`,
        "model",
      );
    }
    const conversation = resolveConversation(req, headers, { sessionHeader: config.server.sessionHeader, scope: route.model.id });
    const linked = this.linkTurn(client);
    const cancel = linked.cancel;
    // The child logger is made only when something is logged at an enabled level (creating a pino
    // child per turn showed in the per-request CPU profile; most turns log nothing at `warn`).
    const log = lazyChild(logger, () => ({ requestId, model: route.model.id, backend: route.backend.name, conversation: conversation.key }));

    let lease: Lease;
    try {
      lease = await scheduler.acquire(conversation.key, cancel);
    } catch (err) {
      linked.dispose();
      if (err instanceof QueueRejected) {
        log.warn({ reason: err.message }, "turn refused: queue full");
        throw new ApiError(429, "rate_limit_error", "queue_full", `${err.message}; retry in ${err.retryAfterSeconds}s`, null, {
          "retry-after": String(err.retryAfterSeconds),
        });
      }
      if (err instanceof WaitAborted) throw new ApiError(499, "invalid_request_error", "client_closed", err.message);
      throw err;
    }

    const events = this.run(req, route, conversation, cancel, lease, log, linked.dispose);
    return {
      requestId,
      route,
      conversation,
      events,
      headers: {
        "x-request-id": requestId,
        "x-clawbridge-conversation": conversation.key,
        "x-clawbridge-conversation-source": conversation.source,
        "x-clawbridge-backend": route.backend.name,
      },
    };
  }

  /** The turn's cancellation: fires when the client goes away or on shutdown. `dispose` when the turn ends. */
  private linkTurn(client: AbortSignal | Cancellation): { cancel: Cancellation; dispose: () => void } {
    const followed = client instanceof Cancellation ? { cancel: client, dispose: undefined } : Cancellation.follow(client);
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

  private async *run(req: ChatRequest, route: Route, conversation: Conversation, cancel: Cancellation, lease: Lease, log: Logger, dispose: () => void): AsyncGenerator<BackendEvent> {
    const started = Date.now();
    this.running++;
    const { debugLog } = this.deps;
    let outcome = "completed";
    let chars = 0;
    try {
      const mode = effectiveMode(route, conversation);
      const live = mode === "passthrough" ? [] : await this.enrich(findCurrentUserTurn(req.messages).text, route, cancel, log);
      // Stateless/passthrough: the backend's events through `contract` only (one generator layer
      // fewer per event than a wrapper generator).
      const source = mode === "resume" ? this.runResume(req, route, conversation, cancel, live, log) : this.statelessTurn(req, route, conversation, cancel, live, log, mode);
      for await (const ev of source) {
        if (ev.type === "text") chars += ev.text.length;
        if (ev.type === "error") {
          outcome = `error:${ev.error.code}`;
          log.warn({ code: ev.error.code, message: ev.error.message }, "backend error");
        }
        if (ev.type === "tool_activity") log.debug({ tool: ev.name, status: ev.status }, "backend tool activity");
        yield ev;
      }
    } finally {
      if (cancel.aborted && outcome === "completed") outcome = "aborted";
      lease.release();
      dispose();
      log.info({ outcome, contentChars: chars, durationMs: Date.now() - started }, "turn ended");
      if (debugLog.enabled) debugLog.line(`LLM response (${chars} chars), ${outcome}, ${((Date.now() - started) / 1000).toFixed(1)}s`);
      if (--this.running === 0) {
        const waiters = this.idleWaiters;
        this.idleWaiters = [];
        for (const w of waiters) w();
      }
    }
  }

  private async enrich(userText: string, route: Route, cancel: Cancellation, log: Logger): Promise<LiveData[]> {
    if (!this.deps.enricher) return [];
    try {
      return await this.deps.enricher(userText, route, cancel.signal, log);
    } catch (err) {
      log.warn({ err: (err as Error).message }, "tool pre-execution failed; answering without it");
      return [];
    }
  }

  /** Stateless (compact prompt each turn) and passthrough (the request as is) turns. */
  private statelessTurn(
    req: ChatRequest,
    route: Route,
    conversation: Conversation,
    cancel: Cancellation,
    live: LiveData[],
    log: Logger,
    mode: SessionMode,
  ): AsyncGenerator<BackendEvent> {
    let prompt: PromptParts;
    if (mode === "passthrough") {
      prompt = new PassthroughPrompt(req.messages);
      log.info({ conversationSource: conversation.source, mode }, "turn started");
    } else {
      const built = buildStatelessPrompt(req.messages, route.model.context, live);
      prompt = built.prompt;
      this.deps.debugLog.line(`Prompt built: ${built.stats.totalChars} chars, tool_context: ${live.length > 0}, history_entries: ${built.stats.historyEntries}`);
      log.info({ conversationSource: conversation.source, mode, ...built.stats, remappedFrom: route.remappedFrom }, "turn started");
    }
    const turn = turnInput({ model: route.model.backendModel, prompt, request: req, session: { key: conversation.key, turn: 0 } }, cancel);
    return contract(route.backend, turn, () => `${prompt.system}\n${prompt.text}`);
  }

  /**
   * Resume turns: the backend keeps the conversation; the store maps the conversation key to the
   * backend's session. A lost session (deleted, expired, wrong directory) is healed once: the dead
   * binding is dropped and a new session is seeded from the conversation in the request.
   */
  private async *runResume(
    req: ChatRequest,
    route: Route,
    conversation: Conversation,
    cancel: Cancellation,
    live: LiveData[],
    log: Logger,
  ): AsyncGenerator<BackendEvent> {
    const store = this.deps.store;
    if (!store) throw new Error("resume mode needs a session store");
    const key = conversation.key;
    const backendName = route.backend.name;
    let binding = await store.get(key);
    if (binding && binding.backend !== backendName) {
      log.info({ was: binding.backend }, "conversation moved to another backend: starting a new session there");
      binding = undefined;
    }
    // A turn that never finished (client gone, bridge killed) may already sit in the CLI's own
    // history. Retrying the SAME message on that session would put it there twice: start a new
    // session seeded from the conversation instead. A different next message continues normally.
    const inProgress = `${IN_PROGRESS}${createHash("sha256").update(findCurrentUserTurn(req.messages).text).digest("hex").slice(0, 16)}`;
    if (binding?.lastError === inProgress) {
      log.info({ backendSessionId: binding.backendSessionId }, "retry of an interrupted turn: starting a new session seeded from the conversation");
      this.deps.debugLog.line(`Retry of an interrupted turn for ${key}: new session`);
      await store.delete(key);
      await store.appendEvent(key, "reset", "retry of an interrupted turn");
      binding = undefined;
    }
    const cwd = binding?.cwd ?? conversationWorkDir(this.deps.config.dataDir, key);
    for (let attempt = 0; attempt < 2; attempt++) {
      const continuing = binding !== undefined;
      const built = buildResumeTurn(req.messages, {
        budget: route.model.context,
        conversationKey: key,
        continuing,
        maxSeedChars: route.model.session.maxSeedChars,
        live,
      });
      this.deps.debugLog.line(`Prompt built: ${built.stats.totalChars} chars (resume, ${continuing ? "continuing" : "new session"}), tool_context: ${live.length > 0}, history_entries: ${built.stats.seedEntries}`);
      log.info({ conversationSource: conversation.source, mode: "resume", continuing, backendSessionId: binding?.backendSessionId, ...built.stats }, "turn started");
      const turn = turnInput(
        {
          model: route.model.backendModel,
          prompt: built.prompt,
          request: req,
          session: { key, backendSessionId: binding?.backendSessionId, cwd, turn: binding?.turns ?? 0 },
        },
        cancel,
      );
      if (binding) {
        binding = { ...binding, lastError: inProgress, updatedAt: Date.now() };
        await store.put(binding);
      }
      let answered = false;
      let heal = false;
      for await (const ev of contract(route.backend, turn, () => `${built.prompt.system}\n${built.prompt.text}`)) {
        if (ev.type === "session") {
          if (ev.id !== binding?.backendSessionId) {
            // The backend confirmed a session id: only now is the binding written.
            const now = Date.now();
            binding = { key, backend: backendName, backendSessionId: ev.id, cwd, turns: binding?.turns ?? 0, createdAt: binding?.createdAt ?? now, updatedAt: now, model: route.model.id, lastError: inProgress };
            await store.put(binding);
          }
        } else if (ev.type === "text" || ev.type === "tool_call" || ev.type === "reasoning") {
          answered = true;
        } else if (ev.type === "error" && ev.error.code === "session_not_found" && continuing && !answered && attempt === 0) {
          log.warn({ backendSessionId: binding?.backendSessionId, reason: ev.error.message }, "resume failed: dropping the dead session and starting a new one seeded from the conversation");
          this.deps.debugLog.line(`Session healed for ${key}: ${ev.error.message}`);
          await store.delete(key);
          await store.appendEvent(key, "healed", ev.error.message);
          binding = undefined;
          heal = true;
          break;
        } else if (ev.type === "done" && binding) {
          await store.recordTurn(key, binding.backendSessionId);
        } else if (ev.type === "error" && binding && ev.error.code !== "aborted") {
          // The CLI finished with an error: the session is consistent; record why.
          await store.recordError(key, ev.error.message);
        }
        yield ev;
      }
      if (!heal) return;
    }
  }
}

/**
 * A backend's input: `cancel`, and the standard `signal` made only when the backend reads it.
 * A class, not an object literal with a getter: V8 builds those slowly (seen per request).
 */
class PipelineTurn implements TurnInput {
  constructor(
    readonly model: string,
    readonly prompt: PromptParts,
    readonly request: ChatRequest,
    readonly session: TurnInput["session"],
    readonly cancel: Cancellation,
  ) {}
  get signal(): AbortSignal {
    return this.cancel.signal;
  }
}

function turnInput(f: Omit<TurnInput, "signal" | "cancel">, cancel: Cancellation): TurnInput {
  return new PipelineTurn(f.model, f.prompt, f.request, f.session, cancel);
}

/**
 * A passthrough turn's prompt: the request goes to the backend as it is, and the prompt text is
 * only read to count usage when an upstream reports none, so it is found then.
 */
class PassthroughPrompt implements PromptParts {
  readonly system = "";
  private found?: string;
  constructor(private readonly messages: ChatRequest["messages"]) {}
  get text(): string {
    return (this.found ??= findCurrentUserTurn(this.messages).text);
  }
}

/** `lastError` marker of a turn that started but has not finished: `in-progress <hash of the message>`. */
const IN_PROGRESS = "in-progress ";

/** Resume needs a real conversation identity; without one a model may fall back to stateless. */
function effectiveMode(route: Route, conversation: Conversation): SessionMode {
  const mode = route.model.sessionMode;
  if (mode === "resume" && conversation.source === "derived" && route.model.session.fallback === "stateless") return "stateless";
  return mode;
}

/**
 * Enforce the backend contract at the boundary: exactly one terminal event, nothing after it, a
 * thrown exception becomes an error event instead of a crash, and a turn that finishes without
 * usage gets counted usage (real tokenizer) before `done`.
 */
async function* contract(backend: Backend, turn: TurnInput, promptText: () => string): AsyncGenerator<BackendEvent> {
  let sawUsage = false;
  let output = "";
  try {
    for await (const ev of backend.run(turn)) {
      switch (ev.type) {
        case "usage":
          sawUsage = true;
          break;
        case "text":
        case "reasoning":
          output += ev.text;
          break;
        case "tool_call":
          output += (ev.name ?? "") + ev.argumentsDelta;
          break;
        case "done":
          if (!sawUsage) {
            const promptTokens = await countTokens(promptText());
            const completionTokens = await countTokens(output);
            yield { type: "usage", usage: { promptTokens, completionTokens, totalTokens: promptTokens + completionTokens, estimated: true } };
          }
          yield ev;
          return;
        case "error":
          yield ev;
          return;
        default:
          break;
      }
      yield ev;
    }
    yield { type: "error", error: { code: "backend_failed", message: `backend "${backend.name}" ended without an answer`, status: 502 } };
  } catch (err) {
    yield { type: "error", error: { code: "backend_failed", message: `backend "${backend.name}" failed: ${(err as Error).message}`, status: 502 } };
  }
}

const LOG_LEVELS = new Set(["fatal", "error", "warn", "info", "debug", "trace"]);
const noop = () => {};

/**
 * `parent.child(bindings())`, made on first use: calls at a level the parent has disabled are
 * no-ops that create nothing. Everything else goes to the real child.
 */
function lazyChild(parent: Logger, bindings: () => Record<string, unknown>): Logger {
  let child: Logger | undefined;
  const real = () => (child ??= parent.child(bindings()));
  return new Proxy({} as Logger, {
    get(_target, prop) {
      if (child === undefined && typeof prop === "string" && LOG_LEVELS.has(prop) && !parent.isLevelEnabled(prop)) return noop;
      const r = real();
      const v = (r as unknown as Record<PropertyKey, unknown>)[prop];
      return typeof v === "function" ? (v as (...a: unknown[]) => unknown).bind(r) : v;
    },
  });
}
