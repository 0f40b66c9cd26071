/**
 * Responses API streaming: the backend's events → the Responses event stream, in the real API's
 * order and shape (checked against the `openai` SDK's types and its `ResponseStream` accumulator,
 * and against what Codex 0.169 consumes), written by the shared engine (src/request/encoder/stream.ts).
 *
 *   response.created, response.in_progress                          (open)
 *   per output item, one open at a time, in order:
 *     message:   output_item.added, content_part.added, output_text.delta..., output_text.done,
 *                content_part.done, output_item.done
 *     reasoning: output_item.added, reasoning_summary_part.added, reasoning_summary_text.delta...,
 *                reasoning_summary_text.done, reasoning_summary_part.done, output_item.done
 *     function_call: output_item.added, function_call_arguments.delta..., function_call_arguments.done
 *                (with `name`), output_item.done (`call_id`, `name`, `arguments`; `namespace` for a
 *                tool of a namespace tool)
 *     custom_tool_call (a freeform tool, src/request/responses-api/translate.ts): output_item.added,
 *                custom_tool_call_input.delta, custom_tool_call_input.done, output_item.done
 *   response.completed with `usage`; finish reason `length` (or `content_filter`) →
 *     `response.incomplete`, status "incomplete", `incomplete_details.reason` "max_output_tokens"
 *     (or "content_filter"), as the API ends such a response;
 *   a failure → `response.failed` (status "failed", `error: {code, message}`: `rate_limit_exceeded`
 *     for a limit, else `server_error`): the event the SDK, Codex and OpenClaw's pi-ai all read
 *     (no separate `error` event before it).
 * Every frame is `event: <type>\ndata: <json>\n\n` with a `sequence_number` counted from 0.
 *
 * Heartbeat: an SSE comment, `: keep-alive`. The Chat Completions dialect never sends one (some
 * OpenAI-compatible clients choke on comments), but the Responses clients skip it safely: the
 * `openai` SDK's SSE decoder drops lines that start with ":" (openai/core/streaming), and Codex's
 * SSE parser follows the spec, for which such a line is a comment (tested with the real Codex,
 * test/integration/codex-client.test.ts). Any event would be worse: an invented one would reach
 * every SDK user's loop as a type the SDK does not know, and an empty text delta would need a
 * message item of its own.
 *
 * Cost: text and reasoning deltas are the per-token path; each is a prebuilt prefix (item id,
 * indexes) + the serialised delta + the sequence number, as src/request/encoder/chunks.ts does for
 * Chat Completions. The response object (with the request's echoed tools) is serialised once for
 * `created`/`in_progress` and once at the end.
 */
import type { BackendError, FinishReason, Usage } from "../../backends/contract/backend.js";
import { alnumId, newCallId } from "../../core/util/ids.js";
import type { ChatMessage } from "../chat-api/schema.js";
import { backendErrorBody, backendErrorStatus } from "../encoder/backend-errors.js";
import type { FlowEvent, StreamDialect } from "../encoder/stream.js";
import type { ToolMap, ToolName } from "./translate.js";

/** The usage object of a response. */
export function usageJson(u: Usage) {
  return {
    input_tokens: u.promptTokens,
    input_tokens_details: { cached_tokens: u.cachedTokens ?? 0 },
    output_tokens: u.completionTokens,
    output_tokens_details: { reasoning_tokens: u.reasoningTokens ?? 0 },
    total_tokens: u.totalTokens,
  };
}

/** A finished response: its object as JSON text, and what it added to the conversation (chat form). */
export interface FinishedResponse {
  json: string;
  /** The answer as one assistant message (text and tool calls), for the chain. */
  output: ChatMessage;
}

/** What a response knows before its first event. */
export interface ResponseContext {
  /** `resp_...` */
  id: string;
  /** The model as the client asked for it. */
  model: string;
  /** Unix seconds. */
  createdAt: number;
  /** The request's fields a response object repeats (instructions, tools, tool_choice, store...). */
  echo: Readonly<Record<string, unknown>>;
  /** What each chat tool name stands for (namespaces, freeform tools). */
  tools: ToolMap;
  /** Called once with a completed or incomplete response (to store it), before its last frame is written. */
  onFinished?(r: FinishedResponse): void;
}

type Item = Record<string, unknown>;

interface OpenMessage {
  kind: "message";
  id: string;
  text: string;
  head: string;
}
interface OpenReasoning {
  kind: "reasoning";
  id: string;
  text: string;
  head: string;
}
interface OpenCall {
  kind: "call";
  id: string;
  /** The backend's index of the call. */
  index: number;
  callId: string;
  chatName: string;
  tool: ToolName | undefined;
  args: string;
  /** The prefix of an arguments delta (function calls only: a freeform call's input is sent whole). */
  head: string;
}
type Open = OpenMessage | OpenReasoning | OpenCall;

const HEARTBEAT = ": keep-alive\n\n";

export class ResponsesDialect implements StreamDialect {
  private seq = 0;
  /** The closed output items as JSON, in order; the open one (if any) has index `items.length`. */
  private readonly items: string[] = [];
  private current: Open | undefined;
  /** The echoed request fields as a JSON fragment (serialised once: they hold the request's tools). */
  private echoJson: string | undefined;
  private text = "";
  private readonly calls: NonNullable<ChatMessage["tool_calls"]> = [];
  /** Set when the response has ended (finished or failed). */
  result: FinishedResponse | undefined;

  constructor(private readonly ctx: ResponseContext) {}

  /**
   * The response object in a state, as JSON text built from its parts: the closed items' JSON and
   * the echoed fields' JSON are reused, never serialised again (the key order is the API's).
   */
  responseJson(
    status: "in_progress" | "completed" | "incomplete" | "failed",
    extra: { usage?: Usage; error?: { code: string; message: string }; incomplete?: string } = {},
  ): string {
    const { ctx } = this;
    this.echoJson ??= JSON.stringify(ctx.echo).slice(1, -1);
    const done = status !== "in_progress";
    return (
      `{"id":"${ctx.id}","object":"response","created_at":${ctx.createdAt},"status":"${status}",` +
      (done ? `"completed_at":${Math.floor(Date.now() / 1000)},` : "") +
      `"model":${JSON.stringify(ctx.model)},"output":[${done ? this.items.join(",") : ""}],` +
      `"usage":${extra.usage ? JSON.stringify(usageJson(extra.usage)) : "null"},` +
      `"error":${extra.error ? JSON.stringify(extra.error) : "null"},` +
      `"incomplete_details":${extra.incomplete ? `{"reason":"${extra.incomplete}"}` : "null"}` +
      (this.echoJson ? `,${this.echoJson}}` : "}")
    );
  }

  private frame(type: string, body: string): string {
    return `event: ${type}\ndata: {"type":"${type}",${body},"sequence_number":${this.seq++}}\n\n`;
  }

  open(): string {
    const json = this.responseJson("in_progress");
    return (
      this.frame("response.created", `"response":${json}`) + this.frame("response.in_progress", `"response":${json}`)
    );
  }

  event(ev: FlowEvent): string {
    switch (ev.type) {
      case "text": {
        let out = "";
        let m = this.current;
        if (m?.kind !== "message") {
          out = this.close();
          m = this.openMessage();
          out += this.added(m.id, { type: "message", status: "in_progress", role: "assistant", content: [] });
          out += this.frame(
            "response.content_part.added",
            `"item_id":"${m.id}","output_index":${this.items.length},"content_index":0,"part":{"type":"output_text","text":"","annotations":[],"logprobs":[]}`,
          );
        }
        m.text += ev.text;
        this.text += ev.text;
        return `${out}${m.head}${JSON.stringify(ev.text)},"sequence_number":${this.seq++}}\n\n`;
      }
      case "reasoning": {
        if (!ev.text) return "";
        let out = "";
        let r = this.current;
        if (r?.kind !== "reasoning") {
          out = this.close();
          const id = alnumId("rs_");
          r = {
            kind: "reasoning",
            id,
            text: "",
            head: `event: response.reasoning_summary_text.delta\ndata: {"type":"response.reasoning_summary_text.delta","item_id":"${id}","output_index":${this.items.length},"summary_index":0,"delta":`,
          };
          this.current = r;
          out += this.added(id, { type: "reasoning", summary: [] });
          out += this.frame(
            "response.reasoning_summary_part.added",
            `"item_id":"${id}","output_index":${this.items.length},"summary_index":0,"part":{"type":"summary_text","text":""}`,
          );
        }
        r.text += ev.text;
        return `${out}${r.head}${JSON.stringify(ev.text)},"sequence_number":${this.seq++}}\n\n`;
      }
      case "tool_call": {
        let out = "";
        let c = this.current;
        if (c?.kind !== "call" || c.index !== ev.index) {
          out = this.close();
          c = this.openCall(ev.index, ev.id, ev.name ?? "");
          const t = c.tool;
          const ns = t?.namespace ? { namespace: t.namespace } : {};
          out += t?.custom
            ? this.added(c.id, { type: "custom_tool_call", call_id: c.callId, name: t.name, ...ns, input: "" })
            : this.added(c.id, {
                type: "function_call",
                status: "in_progress",
                call_id: c.callId,
                name: t?.name ?? c.chatName,
                ...ns,
                arguments: "",
              });
        }
        if (!ev.argumentsDelta) return out;
        c.args += ev.argumentsDelta;
        if (c.tool?.custom) return out;
        return `${out}${c.head}${JSON.stringify(ev.argumentsDelta)},"sequence_number":${this.seq++}}\n\n`;
      }
      default:
        return "";
    }
  }

  finish(reason: FinishReason, usage: Usage | undefined): string {
    let out = this.close();
    const incomplete = reason === "length" ? "max_output_tokens" : reason === "content_filter" ? "content_filter" : "";
    const json = incomplete
      ? this.responseJson("incomplete", { ...(usage ? { usage } : {}), incomplete })
      : this.responseJson("completed", usage ? { usage } : {});
    const output: ChatMessage = {
      role: "assistant",
      content: this.text || (this.calls.length ? null : ""),
      ...(this.calls.length ? { tool_calls: this.calls } : {}),
    };
    this.result = { json, output };
    this.ctx.onFinished?.(this.result);
    out += this.frame(incomplete ? "response.incomplete" : "response.completed", `"response":${json}`);
    return out;
  }

  fail(err: BackendError): string {
    const out = this.close("incomplete");
    const error = responseError(err);
    const json = this.responseJson("failed", { error });
    return out + this.frame("response.failed", `"response":${json}`);
  }

  heartbeat(): string {
    return HEARTBEAT;
  }

  failFirst(err: BackendError): { status: number; body: string } {
    return { status: backendErrorStatus(err), body: JSON.stringify(backendErrorBody(err)) };
  }

  private added(id: string, item: Item): string {
    return this.frame(
      "response.output_item.added",
      `"output_index":${this.items.length},"item":${JSON.stringify({ id, ...item })}`,
    );
  }

  private openMessage(): OpenMessage {
    const id = alnumId("msg_");
    const m: OpenMessage = {
      kind: "message",
      id,
      text: "",
      head: `event: response.output_text.delta\ndata: {"type":"response.output_text.delta","item_id":"${id}","output_index":${this.items.length},"content_index":0,"logprobs":[],"delta":`,
    };
    this.current = m;
    return m;
  }

  private openCall(index: number, callId: string | undefined, chatName: string): OpenCall {
    const tool = this.ctx.tools.get(chatName);
    const id = alnumId(tool?.custom ? "ctc_" : "fc_");
    const c: OpenCall = {
      kind: "call",
      id,
      index,
      callId: callId || newCallId(),
      chatName,
      tool,
      args: "",
      head: `event: response.function_call_arguments.delta\ndata: {"type":"response.function_call_arguments.delta","item_id":"${id}","output_index":${this.items.length},"delta":`,
    };
    this.current = c;
    return c;
  }

  /** The frames that close the open item (none when nothing is open), which joins the output. */
  private close(status: "completed" | "incomplete" = "completed"): string {
    const o = this.current;
    if (!o) return "";
    this.current = undefined;
    const index = this.items.length;
    const at = `"item_id":"${o.id}","output_index":${index}`;
    let out: string;
    let item: string;
    switch (o.kind) {
      case "message": {
        const text = JSON.stringify(o.text);
        const part = `{"type":"output_text","text":${text},"annotations":[],"logprobs":[]}`;
        out =
          this.frame("response.output_text.done", `${at},"content_index":0,"text":${text},"logprobs":[]`) +
          this.frame("response.content_part.done", `${at},"content_index":0,"part":${part}`);
        item = `{"id":"${o.id}","type":"message","status":"${status}","role":"assistant","content":[${part}]}`;
        break;
      }
      case "reasoning": {
        const text = JSON.stringify(o.text);
        const part = `{"type":"summary_text","text":${text}}`;
        out =
          this.frame("response.reasoning_summary_text.done", `${at},"summary_index":0,"text":${text}`) +
          this.frame("response.reasoning_summary_part.done", `${at},"summary_index":0,"part":${part}`);
        item = `{"id":"${o.id}","type":"reasoning","summary":[${part}]}`;
        break;
      }
      case "call": {
        const t = o.tool;
        const ns = t?.namespace ? { namespace: t.namespace } : {};
        this.calls.push({ id: o.callId, type: "function", function: { name: o.chatName, arguments: o.args } });
        if (t?.custom) {
          const input = freeformInput(o.args);
          const json = JSON.stringify(input);
          out =
            (input ? this.frame("response.custom_tool_call_input.delta", `${at},"delta":${json}`) : "") +
            this.frame("response.custom_tool_call_input.done", `${at},"input":${json}`);
          item = JSON.stringify({ id: o.id, type: "custom_tool_call", call_id: o.callId, name: t.name, ...ns, input });
        } else {
          const name = t?.name ?? o.chatName;
          out = this.frame(
            "response.function_call_arguments.done",
            `${at},"name":${JSON.stringify(name)},"arguments":${JSON.stringify(o.args)}`,
          );
          item = JSON.stringify({
            id: o.id,
            type: "function_call",
            status,
            call_id: o.callId,
            name,
            ...ns,
            arguments: o.args,
          });
        }
        break;
      }
    }
    this.items.push(item);
    return out + this.frame("response.output_item.done", `"output_index":${index},"item":${item}`);
  }
}

/** A freeform tool's input out of the chat call's arguments (`{"input": "..."}`; anything else is given whole). */
function freeformInput(args: string): string {
  try {
    const v: unknown = JSON.parse(args);
    if (v && typeof v === "object" && typeof (v as { input?: unknown }).input === "string")
      return (v as { input: string }).input;
  } catch {
    /* not JSON: the model wrote the input itself */
  }
  return args;
}

/** A backend failure as a response's `error`: a limit is `rate_limit_exceeded` (with when to retry), the rest `server_error`. */
export function responseError(err: BackendError): { code: string; message: string } {
  if (err.code === "limit_reached") {
    const wait = err.resetAt ? Math.max(1, Math.ceil((err.resetAt - Date.now()) / 1000)) : 0;
    return { code: "rate_limit_exceeded", message: wait ? `${err.message} Try again in ${wait}s.` : err.message };
  }
  return { code: "server_error", message: err.message };
}
