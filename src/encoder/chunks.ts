/** Building OpenAI chat.completion(.chunk) objects. */
import { randomBytes } from "node:crypto";
import type { FinishReason, Usage } from "../backends/types.js";

const ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/**
 * Random bytes are drawn from the CSPRNG in blocks: one `randomBytes()` call per id cost ~5 µs and
 * showed up in the bridge's CPU profile (several ids per request). Same source, same output.
 */
const RANDOM_BLOCK = 4096;
let randomPool = Buffer.alloc(0);
let randomPos = 0;

/** Random id of letters and digits only (OpenClaw rewrites other characters on replay). */
export function alnumId(prefix: string, length = 24): string {
  if (randomPos + length > randomPool.length) {
    randomPool = randomBytes(Math.max(RANDOM_BLOCK, length));
    randomPos = 0;
  }
  let out = prefix;
  for (let i = 0; i < length; i++) out += ALNUM[randomPool[randomPos++]! % ALNUM.length];
  return out;
}

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

export class ChunkFactory {
  readonly id = alnumId("chatcmpl-");
  readonly created = Math.floor(Date.now() / 1000);
  private readonly prefix: string;

  constructor(readonly model: string) {
    this.prefix = `{"id":"${this.id}","object":"chat.completion.chunk","created":${this.created},"model":${JSON.stringify(model)},"choices":`;
  }

  /** One SSE frame for a delta (pre-serialised prefix: this runs for every token). */
  delta(delta: ChunkDelta, finishReason: FinishReason | null = null): string {
    return `data: ${this.prefix}[{"index":0,"delta":${JSON.stringify(delta)},"logprobs":null,"finish_reason":${finishReason ? `"${finishReason}"` : "null"}}]}\n\n`;
  }

  usage(u: Usage): string {
    return `data: ${this.prefix}[],"usage":${JSON.stringify(usageJson(u))}}\n\n`;
  }
}
