/**
 * OpenAI-compatible upstream backend (`type: openai`): vLLM, Ollama, llama.cpp, LM Studio, or any
 * server with `POST <baseUrl>/chat/completions`.
 *
 * Passthrough only: the client's request is forwarded with `model` replaced, rewritten by the
 * compat rules (src/backends/compat.ts), and sent with `stream: true` when the client streams (or
 * always, with `streamUpstream: always`). A non-streaming client gets the upstream's JSON answer
 * translated once: parsing one body costs the bridge far less than parsing a stream of chunks
 * (the throughput benchmark's case); `always` trades that for idle/first-byte timeouts that can
 * detect a stuck server mid-answer.
 *
 * Every upstream chunk is translated into events as soon as it is read — no sleeps, no batching.
 * The only hold-backs are inherent: the tool-call extractor keeps text that may be the start of a
 * call, a `<` that may start a special token is held until the token is decided, and a native
 * tool call that the upstream interleaves with another is buffered so each call's chunks stay
 * together (see `StreamTranslator`).
 */
import { TextDecoder } from "node:util";
import { createParser, type EventSourceMessage, type ParseError } from "eventsource-parser";
import type { EventEmitter } from "node:events";
import { Pool, type Dispatcher } from "undici";
import { z } from "zod";
import type { Logger } from "pino";
import { applyRequestCompat, compatOverrideSchema, LOCAL_SERVER_COMPAT, mergeCompat, type CompatOverride, type CompatRules } from "./compat.js";
import type { BackendDeps, BackendModule } from "./module.js";
import type { Backend, BackendError, BackendEvent, BackendHealth, FinishReason, TurnInput, Usage } from "./types.js";
import { SpecialTokenStripper, ToolCallExtractor, type ExtractEvent } from "../toolcalls/extract.js";
import { newCallId } from "../util/ids.js";
import { readLimited } from "../util/read-limited.js";
import { Cancellation, onAbort } from "../util/cancel.js";

export const openaiOptionsSchema = z.strictObject({
  /** Upstream API root including `/v1`, e.g. `http://127.0.0.1:8000/v1` (vLLM), `http://127.0.0.1:11434/v1` (Ollama). */
  baseUrl: z.url({ protocol: /^https?$/, error: "baseUrl must be an http(s) URL such as http://127.0.0.1:8000/v1" }),
  /** Sent as `Authorization: Bearer <apiKey>`. Never logged. */
  apiKey: z.string().min(1).optional(),
  /** Extra request headers. */
  headers: z.record(z.string(), z.string()).default({}),
  /** Whole request, from sending to the last byte. */
  timeoutSeconds: z.number().positive().default(300),
  /** TCP (and TLS) connect. */
  connectTimeoutSeconds: z.number().positive().default(10),
  /** From sending the request to the first body byte (prompt processing happens here). */
  firstByteTimeoutSeconds: z.number().positive().default(120),
  /** Longest silence between two body chunks once the answer has started. */
  idleTimeoutSeconds: z.number().positive().default(60),
  /** Tool calls per reply; more are dropped (and the upstream request is stopped) to end runaway loops. */
  maxToolCalls: z.number().int().positive().default(20),
  /** Recognise tool calls a model wrote as text (when the request offered tools). */
  extractToolCalls: z.boolean().default(true),
  /** Compat rules on top of the local-server defaults (see src/backends/compat.ts). */
  compat: compatOverrideSchema.default({}),
  /** Per upstream model name (the name the backend is given): compat rules on top of `compat`. */
  modelCompat: z.record(z.string(), compatOverrideSchema).default({}),
  /** Object deep-merged into every request body, e.g. `{"options":{"num_ctx":32768}}`. Same as `compat.extraBody`. */
  extraBody: z.record(z.string(), z.unknown()).default({}),
  /** Most parallel connections to the upstream. */
  maxConnections: z.number().int().positive().default(32),
  /** Ask the upstream for a stream only when the client streams (default), or always. */
  streamUpstream: z.enum(["when-client-streams", "always"]).default("when-client-streams"),
  /** Timeout of the `GET <baseUrl>/models` health check. */
  healthTimeoutSeconds: z.number().positive().default(5),
});
export type OpenAIBackendOptions = z.infer<typeof openaiOptionsSchema>;

/** Effective compat rules for one upstream model: defaults ← options.compat ← extraBody ← modelCompat[model]. */
export function resolveCompat(options: Pick<OpenAIBackendOptions, "compat" | "extraBody" | "modelCompat">, model?: string, override?: CompatOverride): CompatRules {
  let rules = mergeCompat(LOCAL_SERVER_COMPAT, options.compat);
  if (options.extraBody && Object.keys(options.extraBody).length) rules = mergeCompat(rules, { extraBody: options.extraBody });
  const perModel = model !== undefined ? options.modelCompat?.[model] : undefined;
  if (perModel) rules = mergeCompat(rules, perModel);
  if (override) rules = mergeCompat(rules, override);
  return rules;
}

export { newCallId };

// ---------------------------------------------------------------------------------------------
// Upstream chunk → events

/** Upstream shapes we read (everything optional: servers differ). */
interface UpstreamToolCallDelta {
  index?: number;
  id?: string | null;
  type?: string;
  function?: { name?: string | null; arguments?: unknown } | null;
}
interface UpstreamDelta {
  role?: string;
  content?: unknown;
  reasoning_content?: unknown;
  reasoning?: unknown;
  refusal?: unknown;
  tool_calls?: UpstreamToolCallDelta[] | null;
}
interface UpstreamChoice {
  index?: number;
  delta?: UpstreamDelta | null;
  message?: UpstreamDelta | null;
  finish_reason?: string | null;
}
interface UpstreamUsage {
  prompt_tokens?: number;
  completion_tokens?: number;
  total_tokens?: number;
  prompt_tokens_details?: { cached_tokens?: number } | null;
  completion_tokens_details?: { reasoning_tokens?: number } | null;
}
interface UpstreamChunk {
  choices?: UpstreamChoice[] | null;
  usage?: UpstreamUsage | null;
}

interface NativeCall {
  /** Upstream id (raw), to tell calls apart when a server reuses an index. */
  upstreamId?: string;
  id?: string;
  name?: string;
  /** Arguments not yet emitted. */
  pending: string;
  /** All arguments seen (to judge whether the call looks complete). */
  args: string;
  /** Output index once the call was started in the output. */
  outIndex?: number;
  state: "buffered" | "live" | "closed" | "dropped";
  order: number;
}

export interface TranslatorOptions {
  /** Names of the tools the request offered; empty = no extraction. */
  tools: readonly string[];
  extract: boolean;
  maxToolCalls: number;
  logger?: Logger;
}

function mapFinish(reason: string | null | undefined): FinishReason {
  switch (reason) {
    case "length":
      return "length";
    case "content_filter":
      return "content_filter";
    case "tool_calls":
    case "function_call":
      return "tool_calls";
    default:
      return "stop";
  }
}

function mapUsage(u: UpstreamUsage | null | undefined): Usage | undefined {
  if (!u || typeof u !== "object") return undefined;
  const prompt = typeof u.prompt_tokens === "number" ? u.prompt_tokens : undefined;
  const completion = typeof u.completion_tokens === "number" ? u.completion_tokens : undefined;
  if (prompt === undefined && completion === undefined) return undefined;
  const usage: Usage = {
    promptTokens: prompt ?? 0,
    completionTokens: completion ?? 0,
    totalTokens: typeof u.total_tokens === "number" ? u.total_tokens : (prompt ?? 0) + (completion ?? 0),
  };
  const cached = u.prompt_tokens_details?.cached_tokens;
  if (typeof cached === "number" && cached > 0) usage.cachedTokens = cached;
  const reasoning = u.completion_tokens_details?.reasoning_tokens;
  if (typeof reasoning === "number" && reasoning > 0) usage.reasoningTokens = reasoning;
  return usage;
}

function argsText(v: unknown): string {
  if (typeof v === "string") return v;
  if (v == null) return "";
  return JSON.stringify(v);
}

function looksComplete(args: string): boolean {
  if (!args.trim()) return false;
  try {
    JSON.parse(args);
    return true;
  } catch {
    return false;
  }
}

/**
 * Turns upstream chunks (or one non-streaming `chat.completion`) into bridge events. One instance
 * per turn. `chunk()` returns the events of one upstream chunk at once; `finish()` flushes what was
 * held back and returns the closing `usage` + `done`.
 */
export class StreamTranslator {
  private readonly extractor?: ToolCallExtractor;
  private readonly maxToolCalls: number;
  private readonly logger?: Logger;
  private nextIndex = 0;
  private readonly usedIds = new Set<string>();
  private readonly calls: NativeCall[] = [];
  private readonly byKey = new Map<number, NativeCall>();
  private live?: NativeCall;
  /** Special tokens in text (when there is no extractor: the extractor strips them itself). */
  private readonly textStripper?: SpecialTokenStripper;
  private readonly reasoningStripper = new SpecialTokenStripper();
  private usage?: Usage;
  private upstreamFinish?: string;
  /** Calls dropped because of the cap. */
  droppedCalls = 0;
  /** Set when a call beyond the cap appeared: the caller should stop reading the upstream. */
  capReached = false;
  /** A finish_reason was seen. */
  sawFinish = false;

  constructor(opts: TranslatorOptions) {
    this.maxToolCalls = opts.maxToolCalls;
    this.logger = opts.logger;
    if (opts.extract && opts.tools.length > 0) {
      // One more than the cap so the translator sees (and reports) the first call beyond it.
      this.extractor = new ToolCallExtractor({ tools: opts.tools, maxCalls: opts.maxToolCalls + 1, newId: newCallId, stripSpecialTokens: true });
    } else {
      this.textStripper = new SpecialTokenStripper();
    }
  }

  /** Tool calls emitted so far (native and extracted). */
  get toolCalls(): number {
    return this.nextIndex;
  }

  /** Events for one streamed `chat.completion.chunk`. */
  chunk(c: UpstreamChunk): BackendEvent[] {
    const out: BackendEvent[] = [];
    const choice = Array.isArray(c.choices) ? (c.choices.find((ch) => (ch?.index ?? 0) === 0) ?? c.choices[0]) : undefined;
    if (choice) {
      const delta = choice.delta ?? choice.message;
      if (delta && typeof delta === "object") this.delta(delta, out);
      if (typeof choice.finish_reason === "string" && choice.finish_reason) {
        this.sawFinish = true;
        this.upstreamFinish = choice.finish_reason;
      }
    }
    const u = mapUsage(c.usage);
    if (u) this.usage = u;
    return out;
  }

  /**
   * Events for a whole `chat.completion` (the answer to a non-streamed request, or a JSON reply to
   * a streaming one): its message is one delta whose tool calls are told apart by position.
   */
  message(body: UpstreamChunk): BackendEvent[] {
    const out: BackendEvent[] = [];
    const choice = Array.isArray(body.choices) ? body.choices[0] : undefined;
    const msg = choice?.message ?? choice?.delta;
    if (msg && typeof msg === "object") this.delta(msg, out, true);
    this.sawFinish = true;
    this.upstreamFinish = typeof choice?.finish_reason === "string" && choice.finish_reason ? choice.finish_reason : "stop";
    const u = mapUsage(body.usage);
    if (u) this.usage = u;
    return out;
  }

  /** Flush everything held back; closing events (`usage`, `done`). Call once. */
  finish(): BackendEvent[] {
    const out: BackendEvent[] = [];
    const r = this.reasoningStripper.end();
    if (r) out.push({ type: "reasoning", text: r });
    // After the cap, whatever the extractor still holds is part of the runaway reply: dropped.
    if (!this.capReached && this.extractor) for (const ev of this.extractor.end()) this.extracted(ev, out);
    this.flushText(out);
    if (!this.capReached) this.flushBufferedCalls(out);
    const dropped = this.droppedCalls + (this.extractor?.droppedCalls ?? 0);
    if (dropped > 0) this.logger?.warn({ dropped, kept: this.nextIndex }, "tool-call cap reached: extra calls dropped");
    if (this.usage) out.push({ type: "usage", usage: this.usage });
    let finishReason: FinishReason = this.nextIndex > 0 ? "tool_calls" : mapFinish(this.upstreamFinish);
    if (finishReason === "tool_calls" && this.nextIndex === 0) finishReason = "stop";
    out.push({ type: "done", finishReason });
    return out;
  }

  /** `whole`: the delta is a whole message, whose tool calls are numbered by position (any `index` ignored). */
  private delta(d: UpstreamDelta, out: BackendEvent[], whole = false): void {
    const reasoning = typeof d.reasoning_content === "string" && d.reasoning_content ? d.reasoning_content : typeof d.reasoning === "string" && d.reasoning ? d.reasoning : "";
    if (reasoning) {
      const r = this.reasoningStripper.push(reasoning);
      if (r) out.push({ type: "reasoning", text: r });
    }
    if (typeof d.content === "string" && d.content) this.text(d.content, out);
    if (typeof d.refusal === "string" && d.refusal) this.text(d.refusal, out);
    if (Array.isArray(d.tool_calls)) {
      d.tool_calls.forEach((tc, pos) => {
        if (tc && typeof tc === "object") this.nativeCall(tc, pos, out, whole);
      });
    }
  }

  private text(raw: string, out: BackendEvent[]): void {
    if (this.capReached) return;
    if (this.extractor) {
      for (const ev of this.extractor.push(raw)) this.extracted(ev, out);
    } else {
      this.pushText(this.textStripper?.push(raw) ?? raw, out);
    }
  }

  private extracted(ev: ExtractEvent, out: BackendEvent[]): void {
    if (ev.type === "text") this.pushText(ev.text, out);
    else {
      if (this.live) this.live.state = "closed"; // keep the live native call's chunks together
      this.live = undefined;
      this.flushText(out);
      const index = this.claimIndex(ev.call.name);
      if (index === undefined) return;
      out.push({ type: "tool_call", index, id: this.cleanId(ev.call.id), name: ev.call.name, argumentsDelta: ev.call.arguments });
    }
  }

  /** Text the special-token stripper still holds (a possible token's start), before a call or at the end. */
  private flushText(out: BackendEvent[]): void {
    if (this.textStripper) this.pushText(this.textStripper.end(), out);
  }

  private pushText(t: string, out: BackendEvent[]): void {
    if (!t) return;
    const last = out[out.length - 1];
    if (last?.type === "text") last.text += t; // same upstream chunk: one event
    else out.push({ type: "text", text: t });
  }

  private cleanId(raw: string | null | undefined): string {
    let id = typeof raw === "string" ? raw.replace(/[^A-Za-z0-9]/g, "") : "";
    if (!id || this.usedIds.has(id)) id = newCallId();
    this.usedIds.add(id);
    return id;
  }

  /** Next output index, or undefined (and the cap flag set) when the cap is reached. */
  private claimIndex(name: string | undefined): number | undefined {
    if (this.nextIndex >= this.maxToolCalls) {
      this.droppedCalls++;
      if (!this.capReached) this.logger?.warn({ max: this.maxToolCalls, name }, "tool-call cap reached: dropping further calls and stopping the upstream");
      this.capReached = true;
      return undefined;
    }
    return this.nextIndex++;
  }

  private nativeCall(tc: UpstreamToolCallDelta, pos: number, out: BackendEvent[], byPosition: boolean): void {
    if (this.capReached) return;
    const key = !byPosition && typeof tc.index === "number" ? tc.index : pos;
    const upstreamId = typeof tc.id === "string" && tc.id ? tc.id : undefined;
    const name = typeof tc.function?.name === "string" && tc.function.name ? tc.function.name : undefined;
    const args = argsText(tc.function?.arguments);

    let call = this.byKey.get(key);
    // A server that reuses index 0 for every call (seen with Ollama) marks a new call by a new id.
    if (call && upstreamId && call.upstreamId && upstreamId !== call.upstreamId) call = undefined;
    if (!call) {
      call = { upstreamId, pending: "", args: "", state: "buffered", order: this.calls.length };
      this.calls.push(call);
      this.byKey.set(key, call);
    }
    if (upstreamId && !call.upstreamId) call.upstreamId = upstreamId;
    if (name && !call.name) call.name = name;
    call.args += args;

    switch (call.state) {
      case "dropped":
        return;
      case "closed":
        // A late chunk for a call we already moved past. Whitespace is harmless to drop; anything
        // else is emitted (out of order) rather than lost.
        if (args.trim()) {
          this.logger?.warn({ index: call.outIndex }, "upstream sent a tool-call chunk after another call started");
          out.push({ type: "tool_call", index: call.outIndex!, argumentsDelta: args });
        }
        return;
      case "live":
        if (args) out.push({ type: "tool_call", index: call.outIndex!, argumentsDelta: args });
        return;
      case "buffered":
        call.pending += args;
        if (!this.live || this.live === call || (this.live.name !== undefined && looksComplete(this.live.args))) this.promote(call, out);
        return;
    }
  }

  /** Make `call` the live call (closing the previous one) once its name is known. */
  private promote(call: NativeCall, out: BackendEvent[]): void {
    if (this.live && this.live !== call) this.live.state = "closed";
    this.live = call;
    if (call.name === undefined) return; // started once the name arrives; other calls wait
    this.start(call, out);
  }

  private start(call: NativeCall, out: BackendEvent[]): void {
    const index = this.claimIndex(call.name);
    if (index === undefined) {
      call.state = "dropped";
      return;
    }
    this.flushText(out);
    call.outIndex = index;
    call.state = "live";
    call.id = this.cleanId(call.upstreamId);
    out.push({ type: "tool_call", index, id: call.id, name: call.name, argumentsDelta: call.pending });
    call.pending = "";
  }

  private flushBufferedCalls(out: BackendEvent[]): void {
    for (const call of [...this.calls].sort((a, b) => a.order - b.order)) {
      if (call.state !== "buffered") continue;
      if (call.name === undefined) {
        this.logger?.warn("upstream tool call without a name dropped");
        call.state = "dropped";
        continue;
      }
      this.start(call, out);
      call.state = "closed";
      if (this.capReached) break;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Errors

function errCode(err: unknown): string | undefined {
  let e: unknown = err;
  for (let i = 0; i < 5 && e && typeof e === "object"; i++) {
    const c = (e as { code?: unknown }).code;
    if (typeof c === "string" && c !== "UND_ERR_ABORTED" && !c.startsWith("ERR_")) return c;
    e = (e as { cause?: unknown }).cause;
  }
  const c = (err as { code?: unknown })?.code;
  return typeof c === "string" ? c : undefined;
}

const UNREACHABLE = new Set(["ECONNREFUSED", "ENOTFOUND", "EHOSTUNREACH", "ENETUNREACH", "EAI_AGAIN", "UND_ERR_CONNECT_TIMEOUT", "ETIMEDOUT", "EADDRNOTAVAIL"]);
const SOCKET_CLOSED = new Set(["UND_ERR_SOCKET", "ECONNRESET", "EPIPE", "UND_ERR_CLOSED"]);

function describeUnreachable(code: string): string {
  switch (code) {
    case "ECONNREFUSED":
      return "connection refused — is the server running?";
    case "ENOTFOUND":
    case "EAI_AGAIN":
      return "host name not found";
    case "UND_ERR_CONNECT_TIMEOUT":
    case "ETIMEDOUT":
      return "connect timed out";
    default:
      return "network unreachable";
  }
}

/** The upstream's own error message from an error body (OpenAI, vLLM, Ollama, llama.cpp shapes, or text). */
export function upstreamErrorMessage(raw: string): string {
  const text = raw.trim();
  try {
    const j = JSON.parse(text) as unknown;
    if (j && typeof j === "object") {
      const o = j as { error?: unknown; message?: unknown; detail?: unknown };
      if (typeof o.error === "string") return o.error;
      if (o.error && typeof o.error === "object" && typeof (o.error as { message?: unknown }).message === "string") return (o.error as { message: string }).message;
      if (typeof o.message === "string") return o.message;
      if (typeof o.detail === "string") return o.detail;
      if (Array.isArray(o.detail)) return JSON.stringify(o.detail).slice(0, 500);
    }
  } catch {
    // not JSON: use the text
  }
  return text.length > 500 ? `${text.slice(0, 500)}…` : text || "(empty body)";
}

/** An answer's format by its content type; "sniff": decided by its first bytes. */
function bodyFormat(contentType: string | string[] | undefined): "sse" | "json" | "sniff" {
  const ctype = String(contentType ?? "").toLowerCase();
  return ctype.includes("event-stream") ? "sse" : ctype.includes("json") ? "json" : "sniff";
}

/** The error an HTTP error status of the upstream becomes (its own message, retry hint, retryable). */
function statusError(status: number, headers: Record<string, string | string[] | undefined>, text: string): BackendError {
  const retry = status === 429 || status === 503 ? retryAfterText(headers["retry-after"], headers["retry-after-ms"]) : "";
  return { code: "upstream_error", message: `upstream ${status}: ${upstreamErrorMessage(text)}${retry}`, status, retryable: status === 408 || status === 409 || status === 429 || status >= 500 };
}

function retryAfterText(h: string | string[] | undefined, hMs: string | string[] | undefined): string {
  const ms = Array.isArray(hMs) ? hMs[0] : hMs;
  if (ms && /^\d+(\.\d+)?$/.test(ms)) return ` (retry after ${Math.ceil(Number(ms) / 1000)} s)`;
  const v = Array.isArray(h) ? h[0] : h;
  if (!v) return "";
  if (/^\d+(\.\d+)?$/.test(v.trim())) return ` (retry after ${v.trim()} s)`;
  const when = Date.parse(v);
  if (!Number.isNaN(when)) return ` (retry after ${Math.max(0, Math.ceil((when - Date.now()) / 1000))} s)`;
  return ` (retry after ${v})`;
}

/** The URL without credentials, for messages and logs. */
function safeUrl(u: URL): string {
  return `${u.protocol}//${u.host}${u.pathname.replace(/\/$/, "")}`;
}

type StopReason = "aborted" | "timeout" | "first_byte" | "idle";

// ---------------------------------------------------------------------------------------------
// Backend

const MAX_ERROR_BODY = 64 * 1024;
const MAX_JSON_BODY = 64 * 1024 * 1024;
const MAX_SSE_BUFFER = 16 * 1024 * 1024;

/**
 * Resolved compat rules per options object and model name: resolving them merges several rule
 * sets, which showed in the per-request CPU profile. Options are validated once and never change;
 * model names come from the configuration, so each map stays small.
 */
const compatCache = new WeakMap<object, Map<string, CompatRules>>();
function cachedCompat(options: Pick<OpenAIBackendOptions, "compat" | "extraBody" | "modelCompat">, model: string): CompatRules {
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
export function buildUpstreamBody(options: Pick<OpenAIBackendOptions, "compat" | "extraBody" | "modelCompat"> & { streamUpstream?: "always" | "when-client-streams" }, turn: Pick<TurnInput, "model" | "request">): Record<string, unknown> {
  const compat = cachedCompat(options, turn.model);
  const req = turn.request as Record<string, unknown>;
  const stream = options.streamUpstream === "always" || req.stream === true;
  const base: Record<string, unknown> = { ...req, model: turn.model, stream };
  if (stream && compat.supportsStreamOptions) {
    const so = req.stream_options && typeof req.stream_options === "object" ? (req.stream_options as Record<string, unknown>) : {};
    base.stream_options = { ...so, include_usage: true };
  } else if (!stream) {
    delete base.stream_options;
  }
  const body = applyRequestCompat(base, compat);
  body.model = turn.model;
  body.stream = stream;
  return body;
}

type Body = Dispatcher.ResponseData["body"];

/** Reads a response body chunk by chunk under the first-byte / idle timers. */
class BodyReader {
  ended = false;
  private first = true;
  /** Made on the first read: a JSON answer read by `readWhole` never iterates the body. */
  private iter?: AsyncIterator<Buffer>;
  constructor(
    private readonly body: Body,
    private readonly arm: (first: boolean) => void,
    private readonly disarm: () => void,
  ) {}
  /** The next chunk, or null at the end of the body. Throws on socket errors and aborts. */
  async next(): Promise<Buffer | null> {
    if (this.ended) return null;
    this.arm(this.first);
    try {
      this.iter ??= this.body[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
      const r = await this.iter.next();
      if (r.done) {
        this.ended = true;
        return null;
      }
      this.first = false;
      return r.value;
    } finally {
      this.disarm();
    }
  }
}

/**
 * A whole JSON body (a JSON answer to a streaming request) under the same timers as `BodyReader`
 * (first byte, then idle between chunks). `undefined` when the body grew beyond `limit` (then the
 * body is left to the caller's cleanup). Rejects on socket errors and aborts.
 */
async function readWhole(body: Body, limit: number, arm: (first: boolean) => void, disarm: () => void): Promise<Buffer | undefined> {
  arm(true);
  try {
    return await readLimited(body, limit, () => arm(false));
  } finally {
    disarm();
  }
}

/** A whole upstream answer, read by `fetchWhole`. */
interface WholeResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
  /** The body grew beyond the limit: `body` holds its start and the request was stopped. */
  truncated: boolean;
}

/** A failure of `fetchWhole`; `answered` tells whether the upstream had started its answer. */
class WholeError extends Error {
  constructor(
    override readonly cause: Error,
    readonly answered: boolean,
  ) {
    super(cause.message);
  }
}

/**
 * One request whose answer is read whole (the non-streamed upstream answer of a non-streaming
 * client), on undici's dispatch API: status, headers and body chunks arrive as callbacks, with no
 * response stream, async iterator or promise per chunk — the cheapest way to the bytes, and this
 * runs once per turn. Stopped through `abort` (client gone, shutdown, timeout). A body beyond
 * `limit` bytes (`errorLimit` for an error status) is cut there and the request stopped.
 */
class WholeHandler implements Dispatcher.DispatchHandler {
  private status = 0;
  private headers: WholeResponse["headers"] = {};
  private chunks: Buffer[] = [];
  private size = 0;
  private cap: number;
  private settled = false;

  constructor(
    limit: number,
    private readonly errorLimit: number,
    private readonly abort: Cancellation,
    private readonly resolve: (r: WholeResponse) => void,
    private readonly reject: (e: WholeError) => void,
  ) {
    this.cap = limit;
  }

  /** Stops following `abort` (set once the request has started). */
  private stopFollowing = () => {};

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.stopFollowing = this.abort.onAbort(() => controller.abort(this.abort.reason as Error));
  }

  onResponseStart(_c: Dispatcher.DispatchController, statusCode: number, headers: Record<string, string | string[]>): void {
    if (statusCode < 200) return; // 1xx informational
    this.status = statusCode;
    this.headers = headers;
    if (statusCode >= 400) this.cap = Math.min(this.cap, this.errorLimit);
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.settled) return;
    if (this.size + chunk.length > this.cap) {
      this.chunks.push(chunk.subarray(0, this.cap - this.size));
      this.size = this.cap;
      this.finish(true);
      controller.abort(new Error("body larger than the limit"));
      return;
    }
    this.chunks.push(chunk);
    this.size += chunk.length;
  }

  onResponseEnd(): void {
    this.finish(false);
  }

  onResponseError(_c: Dispatcher.DispatchController, err: Error): void {
    this.stopFollowing();
    if (this.settled) return;
    this.settled = true;
    this.reject(new WholeError(err, this.status > 0));
  }

  private finish(truncated: boolean): void {
    this.stopFollowing();
    if (this.settled) return;
    this.settled = true;
    const body = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks, this.size);
    this.resolve({ status: this.status, headers: this.headers, body, truncated });
  }
}

function fetchWhole(pool: Pool, options: Dispatcher.DispatchOptions, limit: number, errorLimit: number, abort: Cancellation): Promise<WholeResponse> {
  return new Promise((resolve, reject) => {
    pool.dispatch(options, new WholeHandler(limit, errorLimit, abort, resolve, reject));
  });
}

/** A body that has been read to its end (for parsing a whole answer as an event stream). */
const ENDED_READER = { ended: true, next: async (): Promise<Buffer | null> => null };

/** Read to the end of the body for at most `ms` (a few chunks); errors are ignored. */
async function drainBriefly(reader: BodyReader, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<"late">((r) => (timer = setTimeout(() => r("late"), ms)));
  try {
    for (let i = 0; i < 16; i++) {
      const c = await Promise.race([reader.next(), late]);
      if (c === "late" || c === null) break;
    }
  } catch {
    // the body is destroyed by the caller's cleanup
  } finally {
    clearTimeout(timer);
  }
}

class OpenAIBackend implements Backend {
  readonly type = "openai";
  private readonly pool: Pool;
  private readonly basePath: string;
  private readonly display: string;
  private readonly logger: Logger;

  constructor(
    readonly name: string,
    private readonly options: OpenAIBackendOptions,
    deps: BackendDeps,
  ) {
    const base = new URL(options.baseUrl);
    this.basePath = base.pathname.replace(/\/+$/, "");
    this.display = safeUrl(base);
    this.logger = deps.logger.child({ backend: name });
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

  run(turn: TurnInput): AsyncIterable<BackendEvent> {
    return this.turn(turn);
  }

  private async *turn(turn: TurnInput): AsyncGenerator<BackendEvent> {
    const turnCancel = turn.cancel ?? turn.signal; // not `signal` when there is a cheaper one
    if (turnCancel.aborted) {
      yield { type: "error", error: { code: "aborted", message: "request aborted before it was sent", retryable: false } };
      return;
    }
    const o = this.options;
    const url = `${this.display}/chat/completions`;
    // Stops the upstream request (client gone, shutdown, a timeout): undici takes it as `signal`.
    const ctl = new Cancellation();
    let stop: StopReason | undefined;
    const halt = (why: StopReason) => {
      stop ??= why;
      ctl.abort();
    };
    const stopFollowing = onAbort(turnCancel, () => halt("aborted"));
    const total = setTimeout(() => halt("timeout"), o.timeoutSeconds * 1000);
    // First byte: one deadline from sending the request to the first body byte (headers included).
    // A non-streamed upstream answer only starts when it is complete: the whole-turn limit applies.
    const upstreamStreams = o.streamUpstream === "always" || turn.request.stream === true;
    const firstByteDeadline = Date.now() + (upstreamStreams ? o.firstByteTimeoutSeconds : o.timeoutSeconds) * 1000;
    let timer: NodeJS.Timeout | undefined;
    const arm = (first: boolean) => {
      clearTimeout(timer);
      // Non-streamed: the first-byte deadline IS the whole-turn deadline, which `total` already
      // enforces (with the whole-turn message); a second timer per phase would only race it.
      if (first && !upstreamStreams) timer = undefined;
      else timer = first ? setTimeout(() => halt("first_byte"), Math.max(0, firstByteDeadline - Date.now())) : setTimeout(() => halt("idle"), o.idleTimeoutSeconds * 1000);
    };
    const disarm = () => clearTimeout(timer);

    const stopError = (why: StopReason): BackendError => {
      switch (why) {
        case "aborted":
          return { code: "aborted", message: "request aborted", retryable: false };
        case "timeout":
          return { code: "backend_timeout", message: `upstream ${url} did not finish within ${o.timeoutSeconds} s`, status: 504, retryable: true };
        case "first_byte":
          return { code: "backend_timeout", message: `upstream ${url} sent nothing for ${o.firstByteTimeoutSeconds} s after the request (first-byte timeout)`, status: 504, retryable: true };
        case "idle":
          return { code: "backend_timeout", message: `upstream ${url} went silent for ${o.idleTimeoutSeconds} s in the middle of the answer (idle timeout)`, status: 504, retryable: true };
      }
    };
    const failure = (err: unknown, phase: "connect" | "stream"): BackendError => {
      if (stop) return stopError(stop);
      const code = errCode(err) ?? "";
      if (phase === "connect" && UNREACHABLE.has(code)) {
        return { code: "backend_unavailable", message: `cannot reach upstream ${this.display}: ${describeUnreachable(code)} (${code})`, status: 503, retryable: true };
      }
      if (SOCKET_CLOSED.has(code)) {
        return {
          code: "upstream_error",
          message: phase === "connect" ? `upstream ${this.display} closed the connection before answering (${code})` : `upstream ${this.display} closed the connection in the middle of the answer (${code})`,
          status: 502,
          retryable: true,
        };
      }
      const msg = err instanceof Error ? err.message : String(err);
      return { code: "backend_failed", message: `request to upstream ${url} failed: ${msg}${code ? ` (${code})` : ""}`, status: 502, retryable: true };
    };

    let body: Body | undefined;
    let reader: BodyReader | undefined;
    let bodyEnded = false;
    const state = { sawDone: false };
    try {
      const tools = (turn.request.tools ?? []).map((t) => t.function.name).filter((n): n is string => !!n);
      const translator = new StreamTranslator({
        tools,
        extract: o.extractToolCalls && turn.request.tool_choice !== "none",
        maxToolCalls: o.maxToolCalls,
        logger: this.logger,
      });
      const payload = JSON.stringify(buildUpstreamBody(o, turn));
      this.logger.debug({ url, model: turn.model, bytes: payload.length, tools: tools.length }, "upstream request");

      const request = {
        path: `${this.basePath}/chat/completions`,
        method: "POST" as const,
        headers: (this.chatHeaders ??= this.headers({ "content-type": "application/json", accept: "text/event-stream, application/json" })),
        body: payload,
      };

      if (!upstreamStreams) {
        // --- non-streamed: the answer is read whole, then translated once ---
        let whole: WholeResponse | undefined;
        for (let attempt = 0; attempt < 2 && !whole; attempt++) {
          try {
            whole = await fetchWhole(this.pool, request, MAX_JSON_BODY, MAX_ERROR_BODY, ctl);
          } catch (err) {
            const answered = err instanceof WholeError && err.answered;
            // One retry when a pooled keep-alive socket turns out to be closed before any answer.
            if (attempt === 0 && !answered && !stop && SOCKET_CLOSED.has(errCode(err) ?? "")) continue;
            yield { type: "error", error: failure(err, answered ? "stream" : "connect") };
            return;
          }
        }
        if (!whole) throw new Error("no response");
        this.logger.debug({ status: whole.status }, "upstream response");
        if (whole.status >= 400) {
          yield { type: "error", error: statusError(whole.status, whole.headers, whole.body.toString("utf8")) };
          return;
        }
        if (whole.truncated) {
          yield { type: "error", error: { code: "upstream_error", message: `upstream ${url} sent a body larger than ${MAX_JSON_BODY} bytes`, status: 502, retryable: false } };
          return;
        }
        let text = whole.body.toString("utf8");
        if (text.charCodeAt(0) === 0xfeff) text = text.slice(1); // as TextDecoder does
        // JSON (the usual answer), else an event stream (a server that streams anyway).
        const format = bodyFormat(whole.headers["content-type"]);
        if (format === "json" || (format === "sniff" && text.trimStart().startsWith("{"))) yield* this.json(translator, text, url);
        else yield* this.sse(translator, text, ENDED_READER, new TextDecoder("utf-8"), failure, url, state);
        return;
      }

      // --- send (one retry when a pooled keep-alive socket turns out to be closed) ---
      arm(true);
      let res: Dispatcher.ResponseData | undefined;
      for (let attempt = 0; attempt < 2 && !res; attempt++) {
        try {
          res = await this.pool.request({ ...request, signal: ctl as unknown as EventEmitter });
        } catch (err) {
          if (attempt === 0 && !stop && SOCKET_CLOSED.has(errCode(err) ?? "")) continue;
          disarm();
          yield { type: "error", error: failure(err, "connect") };
          return;
        }
      }
      disarm();
      if (!res) throw new Error("no response");
      body = res.body;
      reader = new BodyReader(body, arm, disarm);
      this.logger.debug({ status: res.statusCode }, "upstream response");

      // --- HTTP error status ---
      if (res.statusCode >= 400) {
        let text = "";
        try {
          for (let c = await reader.next(); c; c = await reader.next()) {
            text += c.toString("utf8");
            if (text.length > MAX_ERROR_BODY) break;
          }
        } catch {
          if (stop) {
            yield { type: "error", error: stopError(stop) };
            return;
          }
        }
        yield { type: "error", error: statusError(res.statusCode, res.headers, text) };
        return;
      }

      // --- body format: by content type, else sniffed from the first bytes ---
      let mode = bodyFormat(res.headers["content-type"]);
      if (mode === "json") {
        // A plain JSON answer to a streaming request: read it whole, translate it once.
        let bytes: Buffer | undefined;
        try {
          bytes = await readWhole(body, MAX_JSON_BODY, arm, disarm);
        } catch (err) {
          yield { type: "error", error: failure(err, "stream") };
          return;
        }
        if (!bytes) {
          yield { type: "error", error: { code: "upstream_error", message: `upstream ${url} sent a body larger than ${MAX_JSON_BODY} bytes`, status: 502, retryable: false } };
          return;
        }
        bodyEnded = true;
        let text = bytes.toString("utf8");
        if (text.charCodeAt(0) === 0xfeff) text = text.slice(1); // as TextDecoder does
        yield* this.json(translator, text, url);
        return;
      }
      const decoder = new TextDecoder("utf-8");
      let text = "";
      while (mode !== "sse") {
        let c: Buffer | null;
        try {
          c = await reader.next();
        } catch (err) {
          yield { type: "error", error: failure(err, "stream") };
          return;
        }
        text += c ? decoder.decode(c, { stream: true }) : decoder.decode();
        if (mode === "sniff") {
          const lead = text.trimStart();
          if (lead.startsWith("{")) mode = "json";
          else if (lead.length > 0 || !c) mode = "sse";
        }
        if (text.length > MAX_JSON_BODY) {
          yield { type: "error", error: { code: "upstream_error", message: `upstream ${url} sent a body larger than ${MAX_JSON_BODY} bytes`, status: 502, retryable: false } };
          return;
        }
        if (!c) break;
      }
      if (mode === "json") {
        yield* this.json(translator, text, url);
        return;
      }
      yield* this.sse(translator, text, reader, decoder, failure, url, state);
      // After `done`: servers end the body right after [DONE]. Reading that end (briefly) returns the
      // socket to the pool before the next turn asks for one. The consumer already has `done`.
      if (state.sawDone && !stop && !reader.ended) await drainBriefly(reader, 250);
    } catch (err) {
      // Never throw out of run().
      this.logger.error({ err }, "unexpected failure in openai backend");
      yield { type: "error", error: stop ? stopError(stop) : { code: "backend_failed", message: `openai backend failed: ${err instanceof Error ? err.message : String(err)}`, status: 500, retryable: false } };
    } finally {
      clearTimeout(total);
      disarm();
      stopFollowing();
      if (body && !bodyEnded && !reader?.ended) {
        if (state.sawDone && !stop) {
          // The answer is complete; let the socket go back to the pool once the body ends.
          body.dump({ limit: 64 * 1024 }).catch(() => {});
        } else {
          ctl.abort();
          body.destroy();
        }
      }
    }
  }

  /** A whole `chat.completion` JSON body (a plain JSON reply to our streaming request). */
  private *json(translator: StreamTranslator, text: string, url: string): Generator<BackendEvent> {
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      yield { type: "error", error: { code: "upstream_error", message: `upstream ${url} sent invalid JSON: ${text.slice(0, 200)}`, status: 502, retryable: true } };
      return;
    }
    const bad = chunkError(parsed);
    if (bad) {
      yield { type: "error", error: bad };
      return;
    }
    const obj = parsed as UpstreamChunk;
    if (!Array.isArray(obj.choices) || obj.choices.length === 0) {
      yield { type: "error", error: { code: "upstream_error", message: `upstream ${url} answered JSON without choices: ${text.slice(0, 200)}`, status: 502, retryable: true } };
      return;
    }
    this.logger.debug("upstream answered a streaming request with plain JSON; converted to events");
    yield* translator.message(obj);
    yield* translator.finish();
  }

  /** An SSE body: each network chunk is parsed and its events are yielded before the next read. */
  private async *sse(
    translator: StreamTranslator,
    initial: string,
    reader: Pick<BodyReader, "ended" | "next">,
    decoder: TextDecoder,
    failure: (err: unknown, phase: "connect" | "stream") => BackendError,
    url: string,
    state: { sawDone: boolean },
  ): AsyncGenerator<BackendEvent> {
    const messages: EventSourceMessage[] = [];
    let parseError: ParseError | undefined;
    let oddLine: string | undefined;
    const parser = createParser({
      maxBufferSize: MAX_SSE_BUFFER,
      onEvent: (e) => messages.push(e),
      onError: (e) => {
        if (e.type === "unknown-field") oddLine ??= e.line ?? e.field ?? "";
        else if (e.type === "max-buffer-size-exceeded") parseError = e;
      },
    });
    let sawData = false;
    let eof = reader.ended;
    if (initial) parser.feed(initial);
    if (eof) parser.feed("\n\n");
    for (;;) {
      if (parseError) {
        yield { type: "error", error: { code: "upstream_error", message: `upstream ${url} sent a malformed event stream: ${parseError.message}`, status: 502, retryable: true } };
        return;
      }
      const events: BackendEvent[] = [];
      let finished = false;
      while (messages.length) {
        const m = messages.shift()!;
        const payload = m.data.trim();
        if (!payload) continue;
        sawData = true;
        if (payload === "[DONE]") {
          finished = true;
          state.sawDone = true;
          break;
        }
        let obj: unknown;
        try {
          obj = JSON.parse(payload);
        } catch {
          yield* events;
          yield { type: "error", error: { code: "upstream_error", message: `upstream ${url} sent malformed stream data (not JSON): ${payload.slice(0, 200)}`, status: 502, retryable: true } };
          return;
        }
        const bad = chunkError(obj, m.event);
        if (bad) {
          yield* events;
          yield { type: "error", error: bad };
          return;
        }
        if (obj && typeof obj === "object") events.push(...translator.chunk(obj as UpstreamChunk));
        if (translator.capReached) {
          finished = true;
          break;
        }
      }
      yield* events;
      if (finished) {
        yield* translator.finish();
        return;
      }
      if (eof) {
        if (translator.sawFinish) {
          yield* translator.finish();
          return;
        }
        const why = sawData
          ? "the stream ended before a finish_reason or [DONE]"
          : oddLine !== undefined
            ? `it is not an event stream (unexpected line: ${oddLine.slice(0, 200)})`
            : "the body was empty";
        yield { type: "error", error: { code: "upstream_error", message: `upstream ${url} sent an incomplete answer: ${why}`, status: 502, retryable: true } };
        return;
      }
      let chunk: Buffer | null;
      try {
        chunk = await reader.next();
      } catch (err) {
        yield { type: "error", error: failure(err, "stream") };
        return;
      }
      if (chunk) parser.feed(decoder.decode(chunk, { stream: true }));
      else {
        eof = true;
        parser.feed(decoder.decode() + "\n\n");
      }
    }
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
        return { usable: false, detail: `${this.display}/models answered ${res.statusCode}: ${upstreamErrorMessage(text)}` };
      }
      let ids: string[] = [];
      try {
        const j = JSON.parse(text) as { data?: Array<{ id?: unknown }> };
        ids = (j.data ?? []).map((m) => String(m.id ?? "")).filter(Boolean);
      } catch {
        // a server that answers /models with something else is still reachable
      }
      const list = ids.length ? `: ${ids.slice(0, 5).join(", ")}${ids.length > 5 ? ", …" : ""}` : "";
      return { usable: true, detail: `${this.display} reachable in ${Date.now() - t0} ms, ${ids.length} model${ids.length === 1 ? "" : "s"}${list}` };
    } catch (err) {
      const code = errCode(err) ?? "";
      const name = (err as { name?: string })?.name;
      if (name === "TimeoutError" || name === "AbortError") {
        return { usable: false, detail: `${this.display}/models did not answer within ${this.options.healthTimeoutSeconds} s` };
      }
      if (UNREACHABLE.has(code)) return { usable: false, detail: `cannot reach ${this.display}: ${describeUnreachable(code)} (${code})` };
      return { usable: false, detail: `health check of ${this.display} failed: ${err instanceof Error ? err.message : String(err)}` };
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

/** An error carried in a stream chunk or a JSON body (`{"error":{...}}` or vLLM's `{"object":"error",...}`). */
function chunkError(obj: unknown, event?: string): BackendError | undefined {
  if (!obj || typeof obj !== "object") return undefined;
  const o = obj as { error?: unknown; object?: unknown; message?: unknown; code?: unknown };
  if (o.error === undefined && o.object !== "error" && event !== "error") return undefined;
  if (o.error === null) return undefined;
  const e = (o.error && typeof o.error === "object" ? o.error : o) as { message?: unknown; code?: unknown; status?: unknown };
  const message = typeof o.error === "string" ? o.error : typeof e.message === "string" ? e.message : JSON.stringify(obj).slice(0, 300);
  const code = typeof e.code === "number" ? e.code : typeof e.status === "number" ? e.status : undefined;
  const status = code !== undefined && code >= 400 && code < 600 ? code : 502;
  return { code: "upstream_error", message: `upstream error: ${message}`, status, retryable: status === 429 || status >= 500 };
}

export const openaiBackend: BackendModule<OpenAIBackendOptions> = {
  type: "openai",
  schema: openaiOptionsSchema as unknown as z.ZodType<OpenAIBackendOptions>,
  defaultSessionMode: "passthrough",
  sessionModes: ["passthrough"],
  create: (name, options, deps) => new OpenAIBackend(name, options, deps),
};
