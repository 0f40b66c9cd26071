/**
 * The client's own tools inside a CLI agent: the small named types shared by the pipeline (which
 * reads them from the request), the backends (which hand them to the CLI as an MCP server) and the
 * MCP endpoint (which the CLI calls).
 */
import type { BackendEvent, ClientToolDef, ClientToolResult } from "../contract/backend.js";

export type { ClientToolDef, ClientToolResult, ClientToolsTurn } from "../contract/backend.js";
import type { ChatMessage, ChatRequest } from "../../request/chat-api/schema.js";
import { contentText } from "../../request/chat-api/schema.js";
import { createHash } from "node:crypto";
import { alnumId } from "../../core/util/ids.js";

/** The MCP server name the CLIs know the client's tools under (`mcp__openclaw__<tool>`). */
export const CLIENT_TOOLS_SERVER = "openclaw";

/** Claude Code's and Qwen Code's name for one of our tools (`mcp__<server>__<tool>`; Gemini CLI: `mcp_<server>_<tool>`, Codex: `<tool>` in namespace `mcp__<server>`). */
export const cliToolPrefix = `mcp__${CLIENT_TOOLS_SERVER}__`;

/** A CLI turn suspended on a client tool call, waiting for the client's next request. */
export interface SuspendedTurn {
  /** Go on with the CLI's turn: its events into the new response (may suspend again). */
  resume(signal: AbortSignal): AsyncGenerator<BackendEvent>;
  /** End the CLI's turn (interrupt) and hand its process back. */
  abandon(): Promise<void>;
  /** Its CLI keeps no result for a call its turn was interrupted on: answer the calls before ending it. */
  readonly answerFirst?: boolean;
}

/** Tool-call ids the bridge makes for client tool calls: letters and digits, recognisable as ours. */
const BRIDGE_CALL = /^callcb[A-Za-z0-9]{22}$/;
export const newBridgeCallId = (): string => alnumId("callcb", 22);
export const isBridgeCallId = (id: string): boolean => BRIDGE_CALL.test(id);

/** The request's tools in `bridge` mode, less the excluded ones. */
export function offeredTools(request: ChatRequest, exclude: readonly string[]): ClientToolDef[] {
  const out: ClientToolDef[] = [];
  const skip = new Set(exclude);
  for (const t of request.tools ?? []) {
    const fn = t.function;
    if (!fn || (t.type && t.type !== "function") || skip.has(fn.name)) continue;
    const p = fn.parameters;
    const parameters =
      p && typeof p === "object" && !Array.isArray(p)
        ? { type: "object", ...(p as Record<string, unknown>) }
        : { type: "object", properties: {} };
    out.push({ name: fn.name, ...(fn.description ? { description: fn.description } : {}), parameters });
  }
  return out;
}

/**
 * The tool messages after the last assistant message that asked for tools (none when a person spoke
 * last). `ignore`: messages that are not the person's words and may follow the results (OpenClaw
 * 2026.9 appends an internal-context user message after them).
 */
export function trailingToolResults(
  messages: readonly ChatMessage[],
  ignore?: (m: ChatMessage) => boolean,
): ClientToolResult[] {
  const out: ClientToolResult[] = [];
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i]!;
    if (m.role === "system" || m.role === "developer" || ignore?.(m)) continue;
    if (m.role === "tool") {
      out.unshift({ id: m.tool_call_id ?? "", ...(m.name ? { name: m.name } : {}), text: contentText(m.content) });
      continue;
    }
    if (m.role === "assistant" && m.tool_calls?.length) {
      // Names come from the call when the tool message has none.
      for (const r of out) r.name ??= m.tool_calls.find((c) => c.id === r.id)?.function.name;
      return out;
    }
    return out;
  }
  return out;
}

/** A fingerprint of the tools on offer: a CLI process is started with one set (it lists them once). */
export function toolsFingerprint(tools: readonly ClientToolDef[] | undefined): string {
  return tools?.length ? createHash("sha256").update(JSON.stringify(tools)).digest("hex").slice(0, 24) : "";
}

/**
 * The MCP server entry a CLI is given for the conversation's tools: the bridge's endpoint with the
 * conversation's token. `timeoutMs`: how long the CLI itself lets a call run (past the bridge's own
 * pending timeout, so the bridge is the one that ends a call).
 */
export function mcpServerEntry(
  endpoint: string,
  token: string,
  timeoutMs: number,
): { url: string; headers: Record<string, string>; timeout: number } {
  return { url: endpoint, headers: { Authorization: `Bearer ${token}` }, timeout: timeoutMs };
}

/** The CLI's own limit for a client tool call: the bridge's pending timeout plus a minute. */
export const cliCallTimeoutMs = (pendingTimeoutSeconds: number): number =>
  Math.round((pendingTimeoutSeconds + 60) * 1000);
