/**
 * The non-streaming answer: the pipeline's events collected into one Anthropic `message` (content
 * blocks in the order they came: `thinking`, `text`, `tool_use` with its input parsed; consecutive
 * events of one kind make one block), `stop_reason`, `stop_sequence`, `usage`. A backend failure is
 * returned, not thrown: the door runner answers it as an HTTP error in Anthropic's shape.
 */
import type { BackendError, BackendEvent, Usage } from "../../backends/contract/backend.js";
import { alnumId } from "../../core/util/ids.js";
import { toolUseId } from "./translate.js";
import { anthropicUsage, stopReason } from "./usage.js";

/** The message, or the failure (the door runner's `Collected`). */
export type CollectedMessage = { ok: true; body: object } | { ok: false; error: BackendError };

type ContentBlock =
  | { type: "text"; text: string }
  | { type: "thinking"; thinking: string; signature: string }
  | { type: "tool_use"; id: string; name: string; input: unknown };

/** A tool call while its arguments arrive. */
interface PendingCall {
  block: { type: "tool_use"; id: string; name: string; input: unknown };
  index: number;
  args: string;
}

/** The arguments as the `input` object (`{}` for none; a string that is no JSON object is kept under `_raw`). */
function inputOf(args: string): unknown {
  if (!args.trim()) return {};
  try {
    const v = JSON.parse(args) as unknown;
    return v && typeof v === "object" && !Array.isArray(v) ? v : { _raw: args };
  } catch {
    return { _raw: args };
  }
}

export async function collectMessage(events: AsyncIterable<BackendEvent>, model: string): Promise<CollectedMessage> {
  const content: ContentBlock[] = [];
  const calls: PendingCall[] = [];
  let last: ContentBlock | undefined;
  let call: PendingCall | undefined;
  let usage: Usage | undefined;
  for await (const ev of events) {
    switch (ev.type) {
      case "text":
        if (!ev.text) break;
        if (last?.type === "text") last.text += ev.text;
        else content.push((last = { type: "text", text: ev.text }));
        break;
      case "reasoning":
        if (!ev.text) break;
        if (last?.type === "thinking") last.thinking += ev.text;
        else content.push((last = { type: "thinking", thinking: ev.text, signature: "" }));
        break;
      case "tool_call":
        if (last?.type !== "tool_use" || call?.index !== ev.index) {
          const block = {
            type: "tool_use" as const,
            id: toolUseId(ev.id || alnumId("call")),
            name: ev.name ?? "",
            input: {},
          };
          call = { block, index: ev.index, args: "" };
          calls.push(call);
          content.push((last = block));
        }
        call.args += ev.argumentsDelta;
        break;
      case "usage":
        usage = ev.usage;
        break;
      case "error":
        return { ok: false, error: ev.error };
      case "done": {
        for (const c of calls) c.block.input = inputOf(c.args);
        const reason = calls.length && ev.finishReason === "stop" ? "tool_calls" : ev.finishReason;
        return {
          ok: true,
          body: {
            id: alnumId("msg_"),
            type: "message",
            role: "assistant",
            model,
            content,
            stop_reason: stopReason(reason),
            stop_sequence: null,
            usage: anthropicUsage(usage),
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
  };
}
