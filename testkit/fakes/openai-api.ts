/**
 * A fake OpenAI-compatible model API on 127.0.0.1 for tests: the ONLY faked part of a test run.
 * Real CLIs (OpenCode) and the bridge's upstream backend talk to it. It answers any model name,
 * scripts replies on the LAST USER message, records every request, and can stream slowly, fail,
 * or hang.
 */
import type http from "node:http";
import { serveFake, sleep } from "./fake-http.js";

export interface RecordedRequest {
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  body: any; // eslint-disable-line @typescript-eslint/no-explicit-any
  rawBody: string;
  /** Text of the last message with role "user". */
  lastUser: string;
  /** True for side calls such as OpenCode's title generation. */
  side: boolean;
}

export type Reply =
  | {
      kind: "text";
      chunks: string[];
      /** Delay before each chunk after the first. */
      delayMs?: number;
      /** Delay before the first content chunk (role chunk is sent at once). */
      firstDelayMs?: number;
      usage?: { prompt_tokens: number; completion_tokens: number; total_tokens?: number };
      finishReason?: string;
      reasoning?: string[];
    }
  | { kind: "tool_calls"; calls: Array<{ name: string; arguments: unknown; id?: string }>; content?: string }
  | { kind: "error"; status: number; message: string; type?: string }
  | { kind: "hang"; afterChunks?: string[] }
  | { kind: "reset"; afterChunks?: string[] }
  /** Raw HTTP: written as is (frames with a delay between them). */
  | { kind: "raw"; status?: number; headers?: Record<string, string>; frames: string[]; delayMs?: number }
  /**
   * Raw HTTP driven step by step: a string is written as is, a function is awaited before the next
   * step (a gate the test releases, a signal that a frame was written, `res.flushHeaders()`...).
   * Headers (default text/event-stream) go out with the first write. The response ends after the
   * last step unless `keepOpen`.
   */
  | {
      kind: "steps";
      status?: number;
      headers?: Record<string, string>;
      steps: Array<string | ((res: http.ServerResponse) => unknown)>;
      keepOpen?: boolean;
    };

export type Script = (req: RecordedRequest) => Reply;

export interface FakeOpenAI {
  /** Base URL including /v1, e.g. http://127.0.0.1:1234/v1 */
  url: string;
  port: number;
  requests: RecordedRequest[];
  /** Requests that are not side calls (title generation and the like). */
  mainRequests(): RecordedRequest[];
  setScript(script: Script): void;
  /** Connections currently open (hanging replies included). */
  openConnections(): number;
  close(): Promise<void>;
}

export const defaultScript: Script = (req) => ({
  kind: "text",
  chunks: ["You said: ", req.lastUser.slice(0, 200)],
  usage: { prompt_tokens: 42, completion_tokens: 7 },
});

function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return content
      .map((p) =>
        p && typeof p === "object" && typeof (p as { text?: unknown }).text === "string"
          ? (p as { text: string }).text
          : "",
      )
      .join("\n");
  }
  return "";
}

function isSideCall(body: any): boolean {
  const sys = Array.isArray(body?.messages)
    ? body.messages
        .filter((m: any) => m.role === "system")
        .map((m: any) => textOf(m.content))
        .join("\n")
    : "";
  return /title generator|generate a (brief )?title|summar(y|ize) (of )?(this|the) conversation/i.test(sys);
}

export async function startFakeOpenAI(script: Script = defaultScript): Promise<FakeOpenAI> {
  let current = script;
  const requests: RecordedRequest[] = [];

  const server = await serveFake(async ({ method, url, headers, raw, body: parsed }, res) => {
    const path = url.pathname;
    const body = parsed ?? null;
    if (method === "GET" && path.endsWith("/models")) {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ object: "list", data: [{ id: "fake-model", object: "model", owned_by: "fake" }] }));
      return;
    }
    const messages: any[] = Array.isArray(body?.messages) ? body.messages : [];
    const lastUserMsg = [...messages].reverse().find((m) => m?.role === "user");
    const rec: RecordedRequest = {
      method,
      path,
      headers,
      body,
      rawBody: raw,
      lastUser: textOf(lastUserMsg?.content),
      side: isSideCall(body),
    };
    requests.push(rec);
    if (!path.endsWith("/chat/completions")) {
      res.writeHead(404, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: { message: `fake has no ${path}`, type: "not_found" } }));
      return;
    }
    const reply: Reply = rec.side ? { kind: "text", chunks: ["Test conversation"] } : current(rec);
    const stream = body?.stream === true;
    const model = String(body?.model ?? "fake-model");
    const id = `chatcmpl-fake${requests.length}`;
    const chunk = (delta: object, finish: string | null = null, extra: object = {}) =>
      `data: ${JSON.stringify({ id, object: "chat.completion.chunk", created: 1, model, choices: [{ index: 0, delta, finish_reason: finish }], ...extra })}\n\n`;

    switch (reply.kind) {
      case "error": {
        res.writeHead(reply.status, { "content-type": "application/json" });
        res.end(
          JSON.stringify({
            error: {
              message: reply.message,
              type: reply.type ?? (reply.status >= 500 ? "server_error" : "invalid_request_error"),
            },
          }),
        );
        return;
      }
      case "raw": {
        res.writeHead(reply.status ?? 200, reply.headers ?? { "content-type": "text/event-stream" });
        for (const f of reply.frames) {
          if (res.destroyed) return;
          res.write(f);
          if (reply.delayMs) await sleep(reply.delayMs);
        }
        res.end();
        return;
      }
      case "hang":
      case "reset": {
        if (stream) {
          res.writeHead(200, { "content-type": "text/event-stream" });
          res.write(chunk({ role: "assistant", content: "" }));
          for (const c of reply.afterChunks ?? []) res.write(chunk({ content: c }));
        }
        if (reply.kind === "reset") setTimeout(() => res.destroy(), 50);
        return; // hang: leave it open until the client or close() ends it
      }
      case "tool_calls": {
        const calls = reply.calls.map((c, i) => ({
          index: i,
          id: c.id ?? `call${i}abc`,
          type: "function",
          function: {
            name: c.name,
            arguments: typeof c.arguments === "string" ? c.arguments : JSON.stringify(c.arguments),
          },
        }));
        if (!stream) {
          res.writeHead(200, { "content-type": "application/json" });
          res.end(
            JSON.stringify({
              id,
              object: "chat.completion",
              created: 1,
              model,
              choices: [
                {
                  index: 0,
                  message: {
                    role: "assistant",
                    content: reply.content ?? null,
                    tool_calls: calls.map(({ index: _i, ...c }) => c),
                  },
                  finish_reason: "tool_calls",
                },
              ],
              usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
            }),
          );
          return;
        }
        res.writeHead(200, { "content-type": "text/event-stream" });
        res.write(chunk({ role: "assistant", content: reply.content ?? "" }));
        for (const c of calls) res.write(chunk({ tool_calls: [c] }));
        res.write(chunk({}, "tool_calls"));
        res.end("data: [DONE]\n\n");
        return;
      }
      case "text": {
        const usage = reply.usage
          ? {
              ...reply.usage,
              total_tokens: reply.usage.total_tokens ?? reply.usage.prompt_tokens + reply.usage.completion_tokens,
            }
          : undefined;
        if (!stream) {
          if (reply.firstDelayMs) await sleep(reply.firstDelayMs);
          res.writeHead(200, { "content-type": "application/json" });
          res.end(
            JSON.stringify({
              id,
              object: "chat.completion",
              created: 1,
              model,
              choices: [
                {
                  index: 0,
                  message: { role: "assistant", content: reply.chunks.join("") },
                  finish_reason: reply.finishReason ?? "stop",
                },
              ],
              ...(usage ? { usage } : {}),
            }),
          );
          return;
        }
        res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
        res.write(chunk({ role: "assistant", content: "" }));
        for (const r of reply.reasoning ?? []) res.write(chunk({ reasoning_content: r }));
        if (reply.firstDelayMs) await sleep(reply.firstDelayMs);
        for (let i = 0; i < reply.chunks.length; i++) {
          if (res.destroyed) return;
          if (i > 0 && reply.delayMs) await sleep(reply.delayMs);
          res.write(chunk({ content: reply.chunks[i] }));
        }
        res.write(chunk({}, reply.finishReason ?? "stop"));
        if (usage)
          res.write(
            `data: ${JSON.stringify({ id, object: "chat.completion.chunk", created: 1, model, choices: [], usage })}\n\n`,
          );
        res.end("data: [DONE]\n\n");
        return;
      }
      case "steps": {
        res.writeHead(reply.status ?? 200, reply.headers ?? { "content-type": "text/event-stream" });
        for (const step of reply.steps) {
          if (res.destroyed) return;
          if (typeof step === "string") res.write(step);
          else await step(res);
        }
        if (!reply.keepOpen && !res.destroyed) res.end();
        return;
      }
    }
  });
  const port = server.port;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    port,
    requests,
    mainRequests: () => requests.filter((r) => !r.side && r.path.endsWith("/chat/completions")),
    setScript: (s) => {
      current = s;
    },
    openConnections: server.openConnections,
    close: server.close,
  };
}
