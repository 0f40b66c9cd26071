/**
 * The builder's MCP tools (src/workflows/builder/mcp-server.ts) over Streamable HTTP at `/mcp`, in the SDK's
 * STATELESS mode: every POST gets a fresh McpServer and transport (no session id; answers are JSON,
 * not SSE), both closed when the response closes. GET (a server-to-client stream) and DELETE (end a
 * session) have no meaning without sessions: 405.
 *
 * Behind the same bearer keys as `/v1/*` (app.ts's auth hook covers `/v1/` only, so the key is
 * checked here, before the body is read): without the right key, 401 with `www-authenticate: Bearer`
 * and an OpenAI-shaped error, and the connection closes. When the builder is not configured, `/mcp`
 * is 404. Bodies are JSON, at most 4 MiB. The SDK and the tool definitions are loaded on the first
 * request (a bridge that never serves /mcp does not pay for them).
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { CanvasTools } from "../../workflows/builder/canvas-tools.js";
import { ApiError, unauthorized } from "../chat-api/errors.js";
import { ApiKeys } from "./auth.js";
import { lingerAfterAnswer, UNAUTHENTICATED_LINGER_BYTES } from "./http-front.js";

export const MCP_PATH = "/mcp";
export const MCP_BODY_LIMIT = 4 * 1024 * 1024;

/** Whether a request goes to `/mcp` and may send a body (the HTTP front lets it). */
export function isMcpRoute(method: string | undefined, url: string | undefined): boolean {
  if (method !== "POST" || !url) return false;
  const q = url.indexOf("?");
  return (q < 0 ? url : url.slice(0, q)) === MCP_PATH;
}

const notConfigured = () =>
  new ApiError(
    404,
    "not_found_error",
    "builder_not_configured",
    "The builder's MCP endpoint is not enabled on this bridge.",
  );

/** A JSON-RPC error answer outside any request (as the SDK's transport writes them). */
const rpcError = (code: number, message: string) => ({ jsonrpc: "2.0", error: { code, message }, id: null });

/**
 * One POST of the SDK's stateless Streamable HTTP: the server (made for this request) on a fresh
 * transport, both closed when the response closes; answers as JSON (`json`) or as an SSE stream.
 * Shared by `/mcp` and `/mcp/client-tools`.
 */
export async function serveStateless(
  req: FastifyRequest,
  reply: FastifyReply,
  server: McpServerLike,
  opts: { json: boolean },
): Promise<void> {
  const { StreamableHTTPServerTransport } = await import("@modelcontextprotocol/sdk/server/streamableHttp.js");
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: opts.json });
  reply.hijack();
  const res = reply.raw;
  let closed = false;
  const close = () => {
    if (closed) return;
    closed = true;
    void transport.close().catch(() => {});
    void server.close().catch(() => {});
  };
  res.on("close", close);
  try {
    await server.connect(transport);
    await transport.handleRequest(req.raw, res, req.body);
  } catch (err) {
    req.log?.error?.({ err }, "mcp request failed");
    if (!res.headersSent)
      res
        .writeHead(500, { "content-type": "application/json" })
        .end(JSON.stringify(rpcError(-32603, "Internal error in the bridge; see its log.")));
    else res.end();
    close();
  }
}

/** GET (a server-to-client stream) and DELETE (end a session) mean nothing without sessions. */
export const statelessOnly = async (_req: FastifyRequest, reply: FastifyReply) =>
  reply
    .code(405)
    .header("allow", "POST")
    .type("application/json")
    .send(rpcError(-32000, "Method not allowed: this endpoint is stateless, send JSON-RPC messages with POST."));

/** What `serveStateless` needs of an MCP server (the SDK's `McpServer` and low-level `Server` both fit). */
interface McpServerLike {
  connect(transport: import("@modelcontextprotocol/sdk/shared/transport.js").Transport): Promise<void>;
  close(): Promise<void>;
}

export function registerMcpRoute(app: FastifyInstance, deps: { keys: ApiKeys; tools?: CanvasTools }): void {
  const { keys, tools } = deps;

  // Answered before the body is read: the connection closes (lingering, bounded), as for the chat route.
  const refuse = (req: FastifyRequest, reply: FastifyReply, err: ApiError, extra: Record<string, string> = {}) => {
    for (const [k, v] of Object.entries({ ...err.headers, ...extra, connection: "close" })) void reply.header(k, v);
    lingerAfterAnswer(req.raw, UNAUTHENTICATED_LINGER_BYTES);
    return reply.code(err.status).type("application/json").send(err.body());
  };

  app.register(async (scope) => {
    // buildApp removes Fastify's own parsers; a plain Fastify app (tests) still has its JSON one.
    if (scope.hasContentTypeParser("application/json")) scope.removeContentTypeParser("application/json");
    scope.addContentTypeParser(
      "application/json",
      { parseAs: "string", bodyLimit: MCP_BODY_LIMIT },
      (_req, body, done) => {
        try {
          done(null, JSON.parse(body as string));
        } catch {
          done(
            new ApiError(
              400,
              "invalid_request_error",
              "invalid_json",
              "The body is not valid JSON (MCP messages are JSON-RPC 2.0).",
            ),
            undefined,
          );
        }
      },
    );

    scope.addHook("onRequest", async (req, reply) => {
      if (!keys.check(ApiKeys.presented(req.headers)))
        return refuse(req, reply, unauthorized(), { "www-authenticate": "Bearer" });
      if (!tools) return refuse(req, reply, notConfigured());
    });

    scope.post(MCP_PATH, async (req, reply) => {
      const { createBuilderMcpServer } = await import("../../workflows/builder/mcp-server.js");
      await serveStateless(req, reply, createBuilderMcpServer(tools!), { json: true });
    });

    scope.get(MCP_PATH, statelessOnly);
    scope.delete(MCP_PATH, statelessOnly);
  });
}
