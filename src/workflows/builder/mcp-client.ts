/**
 * The Builder's hands: an MCP client to the canvas and sandbox tools. The Builder never calls the
 * tool functions directly; it speaks MCP, either in process (the SDK's linked in-memory transport
 * to a server built from the same tools) or over Streamable HTTP to any server that has them (this
 * bridge's `/mcp`, or another bridge's). So whatever the Builder can do, any MCP host can do.
 * A tool call's outcome is a value: a result, or an error that says whether another attempt may
 * pass (a transport failure, a 5xx, a busy store) or not (a refused path, an unknown node).
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { VERSION } from "../../core/version.js";

export type ToolOutcome =
  | { ok: true; result: Record<string, unknown> }
  | { ok: false; error: string; retryable: boolean };

export interface ToolCaller {
  call(name: string, args: Record<string, unknown>): Promise<ToolOutcome>;
  close(): Promise<void>;
}

export interface McpEndpoint {
  url: string;
  headers?: Record<string, string>;
}

const CALL_TIMEOUT_MS = 30_000;

/** Connect over a transport (the caller made it); `timeoutMs` bounds each call. */
export async function connectTools(transport: Transport, timeoutMs = CALL_TIMEOUT_MS): Promise<ToolCaller> {
  const client = new Client({ name: "clawbridge-builder", version: VERSION });
  await client.connect(transport, { timeout: timeoutMs });
  return {
    async call(name, args) {
      try {
        const res = (await client.callTool({ name, arguments: args }, undefined, { timeout: timeoutMs })) as {
          isError?: boolean;
          content?: Array<{ type: string; text?: string }>;
          structuredContent?: Record<string, unknown>;
          _meta?: Record<string, unknown>;
        };
        const text = (res.content ?? []).map((c) => (c.type === "text" ? (c.text ?? "") : "")).join("\n");
        if (res.isError)
          return {
            ok: false,
            error: text || `${name} failed`,
            retryable: res._meta?.["clawbridge/retryable"] === true,
          };
        if (res.structuredContent) return { ok: true, result: res.structuredContent };
        try {
          return { ok: true, result: JSON.parse(text) as Record<string, unknown> };
        } catch {
          return { ok: true, result: { text } };
        }
      } catch (err) {
        return { ok: false, error: `${name}: ${(err as Error).message}`, retryable: isTransient(err) };
      }
    },
    close: () => client.close(),
  };
}

/**
 * A thrown error is the transport's (the tool never answered): worth another attempt, unless the
 * server said the request itself is wrong (JSON-RPC invalid params / unknown method) or refused
 * the key (401/403).
 */
function isTransient(err: unknown): boolean {
  return ![-32602, -32601, -32600, 400, 401, 403, 404].includes((err as { code?: unknown }).code as number);
}

/** Over Streamable HTTP. */
export async function connectHttpTools(endpoint: McpEndpoint, timeoutMs = CALL_TIMEOUT_MS): Promise<ToolCaller> {
  const { StreamableHTTPClientTransport } = await import("@modelcontextprotocol/sdk/client/streamableHttp.js");
  const transport = new StreamableHTTPClientTransport(new URL(endpoint.url), {
    requestInit: { headers: endpoint.headers ?? {} },
  });
  return connectTools(transport, timeoutMs);
}
