/** A pi-ai model (OpenClaw's client library) for the bridge at `baseURL`, as OpenClaw's provider entry describes it. */
import type { Model, OpenAICompletionsCompat } from "@mariozechner/pi-ai";

export function piModel(
  baseURL: string,
  id: string,
  name: string,
  compat?: OpenAICompletionsCompat,
): Model<"openai-completions"> {
  return {
    id,
    name,
    api: "openai-completions",
    provider: "clawbridge",
    baseUrl: baseURL,
    reasoning: false,
    input: ["text"],
    cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
    contextWindow: 128000,
    maxTokens: 4096,
    ...(compat ? { compat } : {}),
  };
}
