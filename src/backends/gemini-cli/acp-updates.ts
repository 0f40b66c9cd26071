/**
 * What an ACP turn yields from the agent's words: `session/update` notifications as bridge events
 * (message chunks → text, thought chunks → reasoning, tool calls → tool_activity, by call id), and
 * from the prompt's answer its usage (`usage`, or gemini's `_meta.quota`) and finish reason.
 */
import type * as acp from "@agentclientprotocol/sdk";
import type { BackendEvent, FinishReason, Usage } from "../contract/backend.js";
import type { AcpTurnSpec } from "./acp.js";

/** `session/update` → bridge events, per turn (tool names by call id). */
export class AcpUpdateMapper {
  private readonly tools = new Map<string, { name: string; done: boolean }>();
  constructor(private readonly toolName?: AcpTurnSpec["toolName"]) {}

  map(u: acp.SessionUpdate): BackendEvent[] {
    switch (u.sessionUpdate) {
      case "agent_message_chunk":
        return u.content.type === "text" && u.content.text ? [{ type: "text", text: u.content.text }] : [];
      case "agent_thought_chunk":
        return u.content.type === "text" && u.content.text ? [{ type: "reasoning", text: u.content.text }] : [];
      case "tool_call": {
        const name = this.toolName?.(u) ?? String(u.kind ?? "tool");
        this.tools.set(u.toolCallId, { name, done: false });
        const out: BackendEvent[] = [
          { type: "tool_activity", name, status: "started", ...(u.title ? { detail: clip(u.title) } : {}) },
        ];
        return out.concat(this.ended(u.toolCallId, u.status));
      }
      case "tool_call_update": {
        let t = this.tools.get(u.toolCallId);
        const out: BackendEvent[] = [];
        if (!t) {
          // A tool that asked permission first has no `tool_call` of its own.
          const name = this.toolName?.(u) ?? String(u.kind ?? "tool");
          t = { name, done: false };
          this.tools.set(u.toolCallId, t);
          out.push({ type: "tool_activity", name, status: "started", ...(u.title ? { detail: clip(u.title) } : {}) });
        }
        return out.concat(this.ended(u.toolCallId, u.status));
      }
      default:
        return [];
    }
  }

  private ended(id: string, status: string | null | undefined): BackendEvent[] {
    const t = this.tools.get(id);
    if (!t || t.done || (status !== "completed" && status !== "failed")) return [];
    t.done = true;
    return [{ type: "tool_activity", name: t.name, status: status === "failed" ? "failed" : "completed" }];
  }
}

export function usageOf(res: acp.PromptResponse): Usage | undefined {
  const tc = (
    res._meta as { quota?: { token_count?: { input_tokens?: unknown; output_tokens?: unknown } } } | null | undefined
  )?.quota?.token_count;
  const u = (res as { usage?: unknown }).usage as
    | { inputTokens?: number; outputTokens?: number; totalTokens?: number; cachedReadTokens?: number | null }
    | null
    | undefined;
  if (u && typeof u.inputTokens === "number") {
    const usage: Usage = {
      promptTokens: u.inputTokens,
      completionTokens: u.outputTokens ?? 0,
      totalTokens: u.totalTokens ?? u.inputTokens + (u.outputTokens ?? 0),
    };
    if (u.cachedReadTokens) usage.cachedTokens = u.cachedReadTokens;
    return usage;
  }
  if (tc && (typeof tc.input_tokens === "number" || typeof tc.output_tokens === "number")) {
    const promptTokens = Number(tc.input_tokens ?? 0);
    const completionTokens = Number(tc.output_tokens ?? 0);
    return { promptTokens, completionTokens, totalTokens: promptTokens + completionTokens };
  }
  return undefined;
}

export function finishOf(stop: acp.StopReason | undefined): FinishReason {
  if (stop === "max_tokens") return "length";
  if (stop === "refusal") return "content_filter";
  return "stop";
}

function clip(s: string): string {
  return s.length > 200 ? `${s.slice(0, 197)}...` : s;
}
