/** Building OpenAI chat.completion(.chunk) objects. */
import type { FinishReason, Usage } from "../../backends/contract/backend.js";
import { alnumId } from "../../core/util/ids.js";

export function usageJson(u: Usage) {
  return {
    prompt_tokens: u.promptTokens,
    completion_tokens: u.completionTokens,
    total_tokens: u.totalTokens,
    ...(u.cachedTokens ? { prompt_tokens_details: { cached_tokens: u.cachedTokens } } : {}),
    ...(u.reasoningTokens ? { completion_tokens_details: { reasoning_tokens: u.reasoningTokens } } : {}),
  };
}

export interface ChunkDelta {
  role?: "assistant";
  content?: string;
  reasoning_content?: string;
  tool_calls?: Array<{ index: number; id?: string; type?: "function"; function: { name?: string; arguments: string } }>;
}

/** What follows the content string in a content frame (constant). */
const CONTENT_TAIL = '},"logprobs":null,"finish_reason":null}]}\n\n';

export class ChunkFactory {
  readonly id = alnumId("chatcmpl-");
  readonly created = Math.floor(Date.now() / 1000);
  private readonly prefix: string;
  /** `data: {…"choices":[{"index":0,"delta":{"content":` — a content frame up to its text. */
  private readonly contentHead: string;

  constructor(readonly model: string) {
    this.prefix = `{"id":"${this.id}","object":"chat.completion.chunk","created":${this.created},"model":${JSON.stringify(model)},"choices":`;
    this.contentHead = `data: ${this.prefix}[{"index":0,"delta":{"content":`;
  }

  /** One SSE frame for a delta (pre-serialised prefix: this runs for every token). */
  delta(delta: ChunkDelta, finishReason: FinishReason | null = null): string {
    return `data: ${this.prefix}[{"index":0,"delta":${JSON.stringify(delta)},"logprobs":null,"finish_reason":${finishReason ? `"${finishReason}"` : "null"}}]}\n\n`;
  }

  /**
   * The frame of `delta({ content: text })`, byte for byte, with only the text serialised: the
   * rest of a content frame is the same for the whole stream (this runs for every token).
   */
  content(text: string): string {
    return this.contentHead + JSON.stringify(text) + CONTENT_TAIL;
  }

  usage(u: Usage): string {
    return `data: ${this.prefix}[],"usage":${JSON.stringify(usageJson(u))}}\n\n`;
  }
}
