/**
 * The router suite's client side: one timed chat request on a keep-alive pool, the text of an SSE
 * answer, and a conversation that keeps its history (as OpenClaw does) for the classifier-count
 * scenarios.
 */
import { performance } from "node:perf_hooks";
import type { Pool } from "undici";

export interface Timed {
  status: number;
  body: string;
  /** Request sent → first body byte (ms). */
  ttfb: number;
  /** Request sent → first body chunk with a non-empty `"content":"…` (ms). */
  ttfc: number;
  /** Request sent → last body byte (ms). */
  total: number;
}

const CONTENT = /"content":"[^"]/;

/** One POST /v1/chat/completions, read to the end, with its timings. */
export async function timedChat(pool: Pool, headers: Record<string, string>, body: string): Promise<Timed> {
  const t0 = performance.now();
  const res = await pool.request({ path: "/v1/chat/completions", method: "POST", headers, body });
  let ttfb = NaN;
  let ttfc = NaN;
  let text = "";
  for await (const chunk of res.body as AsyncIterable<Buffer>) {
    const now = performance.now();
    if (Number.isNaN(ttfb)) ttfb = now - t0;
    text += chunk.toString("utf8");
    if (Number.isNaN(ttfc) && CONTENT.test(text)) ttfc = now - t0;
  }
  return { status: res.statusCode, body: text, ttfb, ttfc, total: performance.now() - t0 };
}

/** The answer text of an SSE body (`delta.content` joined), or an error text. */
export function sseText(status: number, body: string): { text: string } | { error: string } {
  if (status !== 200) return { error: `HTTP ${status}: ${body.slice(0, 300)}` };
  if (!body.endsWith("data: [DONE]\n\n")) return { error: `stream did not end with [DONE]: ${body.slice(-300)}` };
  let text = "";
  for (const block of body.split("\n\n")) {
    if (!block.startsWith("data: ") || block === "data: [DONE]") continue;
    let obj: { error?: { message?: string }; choices?: Array<{ delta?: { content?: string } }> };
    try {
      obj = JSON.parse(block.slice(6));
    } catch {
      return { error: `a frame is not JSON: ${block.slice(0, 200)}` };
    }
    if (obj.error) return { error: `error frame: ${obj.error.message ?? JSON.stringify(obj.error)}` };
    text += obj.choices?.[0]?.delta?.content ?? "";
  }
  return { text };
}

type Message = {
  role: "user" | "assistant" | "tool" | "system";
  content: string | null;
  tool_calls?: unknown[];
  tool_call_id?: string;
};

/**
 * A conversation with the bridge's `router` model: every request carries the whole history and the
 * same `x-session-id` (as OpenClaw with the plugin does). Sequential; each request is bounded.
 */
export class Conversation {
  readonly messages: Message[] = [{ role: "system", content: "You are a personal assistant running inside OpenClaw." }];

  constructor(
    private readonly origin: string,
    private readonly sessionId: string,
    private readonly model: string,
  ) {}

  private async send(): Promise<string> {
    const res = await fetch(`${this.origin}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-session-id": this.sessionId },
      body: JSON.stringify({ model: this.model, stream: true, messages: this.messages }),
      signal: AbortSignal.timeout(60_000),
    });
    const parsed = sseText(res.status, await res.text());
    if ("error" in parsed) throw new Error(`${this.sessionId}: ${parsed.error}`);
    this.messages.push({ role: "assistant", content: parsed.text });
    return parsed.text;
  }

  /** The person says `text`; returns the reply text. */
  say(text: string): Promise<string> {
    this.messages.push({ role: "user", content: text });
    return this.send();
  }

  /**
   * The client hands a tool result back (after an assistant tool call it made up): the shape of
   * OpenClaw's request after it ran a tool.
   */
  toolResult(name: string, result: string): Promise<string> {
    const id = `call${this.messages.length}bench`;
    this.messages.push({
      role: "assistant",
      content: null,
      tool_calls: [{ id, type: "function", function: { name, arguments: "{}" } }],
    });
    this.messages.push({ role: "tool", tool_call_id: id, content: result });
    return this.send();
  }
}
