/**
 * The transport of the OpenAI-compatible backend: one upstream request's stop switch and
 * deadlines (`TurnControl`), and the request and its answer on undici's dispatch API
 * (`UpstreamTurn`: each body chunk decoded, parsed and translated as it arrives, streamed or
 * whole). Framing the answer into translator calls (SSE or one JSON body) is in ./framing.ts.
 */
import { isAscii } from "node:buffer";
import { TextDecoder } from "node:util";
import type { Pool, Dispatcher } from "undici";
import type { Logger } from "pino";
import type { BackendError, BackendEvent } from "../contract/backend.js";
import { Cancellation, onAbort, TurnDeadline, type Abortable } from "../../core/util/cancel.js";
import { errCode, requestError, SOCKET_CLOSED, statusError, stopError, type StopReason } from "./errors.js";
import { bodyFormat, jsonEvents, SseDecoder, STREAM_DECODE } from "./framing.js";
import type { StreamTranslator } from "./translate.js";

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
  /** The event stream ended with `[DONE]` (set by `SseDecoder`). */
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
    this.stopFollowing = onAbort(cancel, () =>
      this.halt(cancel.reason instanceof TurnDeadline ? "timeout" : "aborted"),
    );
    // First byte: one deadline from sending the request to the first body byte (headers included).
    // Only the streaming path arms it: a non-streamed upstream answer only starts when it is
    // complete, so the turn's deadline (the pipeline's, with its own message) is its only limit.
    this.firstByteDeadline = Date.now() + o.firstByteTimeoutSeconds * 1000;
  }

  halt(why: StopReason): void {
    this.stop ??= why;
    this.ctl.abort();
  }

  /** Arms the first-byte deadline (from the turn's start: sending the request to the first body byte). */
  armFirstByte(): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(onFirstByteTimeout, Math.max(0, this.firstByteDeadline - Date.now()), this);
  }

  disarm(): void {
    clearTimeout(this.timer);
  }

  /** When the last body chunk arrived (the idle deadline runs from it; see `startIdle`). */
  lastChunk = 0;

  /**
   * The first body byte arrived: from now on the idle deadline applies, from the last chunk
   * (`touch()` on each one). One timer for the whole body: when it fires it looks at the time of
   * the last chunk and waits again for what is left, instead of being cleared and set per chunk.
   */
  startIdle(): void {
    clearTimeout(this.timer);
    this.lastChunk = Date.now();
    this.timer = setTimeout(onIdleTimeout, this.o.idleTimeoutSeconds * 1000, this);
  }

  /** A body chunk arrived (after `startIdle`). */
  touch(): void {
    this.lastChunk = Date.now();
  }

  /** The idle timer fired: stop the request, or wait for what is left since the last chunk. */
  idleCheck(): void {
    const left = this.lastChunk + this.o.idleTimeoutSeconds * 1000 - Date.now();
    if (left > 0) this.timer = setTimeout(onIdleTimeout, left, this);
    else this.halt("idle");
  }

  /** The error of the request stopped for `why`. */
  stopError(why: StopReason): BackendError {
    return stopError(why, this.url, this.o);
  }

  /** The error a failed send or read becomes (the stop reason when the bridge stopped the request). */
  failure(err: unknown, phase: "connect" | "stream"): BackendError {
    if (this.stop) return stopError(this.stop, this.url, this.o);
    return requestError(err, phase, this.display, this.url);
  }

  /** Clears the first-byte / idle timer and stops following the turn's cancellation. */
  end(): void {
    this.disarm();
    this.stopFollowing();
  }
}

/** Timer callbacks (module functions with the control as argument: no closure per turn). */
function onFirstByteTimeout(t: TurnControl): void {
  t.halt("first_byte");
}
function onIdleTimeout(t: TurnControl): void {
  t.idleCheck();
}

/** The upstream chat request of a turn. */
export interface UpstreamRequest {
  path: string;
  method: "POST";
  headers: Record<string, string>;
  body: string;
}

export interface UpstreamTurnOptions {
  pool: Pool;
  request: UpstreamRequest;
  translator: StreamTranslator;
  control: TurnControl;
  logger: Logger;
  /** Largest JSON answer read whole. */
  maxJsonBody: number;
  /** How much of an error status's body is read. */
  maxErrorBody: number;
  /** The error event of an unexpected failure (logged by the caller). */
  unexpected(err: unknown): BackendEvent;
  /**
   * First-byte and idle deadlines (a streamed answer). Without them (an answer the upstream sends
   * whole, which only starts when it is complete) the turn's deadline is the only limit.
   */
  timers: boolean;
}

/** What may follow `[DONE]` before the connection is given up rather than read to its end. */
const MAX_AFTER_DONE = 64 * 1024;
/** Events waiting for the consumer beyond which the upstream is paused (resumed once they are taken). */
const HIGH_WATER = 1024;

const noop = (): void => {};
const DONE_RESULT: IteratorResult<BackendEvent> = { value: undefined, done: true };

/**
 * One turn's upstream request and its answer on undici's dispatch API, as the turn's event
 * stream — a streamed answer (the client streams, or `streamUpstream: always`) or one the upstream
 * sends whole. Status, headers and body chunks arrive as callbacks (no response stream, async
 * iterator or promise per chunk): each chunk is decoded, parsed and translated as soon as it
 * arrives (`SseDecoder`) and its events are handed to the consumer at once — nothing is batched
 * or delayed. The consumer pulls them with `next()`; when it falls behind by `HIGH_WATER` events
 * the upstream is paused until it catches up.
 *
 * - With `timers` (a streamed answer): the first-byte deadline (headers and the first body byte),
 *   then the idle deadline between body chunks (`TurnControl`). Always: stopped when the turn is
 *   cancelled (client gone, shutdown, the turn's deadline), with the stop's reason as the error.
 * - One retry when a pooled keep-alive socket turns out to be closed before any answer.
 * - An HTTP error status: up to `maxErrorBody` of its body, then the upstream's message.
 * - The body's format by content type, else sniffed from its first bytes: an event stream, or a
 *   plain JSON answer (read whole, up to `maxJsonBody`, and translated once).
 * - After the last event (`done` or an error), the upstream request is stopped unless the answer
 *   was complete (`[DONE]`, or the whole body read): then the rest of the body (up to 64 KiB) is
 *   read and dropped, so the connection goes back to the pool.
 */
export class UpstreamTurn implements AsyncIterableIterator<BackendEvent>, Dispatcher.DispatchHandler {
  private readonly queue: BackendEvent[] = [];
  private head = 0;
  private waiting: ((r: IteratorResult<BackendEvent>) => void) | undefined = undefined;
  /** The last event was produced (or the consumer stopped): nothing more is produced. */
  private over = false;
  /** Clean-up (timers, the upstream request) done. */
  private released = false;

  private controller: Dispatcher.DispatchController | undefined = undefined;
  private stopFollowing = noop;
  private attempt = 0;
  private status = 0;
  private headers: Record<string, string | string[] | undefined> = {};
  private mode: "sse" | "json" | "sniff" | "error" = "sniff";
  private gotBody = false;
  private bodyEnded = false;
  private text = "";
  private bytes: Buffer[] = [];
  private size = 0;
  private afterDone = 0;
  private paused = false;
  private decoder: TextDecoder | undefined = undefined;
  /** Text was decoded already (a BOM is only stripped at the very start). */
  private decodedAny = false;
  /** The decoder holds no partial character (its last input ended with an ASCII byte). */
  private decoderClean = true;
  private sse: SseDecoder | undefined = undefined;
  /** Sniffing found the start of a JSON answer: the rest is read whole. */
  private sniffedJson = false;
  private readonly out: BackendEvent[] = [];

  /** The request was sent (on the first `next()`: nothing is sent for a stream nobody reads). */
  private sent = false;

  constructor(private readonly o: UpstreamTurnOptions) {}

  [Symbol.asyncIterator](): this {
    return this;
  }

  next(): Promise<IteratorResult<BackendEvent>> {
    if (!this.sent) {
      this.sent = true;
      if (this.o.timers) this.o.control.armFirstByte();
      this.send();
    }
    if (this.head < this.queue.length) {
      const value = this.queue[this.head++]!;
      if (this.head === this.queue.length) {
        this.queue.length = 0;
        this.head = 0;
        if (this.paused) this.unpause();
      }
      return Promise.resolve({ value, done: false });
    }
    if (this.over) {
      this.release();
      return Promise.resolve(DONE_RESULT);
    }
    return new Promise((resolve) => (this.waiting = resolve));
  }

  /** The consumer stops (after the last event, or early: its client went away). */
  return(): Promise<IteratorResult<BackendEvent>> {
    this.over = true;
    this.queue.length = 0;
    this.head = 0;
    this.release();
    return Promise.resolve(DONE_RESULT);
  }

  // ----- producing events

  private emit(ev: BackendEvent): void {
    const w = this.waiting;
    if (w) {
      this.waiting = undefined;
      w({ value: ev, done: false });
    } else {
      this.queue.push(ev);
    }
  }

  /** Hands `out` (the events of one chunk) to the consumer. */
  private emitAll(out: BackendEvent[]): void {
    for (let i = 0; i < out.length; i++) this.emit(out[i]!);
    out.length = 0;
  }

  /** The last event was produced: the consumer gets the queue, then the end. */
  private finish(): void {
    if (this.over) return;
    this.over = true;
    this.o.control.end();
    // Complete answer: the rest of the body is read and dropped (the socket goes back to the pool).
    if (!this.bodyEnded && !(this.o.control.sawDone && !this.o.control.stop)) this.abortUpstream();
    else if (this.paused) this.unpause();
    const w = this.waiting;
    if (w && this.head >= this.queue.length) {
      this.waiting = undefined;
      this.release();
      w(DONE_RESULT);
    }
  }

  private fail(ev: BackendEvent): void {
    if (this.over) return;
    this.emit(ev);
    this.finish();
  }

  private release(): void {
    if (this.released) return;
    this.released = true;
    this.o.control.end();
    if (!this.bodyEnded && !(this.o.control.sawDone && !this.o.control.stop)) this.abortUpstream();
    else if (this.paused) this.unpause();
    this.stopFollowing();
  }

  /** Stops the upstream request (the request's controller follows the turn's stop switch). */
  private abortUpstream(): void {
    if (this.bodyEnded) return;
    this.bodyEnded = true; // nothing more is wanted from it
    this.o.control.ctl.abort();
  }

  private unpause(): void {
    this.paused = false;
    if (!this.bodyEnded) {
      if (!this.over && this.gotBody && this.o.timers) this.o.control.startIdle();
      this.controller?.resume();
    }
  }

  // ----- the upstream request (undici's dispatch handler)

  private send(): void {
    const { request, pool } = this.o;
    try {
      pool.dispatch({ path: request.path, method: request.method, headers: request.headers, body: request.body }, this);
    } catch (err) {
      this.fail({ type: "error", error: this.o.control.failure(err, "connect") });
    }
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    this.stopFollowing();
    const ctl = this.o.control.ctl;
    this.stopFollowing = ctl.onAbort(() => controller.abort((ctl.reason as Error) ?? new Error("aborted")));
  }

  onResponseStart(
    _c: Dispatcher.DispatchController,
    statusCode: number,
    headers: Record<string, string | string[]>,
  ): void {
    if (statusCode < 200) return; // 1xx informational
    this.status = statusCode;
    this.headers = headers;
    if (this.o.logger.isLevelEnabled("debug")) this.o.logger.debug({ status: statusCode }, "upstream response");
    if (statusCode >= 400) this.mode = "error";
    else this.mode = bodyFormat(headers["content-type"]);
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.over) {
      // After a complete answer ([DONE]): read and dropped, within a bound.
      this.afterDone += chunk.length;
      if (this.afterDone > MAX_AFTER_DONE) this.abortUpstream();
      return;
    }
    const control = this.o.control;
    if (this.gotBody) {
      if (this.o.timers) control.touch();
    } else {
      this.gotBody = true;
      if (this.o.timers) control.startIdle();
    }
    try {
      switch (this.mode) {
        case "sse":
          this.sseText(this.decode(chunk), false);
          break;
        case "error":
          this.text += chunk.toString("utf8");
          if (this.text.length > this.o.maxErrorBody)
            this.fail({ type: "error", error: statusError(this.status, this.headers, this.text) });
          break;
        case "json":
          this.bytes.push(chunk);
          this.size += chunk.length;
          if (this.size > this.o.maxJsonBody) this.fail(bodyTooLarge(control.url, this.o.maxJsonBody));
          break;
        case "sniff": {
          this.text += this.decode(chunk);
          this.sniff(false);
          break;
        }
      }
    } catch (err) {
      this.fail(this.o.unexpected(err));
    }
    if (!this.over && this.queue.length - this.head > HIGH_WATER && !this.paused) {
      this.paused = true;
      control.disarm();
      controller.pause();
    }
  }

  onResponseEnd(): void {
    this.bodyEnded = true;
    this.stopFollowing();
    if (this.over) return;
    this.o.control.disarm();
    try {
      switch (this.mode) {
        case "sse":
          this.sseText(this.decoder ? this.decoder.decode() : "", true);
          break;
        case "error":
          this.fail({ type: "error", error: statusError(this.status, this.headers, this.text) });
          break;
        case "json": {
          const body = this.bytes.length === 1 ? this.bytes[0]! : Buffer.concat(this.bytes, this.size);
          this.bytes = [];
          let text = body.toString("utf8");
          if (text.charCodeAt(0) === 0xfeff) text = text.slice(1); // as TextDecoder does
          this.json(text);
          break;
        }
        case "sniff":
          if (this.decoder) this.text += this.decoder.decode();
          this.sniff(true);
          break;
      }
    } catch (err) {
      this.fail(this.o.unexpected(err));
    }
    // A body that ended without an answer (cannot happen: every branch above ends it) is an error.
    if (!this.over) this.fail(this.o.unexpected(new Error("the upstream body ended without an answer")));
  }

  onResponseError(_c: Dispatcher.DispatchController, err: Error): void {
    this.bodyEnded = true;
    this.stopFollowing();
    if (this.over) return;
    const control = this.o.control;
    if (this.status === 0) {
      // No answer yet: one retry when a pooled keep-alive socket turns out to be closed.
      if (this.attempt === 0 && !control.stop && SOCKET_CLOSED.has(errCode(err) ?? "")) {
        this.attempt++;
        this.bodyEnded = false;
        this.send();
        return;
      }
      control.disarm();
      this.fail({ type: "error", error: control.failure(err, "connect") });
      return;
    }
    control.disarm();
    if (this.mode === "error")
      this.fail({
        type: "error",
        error: control.stop ? control.stopError(control.stop) : statusError(this.status, this.headers, this.text),
      });
    else this.fail({ type: "error", error: control.failure(err, "stream") });
  }

  // ----- the body

  /**
   * UTF-8 text of a body chunk, as a streaming `TextDecoder` gives it. An all-ASCII chunk while the
   * decoder holds no partial character is the same text as Latin-1, which is far cheaper to make
   * (upstream frames are JSON: ASCII unless the text itself is not); any other chunk goes through
   * the decoder, made on first use (stripping a BOM only when nothing was decoded before).
   */
  private decode(chunk: Buffer): string {
    if (this.decoderClean && isAscii(chunk)) {
      this.decodedAny ||= chunk.length > 0;
      return chunk.toString("latin1");
    }
    const decoder = (this.decoder ??= new TextDecoder("utf-8", { ignoreBOM: this.decodedAny }));
    this.decodedAny = true;
    const text = decoder.decode(chunk, STREAM_DECODE);
    this.decoderClean = chunk.length > 0 && chunk[chunk.length - 1]! < 0x80;
    return text;
  }

  private sseText(text: string, eof: boolean): void {
    let sse = this.sse;
    if (!sse) sse = this.sse = new SseDecoder(this.o.translator, this.o.control.url, this.o.control);
    const out = this.out;
    const done = sse.push(text, eof, out);
    this.emitAll(out);
    if (done) this.finish();
  }

  /** Neither the content type nor (yet) the first bytes told the format. */
  private sniff(eof: boolean): void {
    if (this.sniffedJson || this.text.trimStart().startsWith("{")) {
      this.sniffedJson = true;
      // A JSON answer: the text so far is its start.
      if (eof) this.json(this.text);
      else if (this.text.length > this.o.maxJsonBody) this.fail(bodyTooLarge(this.o.control.url, this.o.maxJsonBody));
      return;
    }
    if (eof || this.text.trimStart().length > 0) {
      this.mode = "sse";
      const text = this.text;
      this.text = "";
      this.sseText(text, eof);
    }
  }

  private json(text: string): void {
    for (const ev of jsonEvents(this.o.translator, text, this.o.control.url, this.o.logger)) this.emit(ev);
    this.finish();
  }
}

/** The upstream's answer is beyond the limit. */
export function bodyTooLarge(url: string, limit: number): BackendEvent {
  return {
    type: "error",
    error: {
      code: "upstream_error",
      message: `upstream ${url} sent a body larger than ${limit} bytes`,
      status: 502,
      retryable: false,
    },
  };
}
