/** Non-streaming encoder: the same backend events collected into one `chat.completion`. */
import type { BackendError, BackendEvent, FinishReason, Usage } from "../../backends/contract/backend.js";
import { alnumId } from "../../core/util/ids.js";
import { usageJson } from "./chunks.js";

export type Collected =
  | { ok: true; body: object; text: string; finishReason: FinishReason; usage?: Usage }
  | { ok: false; error: BackendError; partialText: string };

export async function collectCompletion(events: AsyncIterable<BackendEvent>, model: string): Promise<Collected> {
  let text = "";
  let reasoning = "";
  let usage: Usage | undefined;
  const calls: Array<{ id: string; type: "function"; function: { name: string; arguments: string } }> = [];
  for await (const ev of events) {
    switch (ev.type) {
      case "text":
        text += ev.text;
        break;
      case "reasoning":
        reasoning += ev.text;
        break;
      case "tool_call": {
        let call = calls[ev.index];
        if (!call) {
          call = { id: ev.id ?? alnumId("call"), type: "function", function: { name: ev.name ?? "", arguments: "" } };
          calls[ev.index] = call;
        }
        if (ev.name && !call.function.name) call.function.name = ev.name;
        call.function.arguments += ev.argumentsDelta;
        break;
      }
      case "usage":
        usage = ev.usage;
        break;
      case "error":
        return { ok: false, error: ev.error, partialText: text };
      case "done": {
        const toolCalls = calls.filter(Boolean);
        const finishReason: FinishReason =
          toolCalls.length && ev.finishReason === "stop" ? "tool_calls" : ev.finishReason;
        const message: Record<string, unknown> = { role: "assistant", content: text || (toolCalls.length ? null : "") };
        if (reasoning) message.reasoning_content = reasoning;
        if (toolCalls.length) message.tool_calls = toolCalls;
        return {
          ok: true,
          text,
          finishReason,
          usage,
          body: {
            id: alnumId("chatcmpl-"),
            object: "chat.completion",
            created: Math.floor(Date.now() / 1000),
            model,
            choices: [{ index: 0, message, logprobs: null, finish_reason: finishReason }],
            ...(usage ? { usage: usageJson(usage) } : {}),
          },
        };
      }
      default:
        break;
    }
  }
  return {
    ok: false,
    error: { code: "backend_failed", message: "the backend stopped without finishing its answer", status: 502 },
    partialText: text,
  };
}
