/**
 * The chat pipeline, independent of HTTP:
 *   request → routing → conversation identity → per-conversation queue → context building → backend
 * It hands the HTTP layer a typed event stream; the encoders (src/encoder) turn it into SSE or JSON.
 */
import type { IncomingHttpHeaders } from "node:http";
import type { Logger } from "pino";
import type { Backend, BackendEvent, PromptParts, TurnInput } from "../backends/types.js";
import type { Config } from "../config/schema.js";
import { buildStatelessPrompt, type BuildStats, type LiveData } from "../context/stateless.js";
import { findCurrentUserTurn } from "../context/metadata.js";
import { resolveConversation, type Conversation } from "../identity/conversation.js";
import type { DebugLog } from "../log/debug-log.js";
import type { ChatRequest } from "../openai/schema.js";
import { QueueRejected, TurnScheduler, WaitAborted, type Lease } from "../queue/scheduler.js";
import { ModelRouter, type Route } from "../routing/router.js";
import { ApiError } from "../server/errors.js";
import { alnumId } from "../encoder/chunks.js";
import { withUsage } from "./usage.js";

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
export type Enricher = (userText: string, route: Route, signal: AbortSignal) => Promise<LiveData[]>;

export interface PipelineDeps {
  config: Config;
  router: ModelRouter;
  scheduler: TurnScheduler;
  logger: Logger;
  debugLog: DebugLog;
  enricher?: Enricher;
}

export class ChatPipeline {
  /** Aborted on shutdown: every running turn stops. */
  private readonly shutdown = new AbortController();
  private readonly active = new Set<Promise<void>>();

  constructor(private readonly deps: PipelineDeps) {}

  get activeTurns(): number {
    return this.active.size;
  }

  /** Wait until running turns finish (up to `ms`), then abort the rest and wait for them. */
  async drain(ms: number): Promise<void> {
    if (this.active.size && ms > 0) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([Promise.allSettled([...this.active]), new Promise((r) => (timer = setTimeout(r, ms)))]);
      if (timer) clearTimeout(timer);
    }
    this.shutdown.abort();
    await Promise.allSettled([...this.active]);
  }

  async prepare(req: ChatRequest, headers: IncomingHttpHeaders, clientSignal: AbortSignal): Promise<PreparedTurn> {
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
    const signal = AbortSignal.any([clientSignal, this.shutdown.signal]);
    const log = logger.child({ requestId, model: route.model.id, backend: route.backend.name, conversation: conversation.key });

    let lease: Lease;
    try {
      lease = await scheduler.acquire(conversation.key, signal);
    } catch (err) {
      if (err instanceof QueueRejected) {
        log.warn({ reason: err.message }, "turn refused: queue full");
        throw new ApiError(429, "rate_limit_error", "queue_full", `${err.message}; retry in ${err.retryAfterSeconds}s`, null, {
          "retry-after": String(err.retryAfterSeconds),
        });
      }
      if (err instanceof WaitAborted) throw new ApiError(499, "invalid_request_error", "client_closed", err.message);
      throw err;
    }

    const events = this.run(req, route, conversation, signal, lease, log);
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

  private async *run(req: ChatRequest, route: Route, conversation: Conversation, signal: AbortSignal, lease: Lease, log: Logger): AsyncGenerator<BackendEvent> {
    const started = Date.now();
    let finished!: () => void;
    const done = new Promise<void>((r) => (finished = r));
    this.active.add(done);
    const { debugLog } = this.deps;
    let outcome = "completed";
    let chars = 0;
    try {
      const built = await this.buildPrompt(req, route, signal, log);
      debugLog.line(
        `Prompt built: ${built.stats ? built.stats.totalChars : built.prompt.text.length} chars, tool_context: ${built.live.length > 0}, history_entries: ${built.stats?.historyEntries ?? 0}`,
      );
      log.info({ conversationSource: conversation.source, mode: route.model.sessionMode, waitedMs: lease.waitedMs, ...built.stats, remappedFrom: route.remappedFrom }, "turn started");
      const turn: TurnInput = {
        model: route.model.backendModel,
        prompt: built.prompt,
        request: req,
        session: { key: conversation.key, turn: 0 },
        signal,
      };
      const promptText = () => `${built.prompt.system}\n${built.prompt.text}`;
      for await (const ev of withUsage(guard(route.backend, turn), promptText)) {
        if (ev.type === "text") chars += ev.text.length;
        if (ev.type === "error") {
          outcome = `error:${ev.error.code}`;
          log.warn({ code: ev.error.code, message: ev.error.message }, "backend error");
        }
        if (ev.type === "tool_activity") log.debug({ tool: ev.name, status: ev.status }, "backend tool activity");
        yield ev;
      }
    } finally {
      if (signal.aborted && outcome === "completed") outcome = "aborted";
      lease.release();
      log.info({ outcome, contentChars: chars, durationMs: Date.now() - started }, "turn ended");
      debugLog.line(`LLM response (${chars} chars), ${outcome}, ${((Date.now() - started) / 1000).toFixed(1)}s`);
      this.active.delete(done);
      finished();
    }
  }

  private async buildPrompt(
    req: ChatRequest,
    route: Route,
    signal: AbortSignal,
    log: Logger,
  ): Promise<{ prompt: PromptParts; stats?: BuildStats; live: LiveData[] }> {
    const mode = route.model.sessionMode;
    if (mode === "passthrough") {
      const current = findCurrentUserTurn(req.messages);
      return { prompt: { system: "", text: current.text }, live: [] };
    }
    let live: LiveData[] = [];
    if (this.deps.enricher) {
      const current = findCurrentUserTurn(req.messages);
      try {
        live = await this.deps.enricher(current.text, route, signal);
      } catch (err) {
        log.warn({ err: (err as Error).message }, "tool pre-execution failed; answering without it");
      }
    }
    const built = buildStatelessPrompt(req.messages, route.model.context, live);
    return { prompt: built.prompt, stats: built.stats, live };
  }
}

/**
 * Enforce the backend contract at the boundary: exactly one terminal event, nothing after it, and a
 * thrown exception becomes an error event instead of a crash.
 */
async function* guard(backend: Backend, turn: TurnInput): AsyncGenerator<BackendEvent> {
  try {
    for await (const ev of backend.run(turn)) {
      yield ev;
      if (ev.type === "done" || ev.type === "error") return;
    }
    yield { type: "error", error: { code: "backend_failed", message: `backend "${backend.name}" ended without an answer`, status: 502 } };
  } catch (err) {
    yield { type: "error", error: { code: "backend_failed", message: `backend "${backend.name}" failed: ${(err as Error).message}`, status: 502 } };
  }
}
