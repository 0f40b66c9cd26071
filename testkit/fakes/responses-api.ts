/**
 * A fake OpenAI Responses API on 127.0.0.1 (ephemeral port) for driving the real `codex` CLI
 * offline. Scriptable per test (on the LAST USER message), records every request, answers any model.
 *
 * - `POST /v1/responses` (SSE when `stream: true`, JSON otherwise): `response.created`,
 *   `response.in_progress`, per item `response.output_item.added` → deltas
 *   (`response.output_text.delta` / `response.reasoning_summary_text.delta`) →
 *   `response.output_item.done`, then `response.completed` with `usage`.
 * - `GET /v1/models` → a one-model list. Anything else → 404 and recorded in `unknown`.
 */
import type { ServerResponse } from "node:http";
import { redactHeaders, runScript, sendJson as json, serveFake, sleep } from "./fake-http.js";

export interface RecordedResponsesRequest {
  method: string;
  /** Path and query. */
  path: string;
  /** Headers with credentials removed. */
  headers: Record<string, string>;
  /** Parsed JSON body (undefined when there was none or it was not JSON). */
  body: any; // eslint-disable-line @typescript-eslint/no-explicit-any
  /** Text of the last `input` message with role user (its input_text parts joined). */
  lastUserText: string;
  /** The request's `instructions` (the model's system prompt). */
  instructions: string;
  stream: boolean;
}

export type ResponsesReply =
  | {
      kind: "text";
      /** Streamed as separate `response.output_text.delta` events of one message item. */
      chunks: string[];
      /** Reasoning summary deltas, in a `reasoning` item before the message. */
      reasoning?: string[];
      /**
       * Function calls after the message; codex runs them and calls again. `namespace`: the tool's
       * namespace, for a tool offered inside a `namespace` tool (codex 0.169 offers an MCP server's
       * tools as `{type: "namespace", name: "mcp__<server>", tools: [...]}`: a call of one names the
       * tool and that namespace).
       */
      functionCalls?: ResponsesFunctionCall[];
      /** Delay before each delta. */
      delayMs?: number;
      inputTokens?: number;
      cachedTokens?: number;
      outputTokens?: number;
      reasoningTokens?: number;
    }
  /** An HTTP error answer `{"error":{"message","type","code"}}`. */
  | {
      kind: "error";
      status: number;
      message: string;
      type?: string;
      code?: string;
      /** More fields of the `error` object (`plan_type`, `resets_at`, `resets_in_seconds` of a usage limit). */
      extra?: Record<string, unknown>;
      headers?: Record<string, string>;
    }
  /** A 200 stream that ends with `response.failed` carrying this error. */
  | { kind: "failed"; message: string; code?: string }
  /** Accept the request and never answer (until the client goes away or the fake closes). */
  | { kind: "hang" };

/** A `function_call` output item the fake model makes. */
export interface ResponsesFunctionCall {
  name: string;
  arguments: unknown;
  callId?: string;
  namespace?: string;
}

/** The `function_call` output item of a scripted call. */
function functionCallItem(f: ResponsesFunctionCall, id: string, i: number): Record<string, unknown> {
  return {
    type: "function_call",
    id: `fc_${id}_${i}`,
    call_id: f.callId ?? `call_${id}_${i}`,
    name: f.name,
    ...(f.namespace ? { namespace: f.namespace } : {}),
    arguments: typeof f.arguments === "string" ? f.arguments : JSON.stringify(f.arguments),
    status: "completed",
  };
}

export type ResponsesScript = (req: RecordedResponsesRequest) => ResponsesReply | Promise<ResponsesReply>;

export interface FakeResponses {
  /** Base URL including /v1, e.g. http://127.0.0.1:1234/v1 */
  url: string;
  port: number;
  requests: RecordedResponsesRequest[];
  unknown: RecordedResponsesRequest[];
  /** Only the model calls (POST /v1/responses). */
  responseCalls(): RecordedResponsesRequest[];
  setScript(script: ResponsesScript): void;
  close(): Promise<void>;
}

/** Text of a Responses API message content (a string or input_text/output_text parts). */
export function responsesText(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .map((p) =>
      p && typeof p === "object" && typeof (p as { text?: unknown }).text === "string"
        ? (p as { text: string }).text
        : "",
    )
    .filter(Boolean)
    .join("\n");
}

/** The `input` messages of a request as [role, text] (function calls, reasoning and empty texts skipped). */
export function responsesDialogue(body: any): [string, string][] {
  const input: any[] = Array.isArray(body?.input) ? body.input : [];
  return input
    .filter((i) => (i?.type === "message" || i?.type === undefined) && typeof i?.role === "string")
    .map((i): [string, string] => [i.role, responsesText(i.content)])
    .filter(([, t]) => t.trim() !== "");
}

function lastUserText(body: any): string {
  if (typeof body?.input === "string") return body.input;
  const d = responsesDialogue(body);
  for (let i = d.length - 1; i >= 0; i--) if (d[i]![0] === "user") return d[i]![1];
  return "";
}

export const echoResponsesScript: ResponsesScript = (req) => ({
  kind: "text",
  chunks: ["You said: ", req.lastUserText.slice(-40), "."],
});

let counter = 0;

export async function startFakeResponses(script: ResponsesScript = echoResponsesScript): Promise<FakeResponses> {
  let current = script;
  const requests: RecordedResponsesRequest[] = [];
  const unknown: RecordedResponsesRequest[] = [];

  const server = await serveFake(async ({ method, url, headers, body }, res) => {
    const rec: RecordedResponsesRequest = {
      method,
      path: url.pathname + url.search,
      headers: redactHeaders(headers),
      body,
      lastUserText: lastUserText(body),
      instructions: typeof body?.instructions === "string" ? body.instructions : "",
      stream: body?.stream === true,
    };
    requests.push(rec);
    const path = url.pathname;
    if (method === "GET" && path === "/v1/models") {
      json(res, 200, { object: "list", data: [{ id: "fake-model", object: "model", owned_by: "fake" }] });
      return;
    }
    if (method === "POST" && path === "/v1/responses") {
      await answer(
        res,
        rec,
        await runScript(current, rec, (message): ResponsesReply => ({ kind: "error", status: 500, message })),
      );
      return;
    }
    unknown.push(rec);
    json(res, 404, { error: { message: `fake: no route ${method} ${path}`, type: "not_found" } });
  });
  const port = server.port;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    port,
    requests,
    unknown,
    responseCalls: () => requests.filter((r) => r.method === "POST" && r.path.startsWith("/v1/responses")),
    setScript(s) {
      current = s;
    },
    close: server.close,
  };
}

async function answer(res: ServerResponse, rec: RecordedResponsesRequest, reply: ResponsesReply): Promise<void> {
  if (reply.kind === "hang") {
    await new Promise<void>((resolve) => res.once("close", () => resolve()));
    return;
  }
  if (reply.kind === "error") {
    json(
      res,
      reply.status,
      {
        error: {
          message: reply.message,
          type: reply.type ?? (reply.status >= 500 ? "server_error" : "invalid_request_error"),
          param: null,
          code: reply.code ?? null,
          ...reply.extra,
        },
      },
      reply.headers,
    );
    return;
  }
  const model = typeof rec.body?.model === "string" ? rec.body.model : "fake-model";
  const id = `resp_fake${++counter}`;
  const base = {
    id,
    object: "response",
    created_at: Math.floor(Date.now() / 1000),
    model,
    status: "in_progress",
    output: [] as unknown[],
  };
  let seq = 0;
  const send = (data: Record<string, unknown>) => {
    if (!res.writableEnded && !res.destroyed)
      res.write(`event: ${String(data.type)}\ndata: ${JSON.stringify({ ...data, sequence_number: seq++ })}\n\n`);
  };

  if (reply.kind === "failed") {
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    send({ type: "response.created", response: base });
    send({
      type: "response.failed",
      response: { ...base, status: "failed", error: { code: reply.code ?? "server_error", message: reply.message } },
    });
    res.end();
    return;
  }

  const output: unknown[] = [];
  const inputTokens = reply.inputTokens ?? 42;
  const cached = reply.cachedTokens ?? 0;
  const outputTokens = reply.outputTokens ?? reply.chunks.length + 3;
  const reasoningTokens = reply.reasoningTokens ?? 0;
  const usage = {
    input_tokens: inputTokens,
    input_tokens_details: { cached_tokens: cached },
    output_tokens: outputTokens,
    output_tokens_details: { reasoning_tokens: reasoningTokens },
    total_tokens: inputTokens + outputTokens,
  };

  if (!rec.stream) {
    if (reply.reasoning?.length)
      output.push({
        type: "reasoning",
        id: `rs_${id}`,
        summary: [{ type: "summary_text", text: reply.reasoning.join("") }],
      });
    output.push({
      type: "message",
      id: `msg_${id}`,
      status: "completed",
      role: "assistant",
      content: [{ type: "output_text", text: reply.chunks.join(""), annotations: [] }],
    });
    for (const [i, f] of (reply.functionCalls ?? []).entries()) output.push(functionCallItem(f, id, i));
    json(res, 200, { ...base, status: "completed", output, usage });
    return;
  }

  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" });
  send({ type: "response.created", response: base });
  send({ type: "response.in_progress", response: base });
  let index = 0;
  if (reply.reasoning?.length) {
    const itemId = `rs_${id}`;
    send({
      type: "response.output_item.added",
      output_index: index,
      item: { type: "reasoning", id: itemId, summary: [] },
    });
    send({
      type: "response.reasoning_summary_part.added",
      item_id: itemId,
      output_index: index,
      summary_index: 0,
      part: { type: "summary_text", text: "" },
    });
    for (const r of reply.reasoning) {
      if (reply.delayMs) await sleep(reply.delayMs);
      send({
        type: "response.reasoning_summary_text.delta",
        item_id: itemId,
        output_index: index,
        summary_index: 0,
        delta: r,
      });
    }
    const text = reply.reasoning.join("");
    send({
      type: "response.reasoning_summary_text.done",
      item_id: itemId,
      output_index: index,
      summary_index: 0,
      text,
    });
    send({
      type: "response.reasoning_summary_part.done",
      item_id: itemId,
      output_index: index,
      summary_index: 0,
      part: { type: "summary_text", text },
    });
    const item = { type: "reasoning", id: itemId, summary: [{ type: "summary_text", text }] };
    send({ type: "response.output_item.done", output_index: index, item });
    output.push(item);
    index++;
  }
  if (reply.chunks.length) {
    const itemId = `msg_${id}`;
    send({
      type: "response.output_item.added",
      output_index: index,
      item: { type: "message", id: itemId, status: "in_progress", role: "assistant", content: [] },
    });
    send({
      type: "response.content_part.added",
      item_id: itemId,
      output_index: index,
      content_index: 0,
      part: { type: "output_text", text: "", annotations: [] },
    });
    for (const c of reply.chunks) {
      if (reply.delayMs) await sleep(reply.delayMs);
      send({ type: "response.output_text.delta", item_id: itemId, output_index: index, content_index: 0, delta: c });
    }
    const text = reply.chunks.join("");
    send({ type: "response.output_text.done", item_id: itemId, output_index: index, content_index: 0, text });
    send({
      type: "response.content_part.done",
      item_id: itemId,
      output_index: index,
      content_index: 0,
      part: { type: "output_text", text, annotations: [] },
    });
    const item = {
      type: "message",
      id: itemId,
      status: "completed",
      role: "assistant",
      content: [{ type: "output_text", text, annotations: [] }],
    };
    send({ type: "response.output_item.done", output_index: index, item });
    output.push(item);
    index++;
  }
  for (const [i, f] of (reply.functionCalls ?? []).entries()) {
    const item = functionCallItem(f, id, i);
    const args = item.arguments as string;
    send({
      type: "response.output_item.added",
      output_index: index,
      item: { ...item, arguments: "", status: "in_progress" },
    });
    send({ type: "response.function_call_arguments.delta", item_id: item.id, output_index: index, delta: args });
    send({ type: "response.function_call_arguments.done", item_id: item.id, output_index: index, arguments: args });
    send({ type: "response.output_item.done", output_index: index, item });
    output.push(item);
    index++;
  }
  send({ type: "response.completed", response: { ...base, status: "completed", output, usage } });
  res.end();
}
