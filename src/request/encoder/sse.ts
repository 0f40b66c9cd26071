/**
 * Streaming encoder: backend events → OpenAI SSE, written as they arrive (no buffering, no delay).
 * - first frame: `delta.role`, sent at once;
 * - text → `delta.content`, reasoning → `delta.reasoning_content`, tool calls → `delta.tool_calls`;
 * - silence longer than the heartbeat interval → an empty `delta.content` chunk (never a comment);
 * - end: a chunk with `finish_reason`, the usage chunk when asked for, then `data: [DONE]`;
 * - failure: `data: {"error":{...}}` carrying the real reason, then the stream ends.
 *
 * Writes: the frames produced in one tick (one upstream read often holds several) are joined and
 * leave in ONE `res.write` at the end of that tick (`FrameWriter`), so one HTTP chunk and one
 * syscall instead of a chunk per frame; nothing waits longer than the tick. The last frames
 * (finish, usage, `[DONE]`, or an error) go out with `res.end()` itself: the frames and the
 * closing chunk in one syscall.
 */
import type { ServerResponse } from "node:http";
import type { BackendEvent, FinishReason, Usage } from "../../backends/contract/backend.js";
import { backendErrorBody, backendErrorStatus, retryAfter } from "./backend-errors.js";
import { ChunkFactory } from "./chunks.js";

export interface SseOptions {
  model: string;
  includeUsage: boolean;
  heartbeatMs: number;
  /** Extra response headers (conversation key, `connection: close` while shutting down...). */
  headers?: Record<string, string>;
  /**
   * The headers are complete only at the first event (a fallback chain names the model that
   * answers): they wait for it — at most one heartbeat interval — and an error as the first event
   * is answered as an HTTP error (its status, `Retry-After` when it says when to retry) instead
   * of a stream.
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

const DONE = "data: [DONE]\n\n";

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
    if (this.closed) return;
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

export async function writeSse(
  res: ServerResponse,
  events: AsyncIterable<BackendEvent>,
  opts: SseOptions,
): Promise<EncodeResult> {
  const chunks = new ChunkFactory(opts.model);
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
    // No flushHeaders(): the headers go out in the same write as the role chunk below (one syscall
    // less per stream; the client sees both at the same moment either way).
    out.write(chunks.delta({ role: "assistant", content: "" }));
  };
  const waitedSince = Date.now();
  if (!opts.deferHeaders) start();
  const heartbeat = chunks.content("");
  // A timer per stream: one shared timer with a Set of the open streams was tried, and made V8
  // promote every request's objects to the old generation (bench/README.md, issue 19).
  const beat = setInterval(
    () => {
      if (!started) {
        if (Date.now() - waitedSince >= opts.heartbeatMs) start();
        return;
      }
      if (Date.now() - out.lastWrite >= opts.heartbeatMs) out.write(heartbeat);
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
          res.writeHead(backendErrorStatus(ev.error), {
            "content-type": "application/json",
            ...opts.headers,
            ...(ev.error.resetAt ? { "retry-after": retryAfter(ev.error.resetAt) } : {}),
          });
          res.end(JSON.stringify(backendErrorBody(ev.error)));
          break;
        }
        start();
      }
      switch (ev.type) {
        case "text":
          if (ev.text) {
            result.contentChars += ev.text.length;
            result.text += ev.text;
            out.write(chunks.content(ev.text));
          }
          break;
        case "reasoning":
          if (ev.text) out.write(chunks.delta({ reasoning_content: ev.text }));
          break;
        case "tool_call":
          sawToolCall = true;
          out.write(
            chunks.delta({
              tool_calls: [
                {
                  index: ev.index,
                  ...(ev.id ? { id: ev.id, type: "function" as const } : {}),
                  function: { ...(ev.name ? { name: ev.name } : {}), arguments: ev.argumentsDelta },
                },
              ],
            }),
          );
          break;
        case "usage":
          result.usage = ev.usage;
          break;
        case "error":
          result.outcome = "error";
          result.error = ev.error.message;
          ended = true;
          out.end(`data: ${JSON.stringify(backendErrorBody(ev.error))}\n\n`);
          break;
        case "done": {
          const finish: FinishReason = sawToolCall && ev.finishReason === "stop" ? "tool_calls" : ev.finishReason;
          result.finishReason = finish;
          ended = true;
          // The last frames and the end of the response in one write, before the event stream is
          // closed (the turn's clean-up runs after).
          out.end(
            chunks.delta({}, finish) + (opts.includeUsage && result.usage ? chunks.usage(result.usage) : "") + DONE,
          );
          break;
        }
        case "session":
        case "tool_activity":
          break;
      }
      if (ended) break;
    }
    if (!ended && result.outcome !== "client_gone") {
      // A backend that stops without done/error must never look like an empty success.
      result.outcome = "error";
      result.error = "the backend stopped without finishing its answer";
      ended = true;
      out.end(`data: ${JSON.stringify(backendErrorBody({ code: "backend_failed", message: result.error }))}\n\n`);
    }
  } catch (err) {
    result.outcome = "error";
    result.error = (err as Error).message;
    if (!started) start();
    out.end(
      `data: ${JSON.stringify(backendErrorBody({ code: "backend_failed", message: `internal error: ${result.error}` }))}\n\n`,
    );
  } finally {
    clearInterval(beat);
    if (!started && !res.headersSent && !res.destroyed) start();
    // Whatever is pending goes out with the end of the response (nothing, when it has ended).
    out.end();
  }
  return result;
}
