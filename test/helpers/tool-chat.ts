/**
 * A chat client that offers tools and runs them itself, as OpenClaw does: the official `openai`
 * client streams an answer; when it ends with `tool_calls`, the caller runs them and the next
 * request carries the `tool` messages. Used by the client-tools tests (issue 17).
 */
import OpenAI from "openai";

export interface ToolCallSeen {
  id: string;
  name: string;
  arguments: string;
}

export interface StreamedAnswer {
  text: string;
  finish: string | null | undefined;
  calls: ToolCallSeen[];
  /** Ids of the completion chunks (one per response). */
  ids: Set<string>;
  /** The order deltas came in: for each tool-call delta, its index (contiguity is checked on it). */
  callDeltaOrder: number[];
}

/** A client tool as OpenClaw sends one. */
export function tool(
  name: string,
  description: string,
  properties: Record<string, unknown> = {},
  required: string[] = [],
): OpenAI.ChatCompletionTool {
  return {
    type: "function",
    function: { name, description, parameters: { type: "object", properties, required, additionalProperties: false } },
  };
}

export class ToolChat {
  readonly messages: OpenAI.ChatCompletionMessageParam[] = [];
  readonly client: OpenAI;

  constructor(
    baseURL: string,
    readonly key: string,
    readonly model: string,
    readonly tools: OpenAI.ChatCompletionTool[],
    apiKey = "k",
  ) {
    this.client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 120_000 });
  }

  /** The person says something; the answer is streamed and kept in the history. */
  say(text: string, signal?: AbortSignal): Promise<StreamedAnswer> {
    this.messages.push({ role: "user", content: text });
    return this.send(signal);
  }

  /** The client ran the calls of the last answer: their results go back. `ids` overrides the tool_call_id of each. */
  answer(results: string[], ids?: string[], signal?: AbortSignal): Promise<StreamedAnswer> {
    const last = this.messages.at(-1) as OpenAI.ChatCompletionAssistantMessageParam;
    const calls = last.tool_calls ?? [];
    calls.forEach((c, i) =>
      this.messages.push({ role: "tool", tool_call_id: ids?.[i] ?? c.id, content: results[i] ?? "" }),
    );
    return this.send(signal);
  }

  /** The last request sent again, as a client retries one (its answer in the history is replaced). */
  resend(signal?: AbortSignal): Promise<StreamedAnswer> {
    if (this.messages.at(-1)?.role === "assistant") this.messages.pop();
    return this.send(signal);
  }

  /** One streamed request with the history as it stands; the answer is appended. */
  async send(signal?: AbortSignal): Promise<StreamedAnswer> {
    const stream = await this.client.chat.completions.create(
      { model: this.model, messages: [...this.messages], tools: this.tools, stream: true },
      { headers: { "x-session-id": this.key }, ...(signal ? { signal } : {}) },
    );
    const out: StreamedAnswer = { text: "", finish: undefined, calls: [], ids: new Set(), callDeltaOrder: [] };
    for await (const c of stream) {
      out.ids.add(c.id);
      const choice = c.choices[0];
      const d = choice?.delta;
      if (d?.content) out.text += d.content;
      for (const tc of d?.tool_calls ?? []) {
        out.callDeltaOrder.push(tc.index);
        const call = (out.calls[tc.index] ??= { id: "", name: "", arguments: "" });
        if (tc.id) call.id = tc.id;
        if (tc.function?.name) call.name += tc.function.name;
        if (tc.function?.arguments) call.arguments += tc.function.arguments;
      }
      if (choice?.finish_reason) out.finish = choice.finish_reason;
    }
    this.messages.push(
      out.calls.length
        ? {
            role: "assistant",
            content: out.text || null,
            tool_calls: out.calls.map((c) => ({
              id: c.id,
              type: "function" as const,
              function: { name: c.name, arguments: c.arguments },
            })),
          }
        : { role: "assistant", content: out.text },
    );
    return out;
  }
}
