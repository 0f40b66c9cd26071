/**
 * Anthropic Messages streaming: the pipeline's events as the real API's event sequence, written
 * by the shared engine (src/request/encoder/stream.ts: headers, per-tick writes, heartbeats, the
 * end). Each frame is `event: <type>\ndata: <json>\n\n`:
 * - open: `message_start` (the message with no content yet, `stop_reason: null`; input tokens are
 *   known when the backend reports them, so 0 here and the count in `message_delta`), then a
 *   `ping` as the real API sends;
 * - text → a `text` block, reasoning → a `thinking` block, a tool call → a `tool_use` block
 *   (`toolu_<call id>`, its name, `input: {}`, then `input_json_delta`s of its arguments): each
 *   `content_block_start`, its `content_block_delta`s, `content_block_stop` when the next kind
 *   begins or the answer ends;
 * - end: `message_delta` (`stop_reason` end_turn / max_tokens / tool_use / refusal, usage), then
 *   `message_stop`; a failure: `event: error` with the Anthropic error body;
 * - heartbeat: `ping`.
 * Every delta frame is a prefix built when its block opens plus the serialised string: nothing else
 * is serialised per token.
 */
import type { BackendError, FinishReason, Usage } from "../../backends/contract/backend.js";
import { alnumId } from "../../core/util/ids.js";
import type { FlowEvent, StreamDialect } from "../encoder/stream.js";
import { backendFailure, errorFrame } from "./errors.js";
import { toolUseId } from "./translate.js";
import { anthropicUsage, stopReason } from "./usage.js";

export const PING = 'event: ping\ndata: {"type":"ping"}\n\n';
const MESSAGE_STOP = 'event: message_stop\ndata: {"type":"message_stop"}\n\n';
const NO_USAGE = JSON.stringify(anthropicUsage(undefined));
/** What closes a delta frame after its serialised string. */
const DELTA_TAIL = "}}\n\n";

type OpenBlock = "none" | "text" | "thinking" | "tool_use";

export class MessagesDialect implements StreamDialect {
  readonly id = alnumId("msg_");
  /** The kind of the open block ("none" between blocks). */
  private block: OpenBlock = "none";
  /** The index the next block gets. */
  private nextIndex = 0;
  /** The backend's index of the tool call whose block is open. */
  private callIndex = -1;
  /** The open block's delta frame up to its string. */
  private deltaHead = "";

  constructor(private readonly model: string) {}

  open(): string {
    // As `JSON.stringify` of the message would write it (the id is letters and digits).
    return `event: message_start\ndata: {"type":"message_start","message":{"id":"${this.id}","type":"message","role":"assistant","model":${JSON.stringify(this.model)},"content":[],"stop_reason":null,"stop_sequence":null,"usage":${NO_USAGE}}}\n\n${PING}`;
  }

  event(ev: FlowEvent): string {
    switch (ev.type) {
      case "text":
        if (!ev.text) return "";
        return (
          (this.block === "text" ? "" : this.start("text")) + this.deltaHead + JSON.stringify(ev.text) + DELTA_TAIL
        );
      case "reasoning":
        if (!ev.text) return "";
        return (
          (this.block === "thinking" ? "" : this.start("thinking")) +
          this.deltaHead +
          JSON.stringify(ev.text) +
          DELTA_TAIL
        );
      case "tool_call": {
        let out = "";
        if (this.block !== "tool_use" || ev.index !== this.callIndex) {
          this.callIndex = ev.index;
          out = this.start("tool_use", ev.id || alnumId("call"), ev.name ?? "");
        }
        if (ev.argumentsDelta) out += this.deltaHead + JSON.stringify(ev.argumentsDelta) + DELTA_TAIL;
        return out;
      }
      default:
        return "";
    }
  }

  /** Closes the open block and opens one of `kind`. */
  private start(kind: Exclude<OpenBlock, "none">, callId = "", name = ""): string {
    const stop = this.stop();
    const index = this.nextIndex++;
    this.block = kind;
    let content: string;
    let delta: string;
    switch (kind) {
      case "text":
        content = '{"type":"text","text":""}';
        delta = '{"type":"text_delta","text":';
        break;
      case "thinking":
        content = '{"type":"thinking","thinking":"","signature":""}';
        delta = '{"type":"thinking_delta","thinking":';
        break;
      case "tool_use":
        content = `{"type":"tool_use","id":${JSON.stringify(toolUseId(callId))},"name":${JSON.stringify(name)},"input":{}}`;
        delta = '{"type":"input_json_delta","partial_json":';
        break;
    }
    this.deltaHead = `event: content_block_delta\ndata: {"type":"content_block_delta","index":${index},"delta":${delta}`;
    return `${stop}event: content_block_start\ndata: {"type":"content_block_start","index":${index},"content_block":${content}}\n\n`;
  }

  /** The open block's `content_block_stop` ("" when none is open). */
  private stop(): string {
    if (this.block === "none") return "";
    this.block = "none";
    return `event: content_block_stop\ndata: {"type":"content_block_stop","index":${this.nextIndex - 1}}\n\n`;
  }

  finish(reason: FinishReason, usage: Usage | undefined): string {
    const delta = `{"type":"message_delta","delta":{"stop_reason":"${stopReason(reason)}","stop_sequence":null},"usage":${JSON.stringify(anthropicUsage(usage))}}`;
    return `${this.stop()}event: message_delta\ndata: ${delta}\n\n${MESSAGE_STOP}`;
  }

  fail(err: BackendError): string {
    return errorFrame(err);
  }

  heartbeat(): string {
    return PING;
  }

  failFirst(err: BackendError): { status: number; body: string } {
    const { status, body } = backendFailure(err);
    return { status, body: JSON.stringify(body) };
  }
}
