/**
 * The bridge's usage in Anthropic's terms: `input_tokens` does not include the tokens read from
 * the prompt cache (`cache_read_input_tokens`), where OpenAI's `prompt_tokens` does; the bridge
 * writes no cache of its own (`cache_creation_input_tokens` 0).
 */
import type { FinishReason, Usage } from "../../backends/contract/backend.js";

export interface AnthropicUsage {
  input_tokens: number;
  output_tokens: number;
  cache_creation_input_tokens: number;
  cache_read_input_tokens: number;
}

export function anthropicUsage(u: Usage | undefined): AnthropicUsage {
  if (!u) return { input_tokens: 0, output_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 };
  const cached = u.cachedTokens ?? 0;
  return {
    input_tokens: Math.max(0, u.promptTokens - cached),
    output_tokens: u.completionTokens,
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: cached,
  };
}

export type StopReason = "end_turn" | "max_tokens" | "tool_use" | "refusal";

/**
 * A finish reason as a stop reason. `stop_sequence` is never given: behind a Chat Completions
 * upstream a stop sequence ends the answer as `stop` too, and which one matched is not said.
 */
export function stopReason(reason: FinishReason): StopReason {
  switch (reason) {
    case "length":
      return "max_tokens";
    case "tool_calls":
      return "tool_use";
    case "content_filter":
      return "refusal";
    default:
      return "end_turn";
  }
}
