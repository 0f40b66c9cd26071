/**
 * The `mcp` kind's failures in words: whatever the SDK or a transport threw, turned into an
 * ExecError with its code (cancelled, timeout, spawn_failed, network, http_status, tool_error,
 * bad_reply) and whether it may be retried; a server named without its headers, environment,
 * credentials or query (they may hold secrets), and a stdio server's exit and stderr tail added.
 */
import {
  type StreamableHTTPClientTransport,
  StreamableHTTPError,
} from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js";
import type { McpServer } from "../schema.js";
import { ExecError } from "../step-executor.js";
import type { Deadline } from "./mcp-connect.js";
import { ChildStdioTransport } from "./mcp-stdio.js";

/** How a server is named in messages: no headers, environment, credentials or query (they may hold secrets). */
export function describeServer(server: McpServer): string {
  if (server.transport === "stdio") return `MCP server "${server.command}"`;
  try {
    const u = new URL(server.url);
    return `MCP server ${u.origin}${u.pathname}`;
  } catch {
    return "MCP server (invalid URL)";
  }
}

function stderrNote(t: ChildStdioTransport): string {
  const tail = t.stderr.trim();
  return tail ? `; its stderr ends with: ${tail}` : "";
}

function exitNote(t: ChildStdioTransport): string {
  const e = t.exitStatus;
  if (!e) return "";
  return e.signal ? ` (killed by ${e.signal})` : e.code !== null ? ` (exit code ${e.code})` : "";
}

/** The reply of an HTTP server that refused: http_status (5xx and 429 may be retried). */
function httpStatusError(server: McpServer, err: StreamableHTTPError): ExecError {
  const status = err.code;
  if (status === undefined) return new ExecError("network", `${describeServer(server)}: ${err.message}`, true);
  return new ExecError(
    "http_status",
    `${describeServer(server)} answered HTTP ${status}: ${err.message}`,
    status >= 500 || status === 429,
  );
}

/**
 * Turn whatever the SDK threw into an ExecError. `phase` says whether the connection was up: a
 * stdio server that goes away before answering `initialize` could not be started.
 */
export function classify(
  err: unknown,
  phase: "connect" | "call",
  server: McpServer,
  conn: { transport?: ChildStdioTransport | StreamableHTTPClientTransport },
  deadline: Deadline,
  what: string,
): ExecError {
  if (err instanceof ExecError) return err;
  if (deadline.reason === "cancelled") return new ExecError("cancelled", `${what} was cancelled`);
  if (deadline.reason === "timeout" || (err instanceof McpError && err.code === ErrorCode.RequestTimeout)) {
    return new ExecError("timeout", `${what} did not finish within ${deadline.ms / 1000}s`, true);
  }
  const message = err instanceof Error ? err.message : String(err);
  const t = conn.transport;
  if (t instanceof ChildStdioTransport) {
    if (t.spawnError) {
      return new ExecError(
        "spawn_failed",
        `cannot start ${describeServer(server)}: ${t.spawnError.message}${server.transport === "stdio" && server.cwd ? ` (cwd ${server.cwd})` : ""}`,
      );
    }
    const gone = t.exitStatus !== undefined || (err instanceof McpError && err.code === ErrorCode.ConnectionClosed);
    if (phase === "connect") {
      return new ExecError(
        "spawn_failed",
        `${describeServer(server)} ${gone ? `exited before it answered${exitNote(t)}` : `did not start properly: ${message}`}${stderrNote(t)}`,
      );
    }
    if (gone)
      return new ExecError(
        "tool_error",
        `${describeServer(server)} exited during the call to ${what}${exitNote(t)}${stderrNote(t)}`,
      );
  } else {
    if (err instanceof StreamableHTTPError) return httpStatusError(server, err);
    if (err instanceof McpError && err.code === ErrorCode.ConnectionClosed) {
      return new ExecError(
        "network",
        `${describeServer(server)} closed the connection${phase === "call" ? ` during the call to ${what}` : ""}`,
        true,
      );
    }
    if (!(err instanceof McpError)) {
      const cause = (err as { cause?: { message?: string; code?: string } }).cause;
      const detail = cause?.code ?? cause?.message;
      return new ExecError(
        "network",
        `cannot reach ${describeServer(server)}: ${message}${detail && detail !== message ? ` (${detail})` : ""}`,
        true,
      );
    }
  }
  if (phase === "connect")
    return new ExecError("bad_reply", `${describeServer(server)} failed to initialise: ${message}`);
  return new ExecError(err instanceof McpError ? "tool_error" : "bad_reply", `${what} failed: ${message}`);
}
