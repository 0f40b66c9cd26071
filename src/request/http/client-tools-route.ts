/**
 * The client's tools for CLI agents over MCP (src/backends/client-tools): `POST /mcp/client-tools`, Streamable
 * HTTP in the SDK's stateless mode (a fresh server and transport per POST), answered as an SSE
 * stream — a call may wait minutes for the client, and a CLI gives up on a JSON answer whose headers
 * do not come within 60 s, while SSE headers leave at once and progress notifications follow.
 *
 * Not behind the bridge's API keys: the bearer token is the conversation's own (`cbt…`, made by the
 * hub, handed to that conversation's CLI in a private file), so a CLI reaches only its own
 * conversation's tools. A wrong or missing token: 401 before the body is read. Without client tools
 * configured the route is 404. GET and DELETE (sessions) have no meaning in stateless mode: 405.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { ClientToolHub, ToolSession } from "../../backends/client-tools/sessions.js";
import { ApiError } from "../chat-api/errors.js";
import { lingerAfterAnswer, UNAUTHENTICATED_LINGER_BYTES } from "./http-front.js";
import { serveStateless, statelessOnly } from "./mcp-route.js";

export const CLIENT_TOOLS_PATH = "/mcp/client-tools";
const BODY_LIMIT = 4 * 1024 * 1024;

/** Whether a request goes to the client-tools endpoint and may send a body. */
export function isClientToolsRoute(method: string | undefined, url: string | undefined): boolean {
  if (method !== "POST" || !url) return false;
  const q = url.indexOf("?");
  return (q < 0 ? url : url.slice(0, q)) === CLIENT_TOOLS_PATH;
}

export function registerClientToolsRoute(app: FastifyInstance, hub: ClientToolHub | undefined): void {
  app.register(async (scope) => {
    if (scope.hasContentTypeParser("application/json")) scope.removeContentTypeParser("application/json");
    scope.addContentTypeParser("application/json", { parseAs: "string", bodyLimit: BODY_LIMIT }, (_req, body, done) => {
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
    });

    const refuse = (req: FastifyRequest, reply: FastifyReply, err: ApiError) => {
      for (const [k, v] of Object.entries({ ...err.headers, connection: "close" })) void reply.header(k, v);
      lingerAfterAnswer(req.raw, UNAUTHENTICATED_LINGER_BYTES);
      return reply.code(err.status).type("application/json").send(err.body());
    };

    scope.addHook("onRequest", async (req, reply) => {
      if (!hub)
        return refuse(
          req,
          reply,
          new ApiError(
            404,
            "not_found_error",
            "client_tools_not_configured",
            "No model on this bridge offers the client's tools (tools.mode: bridge).",
          ),
        );
      const auth = req.headers.authorization ?? "";
      const token = auth.startsWith("Bearer ") ? auth.slice(7).trim() : "";
      const session = hub.byToken(token);
      if (!session) {
        void reply.header("www-authenticate", "Bearer");
        return refuse(
          req,
          reply,
          new ApiError(
            401,
            "authentication_error",
            "invalid_token",
            "This endpoint needs the conversation's own client-tools token.",
          ),
        );
      }
      (req as FastifyRequest & { toolSession?: unknown }).toolSession = session;
    });

    scope.post(CLIENT_TOOLS_PATH, async (req, reply) => {
      const session = (req as FastifyRequest & { toolSession?: ToolSession }).toolSession!;
      const { createClientToolsServer } = await import("../../backends/client-tools/mcp-tools.js");
      await serveStateless(req, reply, createClientToolsServer(session), { json: false });
    });

    scope.get(CLIENT_TOOLS_PATH, statelessOnly);
    scope.delete(CLIENT_TOOLS_PATH, statelessOnly);
  });
}
