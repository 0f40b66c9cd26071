/**
 * OpenAI-compatible upstream backend (`type: openai`): vLLM, Ollama, llama.cpp, LM Studio, or any
 * server with `POST <baseUrl>/chat/completions`.
 *
 * Passthrough only: the client's request is forwarded with `model` replaced, rewritten by the
 * compat rules (./compat.ts), and sent with `stream: true` when the client streams (or always,
 * with `streamUpstream: always`). A non-streaming client gets the upstream's JSON answer
 * translated once: parsing one body costs the bridge far less than parsing a stream of chunks
 * (the throughput benchmark's case); `always` trades that for idle/first-byte timeouts that can
 * detect a stuck server mid-answer. Both are one `UpstreamTurn` (./transport.ts) on undici's
 * dispatch API, each body chunk translated as it arrives.
 *
 * The rest of the backend: ./translate.ts (upstream chunks → events), ./transport.ts (deadlines,
 * reading and framing the answer), ./errors.ts (upstream errors and their messages).
 */
import { childLogger } from "../../core/log/logger.js";
import { Pool } from "undici";
import type { Logger } from "pino";
import {
  applyRequestCompat,
  LOCAL_SERVER_COMPAT,
  mergeCompat,
  type CompatOverride,
  type CompatRules,
} from "./compat.js";
import type { BackendDeps, BackendModule } from "../module.js";
import { openaiDescriptor, type OpenAIBackendOptions } from "./options.js";
import type { Backend, BackendEvent, BackendHealth, DiscoveredModel, TurnInput } from "../contract/backend.js";
import { describeUnreachable, errCode, safeUrl, UNREACHABLE, upstreamErrorMessage } from "./errors.js";
import { StreamTranslator } from "./translate.js";
import { TurnControl, UpstreamTurn, type UpstreamRequest } from "./transport.js";

export { openaiOptionsSchema, type OpenAIBackendOptions } from "./options.js";

/** Effective compat rules for one upstream model: defaults ← options.compat ← extraBody ← modelCompat[model]. */
export function resolveCompat(
  options: Pick<OpenAIBackendOptions, "compat" | "extraBody" | "modelCompat">,
  model?: string,
  override?: CompatOverride,
): CompatRules {
  let rules = mergeCompat(LOCAL_SERVER_COMPAT, options.compat);
  if (options.extraBody && Object.keys(options.extraBody).length)
    rules = mergeCompat(rules, { extraBody: options.extraBody });
  const perModel = model !== undefined ? options.modelCompat?.[model] : undefined;
  if (perModel) rules = mergeCompat(rules, perModel);
  if (override) rules = mergeCompat(rules, override);
  return rules;
}

const MAX_ERROR_BODY = 64 * 1024;
const MAX_JSON_BODY = 64 * 1024 * 1024;

/**
 * Resolved compat rules per options object and model name: resolving them merges several rule
 * sets, which showed in the per-request CPU profile. Options are validated once and never change;
 * model names come from the configuration, so each map stays small.
 */
const compatCache = new WeakMap<object, Map<string, CompatRules>>();
function cachedCompat(
  options: Pick<OpenAIBackendOptions, "compat" | "extraBody" | "modelCompat">,
  model: string,
): CompatRules {
  let perModel = compatCache.get(options);
  if (!perModel) {
    perModel = new Map();
    compatCache.set(options, perModel);
  }
  let rules = perModel.get(model);
  if (!rules) {
    rules = resolveCompat(options, model);
    perModel.set(model, rules);
  }
  return rules;
}

/**
 * The request body sent upstream for a turn: the client's request with `model` replaced, the compat
 * rules applied, usage requested in the stream (when the upstream supports `stream_options`) and
 * `stream: true` forced (extraBody cannot change `model` or `stream`).
 */
export function buildUpstreamBody(
  options: Pick<OpenAIBackendOptions, "compat" | "extraBody" | "modelCompat"> & {
    streamUpstream?: "always" | "when-client-streams";
  },
  turn: Pick<TurnInput, "model" | "request">,
): Record<string, unknown> {
  const compat = cachedCompat(options, turn.model);
  const req = turn.request as Record<string, unknown>;
  const stream = options.streamUpstream === "always" || req.stream === true;
  let base: Record<string, unknown>;
  if (stream) {
    base = { ...req, model: turn.model, stream };
    if (compat.supportsStreamOptions) {
      const so =
        req.stream_options && typeof req.stream_options === "object"
          ? (req.stream_options as Record<string, unknown>)
          : {};
      base.stream_options = { ...so, include_usage: true };
    }
  } else {
    // Without `stream_options` (copied without it, not deleted: see applyRequestCompat).
    const { stream_options: _so, ...rest } = req;
    base = { ...rest, model: turn.model, stream };
  }
  const body = applyRequestCompat(base, compat);
  body.model = turn.model;
  body.stream = stream;
  return body;
}

const NO_TOOLS: readonly string[] = [];

/** The turn's cancellation was aborted before anything was sent. */
function notSent(): BackendEvent {
  return { type: "error", error: { code: "aborted", message: "request aborted before it was sent", retryable: false } };
}

/** An event stream of one event. */
async function* only(ev: BackendEvent): AsyncGenerator<BackendEvent> {
  yield ev;
}

class OpenAIBackend implements Backend {
  readonly type = "openai";
  /** The request's image parts (data URLs by then) go to the upstream unchanged; a text-only model says so with `models[].input: [text]`. */
  readonly imageInput = true;
  /** The turn deadline the pipeline enforces (a non-streamed upstream answer has no other limit). */
  readonly timeoutSeconds: number;
  private readonly pool: Pool;
  private readonly basePath: string;
  private readonly chatPath: string;
  private readonly display: string;
  private readonly logger: Logger;

  constructor(
    readonly name: string,
    private readonly options: OpenAIBackendOptions,
    deps: BackendDeps,
  ) {
    this.timeoutSeconds = options.timeoutSeconds;
    const base = new URL(options.baseUrl);
    this.basePath = base.pathname.replace(/\/+$/, "");
    this.chatPath = `${this.basePath}/chat/completions`;
    this.display = safeUrl(base);
    this.logger = childLogger(deps.logger, { backend: name });
    this.pool = new Pool(base.origin, {
      connections: options.maxConnections,
      connect: { timeout: options.connectTimeoutSeconds * 1000 },
      // Our own timers (first byte, idle, whole request) govern; undici's would fire with less context.
      headersTimeout: 0,
      bodyTimeout: 0,
    });
  }

  /** Headers of every chat request (computed once: options never change). */
  private chatHeaders?: Record<string, string>;

  private headers(extra: Record<string, string>): Record<string, string> {
    const h: Record<string, string> = { ...extra, ...this.options.headers };
    if (this.options.apiKey) h.authorization = `Bearer ${this.options.apiKey}`;
    return h;
  }

  /**
   * The turn's upstream request and its answer as events (`UpstreamTurn`, ./transport.ts): asked
   * for as a stream when the client streams (or `streamUpstream: always`), with first-byte and idle
   * deadlines; otherwise the upstream answers whole and only the turn's deadline (the pipeline's)
   * applies, the answer only starting when it is complete.
   */
  run(turn: TurnInput): AsyncIterable<BackendEvent> {
    const t = this.begin(turn);
    if (!t) return only(notSent());
    let prepared: { translator: StreamTranslator; request: UpstreamRequest };
    try {
      prepared = this.prepare(turn, t.url);
    } catch (err) {
      const ev = this.unexpected(err, t);
      t.end();
      return only(ev);
    }
    return new UpstreamTurn({
      pool: this.pool,
      request: prepared.request,
      translator: prepared.translator,
      control: t,
      logger: this.logger,
      maxJsonBody: MAX_JSON_BODY,
      maxErrorBody: MAX_ERROR_BODY,
      unexpected: (err) => this.unexpected(err, t),
      timers: this.options.streamUpstream === "always" || turn.request.stream === true,
    });
  }

  /**
   * Set-up shared by both paths: the stop switch (following the turn's cancellation, which the
   * pipeline's turn deadline also aborts), the first-byte deadline (from now) and the error mapping
   * of the turn's upstream request. Undefined when the turn was cancelled before anything was sent.
   */
  private begin(turn: TurnInput): TurnControl | undefined {
    if (turn.cancel.aborted) return undefined;
    return new TurnControl(turn.cancel, this.options, `${this.display}/chat/completions`, this.display);
  }

  /** The turn's translator and its upstream request (the body built by `buildUpstreamBody`). */
  private prepare(turn: TurnInput, url: string): { translator: StreamTranslator; request: UpstreamRequest } {
    const o = this.options;
    const offered = turn.request.tools;
    const tools = offered?.length ? offered.map((t) => t.function.name).filter((n): n is string => !!n) : NO_TOOLS;
    const translator = new StreamTranslator({
      tools,
      extract: o.extractToolCalls && turn.request.tool_choice !== "none",
      maxToolCalls: o.maxToolCalls,
      logger: this.logger,
    });
    const payload = JSON.stringify(buildUpstreamBody(o, turn));
    // Guarded: the log object would be built for every turn even with debug off.
    if (this.logger.isLevelEnabled("debug"))
      this.logger.debug({ url, model: turn.model, bytes: payload.length, tools: tools.length }, "upstream request");
    const request: UpstreamRequest = {
      path: this.chatPath,
      method: "POST",
      headers: (this.chatHeaders ??= this.headers({
        "content-type": "application/json",
        accept: "text/event-stream, application/json",
      })),
      body: payload,
    };
    return { translator, request };
  }

  /** The error event of an unexpected failure: never thrown out of run(). */
  private unexpected(err: unknown, t: TurnControl): BackendEvent {
    this.logger.error({ err }, "unexpected failure in openai backend");
    return {
      type: "error",
      error: t.stop
        ? t.stopError(t.stop)
        : {
            code: "backend_failed",
            message: `openai backend failed: ${err instanceof Error ? err.message : String(err)}`,
            status: 500,
            retryable: false,
          },
    };
  }

  /** A model server serves the models its `/models` lists. */
  readonly modelsComplete = true;

  /** The upstream's `GET /models` (vLLM, Ollama, llama.cpp, SGLang all answer it), with the context window when it says. */
  async models(signal: AbortSignal): Promise<DiscoveredModel[]> {
    const res = await this.pool.request({
      path: `${this.basePath}/models`,
      method: "GET",
      headers: this.headers({ accept: "application/json" }),
      signal: AbortSignal.any([signal, AbortSignal.timeout(this.options.healthTimeoutSeconds * 1000)]),
    });
    const text = await res.body.text();
    if (res.statusCode >= 400)
      throw new Error(`${this.display}/models answered ${res.statusCode}: ${upstreamErrorMessage(text)}`);
    const j = JSON.parse(text) as { data?: Array<Record<string, unknown>> };
    return (Array.isArray(j.data) ? j.data : []).flatMap((m) => {
      if (typeof m.id !== "string" || !m.id) return [];
      const meta = m.meta as { n_ctx_train?: unknown } | undefined;
      const ctx = [m.max_model_len, m.context_length, m.context_window, meta?.n_ctx_train].find(
        (v): v is number => typeof v === "number" && v > 0,
      );
      return [{ id: m.id, ...(ctx ? { contextWindow: ctx } : {}) }];
    });
  }

  async health(): Promise<BackendHealth> {
    const t0 = Date.now();
    try {
      const res = await this.pool.request({
        path: `${this.basePath}/models`,
        method: "GET",
        headers: this.headers({ accept: "application/json" }),
        signal: AbortSignal.timeout(this.options.healthTimeoutSeconds * 1000),
      });
      const text = await res.body.text();
      if (res.statusCode >= 400) {
        return {
          usable: false,
          detail: `${this.display}/models answered ${res.statusCode}: ${upstreamErrorMessage(text)}`,
        };
      }
      let ids: string[] = [];
      try {
        const j = JSON.parse(text) as { data?: Array<{ id?: unknown }> };
        ids = (j.data ?? []).map((m) => String(m.id ?? "")).filter(Boolean);
      } catch {
        // a server that answers /models with something else is still reachable
      }
      const list = ids.length ? `: ${ids.slice(0, 5).join(", ")}${ids.length > 5 ? ", …" : ""}` : "";
      return {
        usable: true,
        detail: `${this.display} reachable in ${Date.now() - t0} ms, ${ids.length} model${ids.length === 1 ? "" : "s"}${list}`,
      };
    } catch (err) {
      const code = errCode(err) ?? "";
      const name = (err as { name?: string })?.name;
      if (name === "TimeoutError" || name === "AbortError") {
        return {
          usable: false,
          detail: `${this.display}/models did not answer within ${this.options.healthTimeoutSeconds} s`,
        };
      }
      if (UNREACHABLE.has(code))
        return { usable: false, detail: `cannot reach ${this.display}: ${describeUnreachable(code)} (${code})` };
      return {
        usable: false,
        detail: `health check of ${this.display} failed: ${err instanceof Error ? err.message : String(err)}`,
      };
    }
  }

  async close(): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const graceful = this.pool.close().then(
      () => true,
      () => true,
    );
    const late = new Promise<false>((r) => (timer = setTimeout(() => r(false), 1000)));
    const ok = await Promise.race([graceful, late]);
    clearTimeout(timer);
    if (!ok) await this.pool.destroy().catch(() => {});
  }
}

export const openaiBackend: BackendModule<OpenAIBackendOptions> = {
  ...openaiDescriptor,
  create: (name, options, deps) => new OpenAIBackend(name, options, deps),
};
