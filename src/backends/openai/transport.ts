/**
 * The transport of the OpenAI-compatible backend: one upstream request's stop switch and
 * deadlines (`TurnControl`), the undici body reader (first-byte / idle timers), the whole-answer
 * handler on undici's dispatch API (`fetchWhole`), and the readers that frame an answer — an
 * event stream (`sseEvents`) or a whole JSON body (`jsonEvents`) — into `StreamTranslator` calls.
 */
import type { TextDecoder } from "node:util";
import { createParser, type EventSourceMessage, type ParseError } from "eventsource-parser";
import type { Pool, Dispatcher } from "undici";
import type { Logger } from "pino";
import type { BackendError, BackendEvent } from "../types.js";
import { Cancellation, onAbort, TurnDeadline, type Abortable } from "../../util/cancel.js";
import { readLimited } from "../../util/read-limited.js";
import { chunkError, requestError, stopError, type StopReason } from "./errors.js";
import type { StreamTranslator, UpstreamChunk } from "./translate.js";

const MAX_SSE_BUFFER = 16 * 1024 * 1024;

/** The limits a turn runs under (from the backend's options). */
export interface TurnLimits {
  timeoutSeconds: number;
  firstByteTimeoutSeconds: number;
  idleTimeoutSeconds: number;
}

/**
 * One upstream request's stop switch, deadlines and error mapping, shared by the whole-answer and
 * the streaming path of a turn. Made when the turn starts: the whole-request deadline and the
 * first-byte deadline run from then. `end()` when the turn ends.
 */
export class TurnControl {
  /** Stops the upstream request (client gone, shutdown, a timeout): undici takes it as `signal`. */
  readonly ctl = new Cancellation();
  /** Why the request was stopped (the first reason wins); undefined while it was not. */
  stop: StopReason | undefined = undefined;
  /** The event stream ended with `[DONE]` (set by `sseEvents`). */
  sawDone = false;
  private timer: NodeJS.Timeout | undefined = undefined;
  private readonly stopFollowing: () => void;
  private readonly firstByteDeadline: number;

  constructor(
    cancel: Abortable,
    private readonly o: TurnLimits,
    /** The chat endpoint, without credentials (for messages). */
    readonly url: string,
    /** The upstream's root, without credentials (for messages). */
    private readonly display: string,
  ) {
    // The turn's cancellation: the client went away, the bridge shuts down, or the pipeline's turn
    // deadline passed (reason `TurnDeadline`: reported as the whole-request timeout).
    this.stopFollowing = onAbort(cancel, () => this.halt(cancel.reason instanceof TurnDeadline ? "timeout" : "aborted"));
    // First byte: one deadline from sending the request to the first body byte (headers included).
    // Only the streaming path arms it: a non-streamed upstream answer only starts when it is
    // complete, so the turn's deadline (the pipeline's, with its own message) is its only limit.
    this.firstByteDeadline = Date.now() + o.firstByteTimeoutSeconds * 1000;
  }

  halt(why: StopReason): void {
    this.stop ??= why;
    this.ctl.abort();
  }

  /** Arms the first-byte timer (`first`) or the idle timer before a read of the body. */
  readonly arm = (first: boolean): void => {
    clearTimeout(this.timer);
    this.timer = first ? setTimeout(() => this.halt("first_byte"), Math.max(0, this.firstByteDeadline - Date.now())) : setTimeout(() => this.halt("idle"), this.o.idleTimeoutSeconds * 1000);
  };

  readonly disarm = (): void => clearTimeout(this.timer);

  /** The error of the request stopped for `why`. */
  stopError(why: StopReason): BackendError {
    return stopError(why, this.url, this.o);
  }

  /** The error a failed send or read becomes (the stop reason when the bridge stopped the request). */
  readonly failure = (err: unknown, phase: "connect" | "stream"): BackendError => {
    if (this.stop) return stopError(this.stop, this.url, this.o);
    return requestError(err, phase, this.display, this.url);
  };

  /** Clears the first-byte / idle timer and stops following the turn's cancellation. */
  end(): void {
    this.disarm();
    this.stopFollowing();
  }
}

/** An answer's format by its content type; "sniff": decided by its first bytes. */
export function bodyFormat(contentType: string | string[] | undefined): "sse" | "json" | "sniff" {
  const ctype = String(contentType ?? "").toLowerCase();
  return ctype.includes("event-stream") ? "sse" : ctype.includes("json") ? "json" : "sniff";
}

export type Body = Dispatcher.ResponseData["body"];

/** Reads a response body chunk by chunk under the first-byte / idle timers. */
export class BodyReader {
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
export async function readWhole(body: Body, limit: number, arm: (first: boolean) => void, disarm: () => void): Promise<Buffer | undefined> {
  arm(true);
  try {
    return await readLimited(body, limit, () => arm(false));
  } finally {
    disarm();
  }
}

/** A whole upstream answer, read by `fetchWhole`. */
export interface WholeResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
  /** The body grew beyond the limit: `body` holds its start and the request was stopped. */
  truncated: boolean;
}

/** A failure of `fetchWhole`; `answered` tells whether the upstream had started its answer. */
export class WholeError extends Error {
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

export function fetchWhole(pool: Pool, options: Dispatcher.DispatchOptions, limit: number, errorLimit: number, abort: Cancellation): Promise<WholeResponse> {
  return new Promise((resolve, reject) => {
    pool.dispatch(options, new WholeHandler(limit, errorLimit, abort, resolve, reject));
  });
}

/** A body that has been read to its end (for parsing a whole answer as an event stream). */
export const ENDED_READER = { ended: true, next: async (): Promise<Buffer | null> => null };

/** Read to the end of the body for at most `ms` (a few chunks); errors are ignored. */
export async function drainBriefly(reader: BodyReader, ms: number): Promise<void> {
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

/** A whole `chat.completion` JSON body (a plain JSON reply to our streaming request). */
export function* jsonEvents(translator: StreamTranslator, text: string, url: string, logger: Logger): Generator<BackendEvent> {
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
  logger.debug("upstream answered a streaming request with plain JSON; converted to events");
  yield* translator.message(obj);
  yield* translator.finish();
}

/** An SSE body: each network chunk is parsed and its events are yielded before the next read. */
export async function* sseEvents(
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
