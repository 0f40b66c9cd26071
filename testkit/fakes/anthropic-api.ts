/**
 * A fake Anthropic Messages API on 127.0.0.1 (ephemeral port) for driving the real `claude` CLI
 * offline. Scriptable per test, records every request.
 *
 * - `POST /v1/messages` (streaming SSE and non-streaming JSON), `POST /v1/messages/count_tokens`,
 *   `HEAD /` / `GET /` (reachability probes) → 200; anything else → 404 and logged in `unknown`.
 * - The script is called with the request and the text of the LAST USER message (a user message
 *   whose content is only tool_result blocks does not count as "what the user said", but is still
 *   reported through `request.body`).
 */
import type { ServerResponse } from "node:http";
import { redactHeaders, runScript, sendJson as json, serveFake, sleep } from "./fake-http.js";

export { redactHeaders };

export interface RecordedRequest {
  method: string;
  path: string;
  /** Headers with credentials removed. */
  headers: Record<string, string>;
  /** Parsed JSON body (undefined when there was none or it was not JSON). */
  body: any;
  /** Text of the last user message that has text (system reminders included, as the CLI sent it). */
  lastUserText: string;
  stream: boolean;
}

export type AnthropicReply =
  | {
      kind: "text";
      /** Streamed as separate text_delta events. */
      chunks: string[];
      /** Thinking deltas sent before the text (a `thinking` block). */
      thinking?: string[];
      /** Tool uses (Claude's own tools) sent after the text; stop_reason becomes tool_use. */
      toolUses?: { id: string; name: string; input: unknown }[];
      /** Delay before each chunk. */
      delayMs?: number;
      inputTokens?: number;
      outputTokens?: number;
    }
  | {
      kind: "error";
      status: number;
      message: string;
      errorType?: string;
      /** Extra response headers (`retry-after`, `anthropic-ratelimit-unified-status: rejected`…). */
      headers?: Record<string, string>;
    }
  /** Accept the request and never answer (until the client goes away or the fake closes). */
  | { kind: "hang" };

export type AnthropicScript = (req: RecordedRequest) => AnthropicReply | Promise<AnthropicReply>;

export interface FakeAnthropic {
  baseUrl: string;
  port: number;
  /** Every request, in arrival order. */
  requests: RecordedRequest[];
  /** Requests to paths this fake does not know. */
  unknown: RecordedRequest[];
  /** Only the model calls (POST /v1/messages). */
  messageCalls(): RecordedRequest[];
  setScript(script: AnthropicScript): void;
  close(): Promise<void>;
}

/** Text of a Messages API content value (string or blocks). Only `text` blocks count. */
export function anthropicText(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .filter((b): b is { type: string; text: string } => !!b && typeof b === "object" && (b as any).type === "text")
    .map((b) => b.text)
    .join("\n");
}

function lastUserText(body: any): string {
  const messages: any[] = Array.isArray(body?.messages) ? body.messages : [];
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i];
    if (m?.role !== "user") continue;
    const t = anthropicText(m.content);
    if (t.trim()) return t;
  }
  return "";
}

/** The default script: echo the last user message in three chunks. */
export const echoScript: AnthropicScript = (req) => ({
  kind: "text",
  chunks: ["You said: ", req.lastUserText.slice(-40), "."],
});

let msgCounter = 0;

export async function startFakeAnthropic(script: AnthropicScript = echoScript): Promise<FakeAnthropic> {
  let current = script;
  const requests: RecordedRequest[] = [];
  const unknown: RecordedRequest[] = [];

  const server = await serveFake(async ({ method, url, headers, raw, body }, res) => {
    const rec: RecordedRequest = {
      method,
      path: url.pathname + url.search,
      headers: redactHeaders(headers),
      body,
      lastUserText: lastUserText(body),
      stream: body?.stream === true,
    };
    requests.push(rec);
    const path = url.pathname;

    if ((method === "HEAD" || method === "GET") && path === "/") {
      res.writeHead(200, { "content-type": "text/plain" }).end(method === "HEAD" ? undefined : "ok");
      return;
    }
    if (method === "POST" && path === "/v1/messages/count_tokens") {
      const n = Math.max(1, Math.ceil(raw.length / 4));
      json(res, 200, { input_tokens: n });
      return;
    }
    if (method === "POST" && path === "/v1/messages") {
      await answer(
        res,
        rec,
        await runScript(current, rec, (message): AnthropicReply => ({ kind: "error", status: 500, message })),
      );
      return;
    }
    unknown.push(rec);
    json(res, 404, { type: "error", error: { type: "not_found_error", message: `fake: no route ${method} ${path}` } });
  });
  const port = server.port;

  return {
    baseUrl: `http://127.0.0.1:${port}`,
    port,
    requests,
    unknown,
    messageCalls: () =>
      requests.filter(
        (r) => r.method === "POST" && r.path.startsWith("/v1/messages") && !r.path.includes("count_tokens"),
      ),
    setScript(s) {
      current = s;
    },
    close: server.close,
  };
}

async function answer(res: ServerResponse, rec: RecordedRequest, reply: AnthropicReply): Promise<void> {
  if (reply.kind === "hang") {
    // Keep the socket open; headers are not even sent. Ends when the client disconnects or close().
    await new Promise<void>((resolve) => res.once("close", () => resolve()));
    return;
  }
  if (reply.kind === "error") {
    json(
      res,
      reply.status,
      { type: "error", error: { type: reply.errorType ?? "api_error", message: reply.message } },
      reply.headers,
    );
    return;
  }
  const model = typeof rec.body?.model === "string" ? rec.body.model : "claude-fake";
  const id = `msg_fake${++msgCounter}`;
  const inputTokens = reply.inputTokens ?? 42;
  const outputTokens = reply.outputTokens ?? reply.chunks.length + (reply.thinking?.length ?? 0) + 3;
  const stopReason = reply.toolUses?.length ? "tool_use" : "end_turn";

  if (!rec.stream) {
    const content: unknown[] = [];
    if (reply.thinking?.length)
      content.push({ type: "thinking", thinking: reply.thinking.join(""), signature: "fakesig" });
    content.push({ type: "text", text: reply.chunks.join("") });
    for (const t of reply.toolUses ?? []) content.push({ type: "tool_use", id: t.id, name: t.name, input: t.input });
    json(res, 200, {
      id,
      type: "message",
      role: "assistant",
      model,
      content,
      stop_reason: stopReason,
      stop_sequence: null,
      usage: { input_tokens: inputTokens, output_tokens: outputTokens },
    });
    return;
  }

  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" });
  const send = (event: string, data: unknown) => {
    if (!res.writableEnded && !res.destroyed) res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
  };
  send("message_start", {
    type: "message_start",
    message: {
      id,
      type: "message",
      role: "assistant",
      model,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: {
        input_tokens: inputTokens,
        output_tokens: 1,
        cache_creation_input_tokens: 0,
        cache_read_input_tokens: 0,
      },
    },
  });
  let index = 0;
  if (reply.thinking?.length) {
    send("content_block_start", {
      type: "content_block_start",
      index,
      content_block: { type: "thinking", thinking: "", signature: "" },
    });
    for (const t of reply.thinking) {
      if (reply.delayMs) await sleep(reply.delayMs);
      send("content_block_delta", {
        type: "content_block_delta",
        index,
        delta: { type: "thinking_delta", thinking: t },
      });
    }
    send("content_block_delta", {
      type: "content_block_delta",
      index,
      delta: { type: "signature_delta", signature: "fakesig" },
    });
    send("content_block_stop", { type: "content_block_stop", index });
    index++;
  }
  send("content_block_start", { type: "content_block_start", index, content_block: { type: "text", text: "" } });
  for (const c of reply.chunks) {
    if (reply.delayMs) await sleep(reply.delayMs);
    send("content_block_delta", { type: "content_block_delta", index, delta: { type: "text_delta", text: c } });
  }
  send("content_block_stop", { type: "content_block_stop", index });
  index++;
  for (const t of reply.toolUses ?? []) {
    send("content_block_start", {
      type: "content_block_start",
      index,
      content_block: { type: "tool_use", id: t.id, name: t.name, input: {} },
    });
    send("content_block_delta", {
      type: "content_block_delta",
      index,
      delta: { type: "input_json_delta", partial_json: JSON.stringify(t.input) },
    });
    send("content_block_stop", { type: "content_block_stop", index });
    index++;
  }
  send("message_delta", {
    type: "message_delta",
    delta: { stop_reason: stopReason, stop_sequence: null },
    usage: { output_tokens: outputTokens },
  });
  send("message_stop", { type: "message_stop" });
  res.end();
}
