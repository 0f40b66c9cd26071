/**
 * One streaming engine for every door: a backend's event stream written as Server-Sent Events in
 * the dialect of the client's API (Chat Completions chunks, Responses events, Anthropic Messages
 * events). The engine owns what every dialect shares:
 * - the headers: sent at once, or (`deferHeaders`, a fallback chain) at the first event, at most
 *   one heartbeat interval later; an error as the first event is then answered as an HTTP error of
 *   the dialect's API (`failFirst`) instead of a stream;
 * - writes: the frames produced in one tick (one upstream read often holds several) are joined and
 *   leave in ONE `res.write` at the end of that tick (`FrameWriter`); the last frames go out with
 *   `res.end()` itself;
 * - heartbeats after `heartbeatMs` of silence (each dialect's own keep-alive frame);
 * - the end: `finish` after `done` (a `stop` after tool calls becomes `tool_calls`), `fail` after an
 *   `error`, and a backend that stops without either is a failure, never an empty success; an
 *   exception in the encoder is a stream error too, never a hang.
 * A dialect is one object per response: it keeps the state its API needs (item ids, open blocks,
 * sequence numbers) and returns frames as strings.
 */
import type { ServerResponse } from "node:http";
import type { BackendError, BackendEvent, FinishReason, Usage } from "../../backends/contract/backend.js";
import { retryAfter } from "./backend-errors.js";

/** The events a dialect encodes one by one (`done` and `error` end the stream: `finish`, `fail`). */
export type FlowEvent = Exclude<BackendEvent, { type: "done" } | { type: "error" }>;

export interface StreamDialect {
  /** The frames that open the stream, sent with the headers (a role chunk, `response.created`, `message_start`). */
  open(): string;
  /** The frames of one event ("" when the dialect shows nothing for it). */
  event(ev: FlowEvent): string;
  /** The frames that end a finished answer. `usage`: the last usage event, when any came. */
  finish(reason: FinishReason, usage: Usage | undefined): string;
  /** The frames that end a failed answer, after `open`. */
  fail(err: BackendError): string;
  /** A keep-alive frame for a silent stretch. */
  heartbeat(): string;
  /** A failure before anything was sent, as this API's HTTP error: status and JSON body. */
  failFirst(err: BackendError): { status: number; body: string };
}

export interface StreamOptions {
  heartbeatMs: number;
  /** Extra response headers (conversation key, `connection: close` while shutting down...). */
  headers?: Record<string, string>;
  /**
   * The headers are complete only at the first event (a fallback chain names the model that
   * answers): they wait for it — at most one heartbeat interval — and an error as the first event
   * is answered as an HTTP error (`failFirst`, with `Retry-After` when it says when to retry).
   */
  deferHeaders?: boolean;
}

export interface EncodeResult {
  outcome: "completed" | "error" | "client_gone";
  contentChars: number;
  finishReason?: FinishReason;
  usage?: Usage;
  error?: string;
  text: string;
}

/**
 * The frames of one response, joined per tick: `write()` appends a frame and, for the first frame
 * of a tick, schedules the flush at the end of the tick (`process.nextTick`, which runs once the
 * current microtasks are done: every event a read produced has been encoded by then). `end()`
 * sends what is pending with the closing chunk.
 */
class FrameWriter {
  private pending = "";
  private scheduled = false;
  /** When a frame was last written (for heartbeats). */
  lastWrite = Date.now();

  constructor(readonly res: ServerResponse) {}

  get closed(): boolean {
    return this.res.writableEnded || this.res.destroyed;
  }

  write(frame: string): void {
    if (this.closed || !frame) return;
    this.pending += frame;
    this.lastWrite = Date.now();
    if (!this.scheduled) {
      this.scheduled = true;
      process.nextTick(flushWriter, this);
    }
  }

  flush(): void {
    this.scheduled = false;
    const data = this.pending;
    if (!data) return;
    this.pending = "";
    if (!this.closed) this.res.write(data);
  }

  /** Ends the response with what is pending and `last` (in one write). */
  end(last = ""): void {
    const data = this.pending + last;
    this.pending = "";
    if (this.closed) return;
    if (data) this.res.end(data);
    else this.res.end();
  }
}

function flushWriter(w: FrameWriter): void {
  w.flush();
}

const STOPPED = "the backend stopped without finishing its answer";

export async function streamEvents(
  res: ServerResponse,
  events: AsyncIterable<BackendEvent>,
  dialect: StreamDialect,
  opts: StreamOptions,
): Promise<EncodeResult> {
  const result: EncodeResult = { outcome: "completed", contentChars: 0, text: "" };
  const out = new FrameWriter(res);
  let started = false;
  const start = () => {
    started = true;
    // No `connection` header of our own: node:http says keep-alive, or close when the client asked
    // for it (a `connection: keep-alive` set here would keep the connection against the client's
    // `Connection: close`); the caller passes `connection: close` when the server is shutting down.
    res.writeHead(200, {
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-cache, no-transform",
      "x-accel-buffering": "no",
      ...opts.headers,
    });
    // No flushHeaders(): the headers go out in the same write as the opening frames (one syscall
    // less per stream; the client sees both at the same moment either way).
    out.write(dialect.open());
  };
  const waitedSince = Date.now();
  if (!opts.deferHeaders) start();
  // A timer per stream: one shared timer with a Set of the open streams was tried, and made V8
  // promote every request's objects to the old generation (bench/README.md, issue 19).
  const beat = setInterval(
    () => {
      if (!started) {
        if (Date.now() - waitedSince >= opts.heartbeatMs) start();
        return;
      }
      if (Date.now() - out.lastWrite >= opts.heartbeatMs) out.write(dialect.heartbeat());
    },
    Math.max(50, Math.min(opts.heartbeatMs, 1000)),
  );
  let sawToolCall = false;
  let ended = false;
  try {
    for await (const ev of events) {
      if (res.destroyed) {
        result.outcome = "client_gone";
        break;
      }
      if (!started) {
        if (ev.type === "error") {
          // Nothing was sent yet: the failure as an HTTP error, not a stream.
          result.outcome = "error";
          result.error = ev.error.message;
          ended = true;
          started = true;
          const { status, body } = dialect.failFirst(ev.error);
          res.writeHead(status, {
            "content-type": "application/json",
            ...opts.headers,
            ...(ev.error.resetAt ? { "retry-after": retryAfter(ev.error.resetAt) } : {}),
          });
          res.end(body);
          break;
        }
        start();
      }
      switch (ev.type) {
        case "text":
          if (ev.text) {
            result.contentChars += ev.text.length;
            result.text += ev.text;
            out.write(dialect.event(ev));
          }
          break;
        case "usage":
          result.usage = ev.usage;
          out.write(dialect.event(ev));
          break;
        case "tool_call":
          sawToolCall = true;
          out.write(dialect.event(ev));
          break;
        case "error":
          result.outcome = "error";
          result.error = ev.error.message;
          ended = true;
          out.end(dialect.fail(ev.error));
          break;
        case "done": {
          const finish: FinishReason = sawToolCall && ev.finishReason === "stop" ? "tool_calls" : ev.finishReason;
          result.finishReason = finish;
          ended = true;
          // The last frames and the end of the response in one write, before the event stream is
          // closed (the turn's clean-up runs after).
          out.end(dialect.finish(finish, result.usage));
          break;
        }
        default:
          out.write(dialect.event(ev));
      }
      if (ended) break;
    }
    if (!ended && result.outcome !== "client_gone") {
      // A backend that stops without done/error must never look like an empty success.
      result.outcome = "error";
      result.error = STOPPED;
      ended = true;
      out.end(dialect.fail({ code: "backend_failed", message: STOPPED }));
    }
  } catch (err) {
    result.outcome = "error";
    result.error = (err as Error).message;
    if (!started) start();
    out.end(dialect.fail({ code: "backend_failed", message: `internal error: ${result.error}` }));
  } finally {
    clearInterval(beat);
    if (!started && !res.headersSent && !res.destroyed) start();
    // Whatever is pending goes out with the end of the response (nothing, when it has ended).
    out.end();
  }
  return result;
}
