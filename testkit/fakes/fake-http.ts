/**
 * What every fake model API (OpenAI Chat Completions, Anthropic Messages, OpenAI Responses,
 * Gemini) shares: an HTTP server on 127.0.0.1 (an ephemeral port) that reads each request's body
 * whole and parses it as JSON before handing it to the fake's own handler; a handler that throws
 * answers 500 (or drops the connection once its answer has started); `close()` ends every
 * connection, hanging answers included (their responses emit "close", so a fake's streaming loop
 * can stop on `res.destroyed`).
 */
import { createServer, type IncomingHttpHeaders, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";

export interface IncomingCall {
  method: string;
  url: URL;
  /** The headers as sent (a fake that records them redacts them with `redactHeaders`). */
  headers: IncomingHttpHeaders;
  /** The body as text. */
  raw: string;
  /** The body parsed as JSON; undefined when it was empty or not JSON. */
  body: any; // eslint-disable-line @typescript-eslint/no-explicit-any
}

export interface FakeHttpServer {
  port: number;
  /** Connections open now (idle keep-alive ones and hanging answers included). */
  openConnections(): number;
  close(): Promise<void>;
}

export async function serveFake(
  handle: (call: IncomingCall, res: ServerResponse) => void | Promise<void>,
): Promise<FakeHttpServer> {
  const sockets = new Set<Socket>();
  const server = createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on("data", (c: Buffer) => parts.push(c));
    req.on("end", () => {
      const raw = Buffer.concat(parts).toString("utf8");
      let body: unknown;
      try {
        body = raw ? JSON.parse(raw) : undefined;
      } catch {
        body = undefined;
      }
      const call: IncomingCall = {
        method: req.method ?? "GET",
        url: new URL(req.url ?? "/", "http://127.0.0.1"),
        headers: req.headers,
        raw,
        body,
      };
      void (async () => handle(call, res))().catch((err) => {
        if (!res.headersSent) res.writeHead(500).end(`fake failed: ${String(err)}`);
        else res.destroy();
      });
    });
  });
  server.on("connection", (s) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    openConnections: () => sockets.size,
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A script's reply; a script that throws becomes the fake's error reply (the test sees why). */
export async function runScript<Req, Reply>(
  script: (req: Req) => Reply | Promise<Reply>,
  req: Req,
  onThrow: (message: string) => Reply,
): Promise<Reply> {
  try {
    return await script(req);
  } catch (err) {
    return onThrow(`fake script threw: ${String(err)}`);
  }
}

export function sendJson(
  res: ServerResponse,
  status: number,
  value: unknown,
  headers: Record<string, string> = {},
): void {
  const s = JSON.stringify(value);
  res
    .writeHead(status, { ...headers, "content-type": "application/json", "content-length": Buffer.byteLength(s) })
    .end(s);
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const SECRET_HEADERS = new Set([
  "authorization",
  "x-api-key",
  "x-goog-api-key",
  "cookie",
  "proxy-authorization",
  "openai-organization",
  "openai-project",
]);

/** Headers with credentials replaced by "[redacted]" (what the fakes that record headers keep). */
export function redactHeaders(h: IncomingHttpHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(h)) {
    if (v === undefined) continue;
    out[k] = SECRET_HEADERS.has(k.toLowerCase()) ? "[redacted]" : Array.isArray(v) ? v.join(", ") : v;
  }
  return out;
}
