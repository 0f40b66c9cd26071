/**
 * Chat Completions streaming: backend events → OpenAI `chat.completion.chunk` SSE, written as they
 * arrive by the shared engine (src/request/encoder/stream.ts: headers, per-tick writes, heartbeats,
 * the end of the stream). This file is the dialect:
 * - first frame: `delta.role`, sent at once;
 * - text → `delta.content`, reasoning → `delta.reasoning_content`, tool calls → `delta.tool_calls`;
 * - silence longer than the heartbeat interval → an empty `delta.content` chunk (never a comment);
 * - end: a chunk with `finish_reason`, the usage chunk when asked for, then `data: [DONE]`;
 * - failure: `data: {"error":{...}}` carrying the real reason, then the stream ends.
 */
import type { ServerResponse } from "node:http";
import type { BackendError, BackendEvent, FinishReason, Usage } from "../../backends/contract/backend.js";
import { backendErrorBody, backendErrorStatus } from "./backend-errors.js";
import { ChunkFactory } from "./chunks.js";
import { streamEvents, type EncodeResult, type FlowEvent, type StreamDialect, type StreamOptions } from "./stream.js";

export type { EncodeResult } from "./stream.js";

export interface SseOptions extends StreamOptions {
  model: string;
  includeUsage: boolean;
}

const DONE = "data: [DONE]\n\n";

/** OpenAI Chat Completions chunks. */
export class ChatDialect implements StreamDialect {
  private readonly chunks: ChunkFactory;
  private readonly beat: string;

  constructor(
    model: string,
    private readonly includeUsage: boolean,
  ) {
    this.chunks = new ChunkFactory(model);
    this.beat = this.chunks.content("");
  }

  open(): string {
    return this.chunks.delta({ role: "assistant", content: "" });
  }

  event(ev: FlowEvent): string {
    switch (ev.type) {
      case "text":
        return this.chunks.content(ev.text);
      case "reasoning":
        return ev.text ? this.chunks.delta({ reasoning_content: ev.text }) : "";
      case "tool_call":
        return this.chunks.delta({
          tool_calls: [
            {
              index: ev.index,
              ...(ev.id ? { id: ev.id, type: "function" as const } : {}),
              function: { ...(ev.name ? { name: ev.name } : {}), arguments: ev.argumentsDelta },
            },
          ],
        });
      default:
        return "";
    }
  }

  finish(reason: FinishReason, usage: Usage | undefined): string {
    return this.chunks.delta({}, reason) + (this.includeUsage && usage ? this.chunks.usage(usage) : "") + DONE;
  }

  fail(err: BackendError): string {
    return `data: ${JSON.stringify(backendErrorBody(err))}\n\n`;
  }

  heartbeat(): string {
    return this.beat;
  }

  failFirst(err: BackendError): { status: number; body: string } {
    return { status: backendErrorStatus(err), body: JSON.stringify(backendErrorBody(err)) };
  }
}

export function writeSse(
  res: ServerResponse,
  events: AsyncIterable<BackendEvent>,
  opts: SseOptions,
): Promise<EncodeResult> {
  return streamEvents(res, events, new ChatDialect(opts.model, opts.includeUsage), opts);
}
