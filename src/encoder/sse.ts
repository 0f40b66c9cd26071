/**
 * Streaming encoder: backend events → OpenAI SSE, written as they arrive (no buffering, no delay).
 * - first frame: `delta.role`, sent at once;
 * - text → `delta.content`, reasoning → `delta.reasoning_content`, tool calls → `delta.tool_calls`;
 * - silence longer than the heartbeat interval → an empty `delta.content` chunk (never a comment);
 * - end: a chunk with `finish_reason`, the usage chunk when asked for, then `data: [DONE]`;
 * - failure: `data: {"error":{...}}` carrying the real reason, then the stream ends.
 */
import type { ServerResponse } from "node:http";
import type { BackendEvent, FinishReason, Usage } from "../backends/types.js";
import { backendErrorBody } from "./errors.js";
import { ChunkFactory } from "./chunks.js";

export interface SseOptions {
  model: string;
  includeUsage: boolean;
  heartbeatMs: number;
  /** Extra response headers (conversation key, `connection: close` while shutting down...). */
  headers?: Record<string, string>;
}

export interface EncodeResult {
  outcome: "completed" | "error" | "client_gone";
  contentChars: number;
  finishReason?: FinishReason;
  usage?: Usage;
  error?: string;
  text: string;
}

export async function writeSse(res: ServerResponse, events: AsyncIterable<BackendEvent>, opts: SseOptions): Promise<EncodeResult> {
  const chunks = new ChunkFactory(opts.model);
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
  const result: EncodeResult = { outcome: "completed", contentChars: 0, text: "" };
  let lastWrite = Date.now();
  // Frames produced in the same tick (one upstream read often holds several) leave in one
  // syscall: cork now, uncork before anything else runs. Nothing waits longer than the tick.
  let corked = false;
  const uncork = () => {
    corked = false;
    if (!res.destroyed) res.uncork();
  };
  const write = (frame: string) => {
    if (res.writableEnded || res.destroyed) return;
    if (!corked) {
      corked = true;
      res.cork();
      process.nextTick(uncork);
    }
    res.write(frame);
    lastWrite = Date.now();
  };
  write(chunks.delta({ role: "assistant", content: "" }));
  const beat = setInterval(() => {
    if (Date.now() - lastWrite >= opts.heartbeatMs) write(chunks.delta({ content: "" }));
  }, Math.max(50, Math.min(opts.heartbeatMs, 1000)));
  let sawToolCall = false;
  let ended = false;
  try {
    for await (const ev of events) {
      if (res.destroyed) {
        result.outcome = "client_gone";
        break;
      }
      switch (ev.type) {
        case "text":
          if (ev.text) {
            result.contentChars += ev.text.length;
            result.text += ev.text;
            write(chunks.delta({ content: ev.text }));
          }
          break;
        case "reasoning":
          if (ev.text) write(chunks.delta({ reasoning_content: ev.text }));
          break;
        case "tool_call":
          sawToolCall = true;
          write(
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
          write(`data: ${JSON.stringify(backendErrorBody(ev.error))}\n\n`);
          ended = true;
          break;
        case "done": {
          const finish: FinishReason = sawToolCall && ev.finishReason === "stop" ? "tool_calls" : ev.finishReason;
          result.finishReason = finish;
          write(chunks.delta({}, finish));
          if (opts.includeUsage && result.usage) write(chunks.usage(result.usage));
          write("data: [DONE]\n\n");
          ended = true;
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
      write(`data: ${JSON.stringify(backendErrorBody({ code: "backend_failed", message: result.error }))}\n\n`);
    }
  } catch (err) {
    result.outcome = "error";
    result.error = (err as Error).message;
    write(`data: ${JSON.stringify(backendErrorBody({ code: "backend_failed", message: `internal error: ${result.error}` }))}\n\n`);
  } finally {
    clearInterval(beat);
    // Flush what this tick wrote before ending: on Node 22/24 frames still corked when end() is
    // called are lost (Node 20 flushes them).
    if (corked) uncork();
    if (!res.writableEnded) res.end();
  }
  return result;
}
