/**
 * A fake Gemini API (Generative Language v1beta) on 127.0.0.1 (ephemeral port) for driving the real
 * `gemini` CLI offline. Scriptable per test, records every request.
 *
 * - `POST /v1beta/models/<model>:streamGenerateContent?alt=sse` — the model turn, SSE.
 * - `POST /v1beta/models/<model>:generateContent` — side calls (routing classifier, summaries, next
 *   speaker checks...). The script decides; a request that asks for JSON (`responseJsonSchema` /
 *   `responseSchema`) and gets a `text` reply from the default script receives a value built from
 *   the schema instead, so the CLI's side calls keep working.
 * - `POST /v1beta/models/<model>:countTokens` → a rough count.
 * - Anything else → 404 and logged in `unknown`.
 * Any model name is accepted. Scripting is on the LAST USER content that has text (a user content made
 * only of functionResponse parts does not count).
 */
import type { ServerResponse } from "node:http";
import { redactHeaders, runScript, sendJson as json, serveFake, sleep } from "./fake-http.js";

export interface RecordedGeminiRequest {
  method: string;
  path: string;
  headers: Record<string, string>;
  body: any;
  /** Model name from the path. */
  model: string;
  /** `streamGenerateContent`, `generateContent`, `countTokens` or "" for other paths. */
  action: string;
  /** Text of the last user content with text. */
  lastUserText: string;
  /** Text of `systemInstruction`. */
  systemText: string;
  /** True when the request asks for a JSON answer (side calls). */
  wantsJson: boolean;
}

export type GeminiReply =
  | {
      kind: "text";
      chunks: string[];
      /** Thought parts (`thought: true`) sent before the text. */
      thoughts?: string[];
      /** Function calls (the CLI's own tools) sent after the text. */
      functionCalls?: { name: string; args: unknown }[];
      delayMs?: number;
      promptTokens?: number;
      outputTokens?: number;
    }
  /** A raw JSON value as the answer text (for side calls). */
  | { kind: "json"; value: unknown }
  | {
      kind: "error";
      status: number;
      message: string;
      statusText?: string;
      /** google.rpc details (`QuotaFailure`, `RetryInfo`, `ErrorInfo`…), as Google's API sends them. */
      details?: unknown[];
      headers?: Record<string, string>;
    }
  | { kind: "hang" };

export type GeminiScript = (req: RecordedGeminiRequest) => GeminiReply | Promise<GeminiReply>;

export interface FakeGemini {
  baseUrl: string;
  port: number;
  requests: RecordedGeminiRequest[];
  unknown: RecordedGeminiRequest[];
  /** Only the streamed model turns (`streamGenerateContent`). */
  turnCalls(): RecordedGeminiRequest[];
  setScript(script: GeminiScript): void;
  close(): Promise<void>;
}

export function geminiPartsText(parts: unknown): string {
  if (!Array.isArray(parts)) return "";
  return parts
    .filter(
      (p): p is { text: string } =>
        !!p && typeof p === "object" && typeof (p as any).text === "string" && !(p as any).thought,
    )
    .map((p) => p.text)
    .join("");
}

function lastUserText(body: any): string {
  const contents: any[] = Array.isArray(body?.contents) ? body.contents : [];
  for (let i = contents.length - 1; i >= 0; i--) {
    const c = contents[i];
    if (c?.role !== "user") continue;
    const t = geminiPartsText(c.parts);
    if (t.trim()) return t;
  }
  return "";
}

function systemText(body: any): string {
  const si = body?.systemInstruction ?? body?.system_instruction;
  if (!si) return "";
  if (typeof si === "string") return si;
  return geminiPartsText(si.parts);
}

/** The default script: echo the last user message in three chunks (JSON side calls get a schema value). */
export const echoGeminiScript: GeminiScript = (req) => ({
  kind: "text",
  chunks: ["You said: ", req.lastUserText.slice(-40), "."],
});

/** A value that satisfies a (simple) JSON schema: first enum value, "fake" strings, zeros, required keys. */
export function valueForSchema(schema: any, depth = 0): unknown {
  if (!schema || typeof schema !== "object" || depth > 8) return null;
  if (Array.isArray(schema.enum) && schema.enum.length) return schema.enum[0];
  const type = String(Array.isArray(schema.type) ? schema.type[0] : (schema.type ?? "object")).toLowerCase();
  switch (type) {
    case "string":
      return "fake";
    case "number":
    case "integer":
      return typeof schema.minimum === "number" ? schema.minimum : 1;
    case "boolean":
      return false;
    case "array":
      return [];
    case "null":
      return null;
    default: {
      const out: Record<string, unknown> = {};
      const props = schema.properties ?? {};
      const keys: string[] =
        Array.isArray(schema.required) && schema.required.length ? schema.required : Object.keys(props);
      for (const k of keys) out[k] = valueForSchema(props[k], depth + 1);
      return out;
    }
  }
}

export async function startFakeGemini(script: GeminiScript = echoGeminiScript): Promise<FakeGemini> {
  let current = script;
  const requests: RecordedGeminiRequest[] = [];
  const unknown: RecordedGeminiRequest[] = [];

  const server = await serveFake(async ({ method, url, headers, raw, body }, res) => {
    const m = /^\/v1(?:beta|alpha)?\/models\/([^/:]+):([A-Za-z]+)$/.exec(url.pathname);
    const gc = body?.generationConfig ?? body?.generation_config ?? {};
    const rec: RecordedGeminiRequest = {
      method,
      path: url.pathname + url.search,
      headers: redactHeaders(headers),
      body,
      model: m ? decodeURIComponent(m[1]!) : "",
      action: m ? m[2]! : "",
      lastUserText: lastUserText(body),
      systemText: systemText(body),
      wantsJson: !!(gc.responseJsonSchema || gc.responseSchema || gc.responseMimeType === "application/json"),
    };
    requests.push(rec);

    if (method === "POST" && rec.action === "countTokens") {
      json(res, 200, { totalTokens: Math.max(1, Math.ceil(raw.length / 4)) });
      return;
    }
    if (method === "POST" && (rec.action === "streamGenerateContent" || rec.action === "generateContent")) {
      let reply = await runScript(current, rec, (message): GeminiReply => ({ kind: "error", status: 500, message }));
      if (rec.wantsJson && reply.kind === "text") {
        reply = { kind: "json", value: valueForSchema(gc.responseJsonSchema ?? gc.responseSchema) };
      }
      await answer(res, rec, reply, rec.action === "streamGenerateContent");
      return;
    }
    unknown.push(rec);
    json(res, 404, { error: { code: 404, message: `fake: no route ${method} ${url.pathname}`, status: "NOT_FOUND" } });
  });
  const port = server.port;

  return {
    baseUrl: `http://127.0.0.1:${port}`,
    port,
    requests,
    unknown,
    turnCalls: () => requests.filter((r) => r.action === "streamGenerateContent"),
    setScript(s) {
      current = s;
    },
    close: server.close,
  };
}

const STATUS_TEXT: Record<number, string> = {
  400: "INVALID_ARGUMENT",
  401: "UNAUTHENTICATED",
  403: "PERMISSION_DENIED",
  404: "NOT_FOUND",
  429: "RESOURCE_EXHAUSTED",
  500: "INTERNAL",
  503: "UNAVAILABLE",
};

async function answer(
  res: ServerResponse,
  rec: RecordedGeminiRequest,
  reply: GeminiReply,
  stream: boolean,
): Promise<void> {
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
          code: reply.status,
          message: reply.message,
          status: reply.statusText ?? STATUS_TEXT[reply.status] ?? "UNKNOWN",
          ...(reply.details ? { details: reply.details } : {}),
        },
      },
      reply.headers,
    );
    return;
  }
  const modelVersion = rec.model || "gemini-fake";
  const promptTokens = reply.kind === "text" ? (reply.promptTokens ?? 37) : 10;
  const outputTokens = reply.kind === "text" ? (reply.outputTokens ?? reply.chunks.length + 2) : 5;
  const usage = (final: boolean) => ({
    promptTokenCount: promptTokens,
    candidatesTokenCount: final ? outputTokens : 1,
    totalTokenCount: promptTokens + (final ? outputTokens : 1),
  });
  const candidate = (parts: unknown[], finishReason?: string) => ({
    candidates: [{ content: { role: "model", parts }, index: 0, ...(finishReason ? { finishReason } : {}) }],
    usageMetadata: usage(!!finishReason),
    modelVersion,
    responseId: "fake-resp",
  });

  if (reply.kind === "json") {
    const text = JSON.stringify(reply.value);
    if (!stream) json(res, 200, candidate([{ text }], "STOP"));
    else {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.end(`data: ${JSON.stringify(candidate([{ text }], "STOP"))}\r\n\r\n`);
    }
    return;
  }

  if (!stream) {
    const parts: unknown[] = [];
    if (reply.thoughts?.length) parts.push({ text: reply.thoughts.join(""), thought: true });
    parts.push({ text: reply.chunks.join("") });
    for (const f of reply.functionCalls ?? []) parts.push({ functionCall: { name: f.name, args: f.args } });
    json(res, 200, candidate(parts, "STOP"));
    return;
  }
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
  const send = (v: unknown) => {
    if (!res.writableEnded && !res.destroyed) res.write(`data: ${JSON.stringify(v)}\r\n\r\n`);
  };
  for (const t of reply.thoughts ?? []) {
    if (reply.delayMs) await sleep(reply.delayMs);
    send(candidate([{ text: t, thought: true }]));
  }
  const calls = reply.functionCalls ?? [];
  for (let i = 0; i < reply.chunks.length; i++) {
    if (reply.delayMs) await sleep(reply.delayMs);
    const last = i === reply.chunks.length - 1 && calls.length === 0;
    send(candidate([{ text: reply.chunks[i] }], last ? "STOP" : undefined));
  }
  if (calls.length)
    send(
      candidate(
        calls.map((f) => ({ functionCall: { name: f.name, args: f.args } })),
        "STOP",
      ),
    );
  if (reply.chunks.length === 0 && calls.length === 0) send(candidate([{ text: "" }], "STOP"));
  res.end();
}
