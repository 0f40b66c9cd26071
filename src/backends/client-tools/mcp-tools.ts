/**
 * The MCP server a CLI agent sees for the client's tools: the conversation's tools under their own
 * names with their JSON schemas VERBATIM (the low-level `Server`, not `McpServer`, which wants zod
 * shapes), each marked `readOnlyHint` — for the CLI they touch nothing of its own, and the hint is
 * what lets Claude Code issue several calls of one reply together (else it runs them one at a time,
 * one client round-trip each). A `tools/call` waits in the conversation's `ToolSession` until the
 * client answers; while it waits, a progress notification every 30 s (when the CLI asked for
 * progress) keeps the CLI's idle timer from giving up.
 * Loaded on the first request to the endpoint (src/request/http/client-tools-route.ts).
 */
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { CallToolRequestSchema, ListToolsRequestSchema, type CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { VERSION } from "../../core/version.js";
import type { ToolSession } from "./sessions.js";

export function createClientToolsServer(session: ToolSession): Server {
  const server = new Server({ name: "clawbridge-client-tools", version: VERSION }, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, () => ({
    tools: session.tools.map((t) => ({
      name: t.name,
      ...(t.description ? { description: t.description } : {}),
      inputSchema: t.parameters as { type: "object"; [k: string]: unknown },
      annotations: { readOnlyHint: true },
    })),
  }));
  server.setRequestHandler(CallToolRequestSchema, async (req, extra): Promise<CallToolResult> => {
    const token = req.params._meta?.progressToken;
    const progress =
      token !== undefined
        ? (n: number) =>
            void extra
              .sendNotification({
                method: "notifications/progress",
                params: { progressToken: token, progress: n, message: "waiting for the client to run the tool" },
              })
              .catch(() => {})
        : undefined;
    return { ...(await session.call(req.params.name, req.params.arguments ?? {}, extra.signal, progress)) };
  });
  return server;
}
