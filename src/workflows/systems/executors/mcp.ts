/**
 * The `mcp` kind: call one tool of an MCP server, over stdio (a child process the bridge starts
 * for the call) or Streamable HTTP. Each attempt connects, calls, and always disconnects: a stdio
 * server is stopped (stdin closed, then SIGTERM and SIGKILL to its process group) and reaped before
 * the attempt ends, whatever happened. A stdio server runs under the CLIs' process manager
 * (`CliProcess`: recorded for the orphan watcher and the start-up reaper), so a killed bridge leaves
 * none behind. A call is written down before it is sent and struck off once it has ended
 * (mcp-journal.ts): a step whose call was cut off by a bridge that died is not called again on its
 * own when the run is resumed, it fails saying so; resuming once more calls it.
 *
 * A stdio server sees only PATH and HOME of the bridge's environment, the names its `env` lists
 * (when set) and its `setEnv`. The SDK's own StdioClientTransport always adds HOME, LOGNAME, PATH,
 * SHELL, TERM and USER and does not start the server in its own process group, so the child is
 * started here (`ChildStdioTransport`) with the SDK's framing (`ReadBuffer`, `serializeMessage`).
 *
 * The tool's arguments are `arguments` rendered with `renderValue` (a string that is exactly one
 * reference keeps its type), or the run's inputs as they are. Text content is streamed to the run's
 * output as it arrives; the step's output is the tool's `structuredContent` when it gives one, else
 * its text. `describeMcpTool` is the start-up look-up for `inputs: fromTool` and `sideEffects`.
 *
 * Here: the executor and the start-up look-up. The connection and its deadline are in
 * mcp-connect.ts, the stdio transport in mcp-stdio.ts, the error messages in mcp-errors.ts, the
 * call journal in mcp-journal.ts.
 */
import type { CallToolResult, Tool } from "@modelcontextprotocol/sdk/types.js";
import { McpError } from "@modelcontextprotocol/sdk/types.js";
import { childLogger } from "../../../core/log/logger.js";
import type { McpRun, McpServer } from "../schema.js";
import { ExecError, type ExecContext, type Executor, type WouldSend } from "../step-executor.js";
import { renderValue, type Scope } from "../../engine/template.js";
import { type Connection, connect, Deadline, listAllTools, noSuchTool, renderServer } from "./mcp-connect.js";
import { classify, describeServer } from "./mcp-errors.js";
import { CallJournal } from "./mcp-journal.js";
import { ChildStdioTransport } from "./mcp-stdio.js";

export interface McpToolInfo {
  inputSchema: Record<string, unknown>;
  description?: string;
  /** The tool's `destructiveHint` annotation, when it gives one. */
  destructive?: boolean;
  /** The tool's `readOnlyHint` annotation, when it gives one. */
  readOnly?: boolean;
}

/** The text blocks of a result, and its other blocks. */
function split(result: CallToolResult): { texts: string[]; other: unknown[] } {
  const texts: string[] = [];
  const other: unknown[] = [];
  for (const block of result.content ?? []) {
    if (block.type === "text") texts.push(block.text);
    else other.push(block);
  }
  return { texts, other };
}

/** The tool's arguments and the server's settings, rendered (template problems are configuration errors). */
function render(spec: McpRun, scope: Scope): { server: McpServer; args: unknown } {
  try {
    return {
      server: renderServer(spec.server, scope),
      args: spec.arguments !== undefined ? renderValue(spec.arguments, scope) : scope.inputs,
    };
  } catch (err) {
    throw new ExecError("invalid", (err as Error).message);
  }
}

/**
 * A test run's record of the call, or undefined when the tool is harmless (it says it is read-only
 * or not destructive: then the test runs it). The server is asked for its tools with the real
 * secrets (`ctx.listingSecret`); one that cannot be asked counts as destructive.
 */
export async function mcpWouldSend(spec: McpRun, ctx: ExecContext): Promise<WouldSend | undefined> {
  const { args } = render(spec, ctx.scope);
  try {
    const server = renderServer(spec.server, { ...ctx.scope, secret: ctx.listingSecret });
    const info = await describeMcpTool(server, spec.tool, {
      timeoutMs: spec.timeoutSeconds * 1000,
      signal: ctx.cancel.signal,
    });
    if (info.readOnly || info.destructive === false) return undefined;
  } catch (err) {
    ctx.log.debug({ tool: spec.tool, err: (err as Error).message }, "test run: the MCP tool could not be looked up");
  }
  return { notSent: "mcp", server: describeServer(spec.server), tool: spec.tool, arguments: args };
}

export const runMcp: Executor<McpRun> = async (spec, ctx) => {
  const what = `MCP tool ${spec.tool}`;
  if (ctx.cancel.aborted) throw new ExecError("cancelled", `${what} was cancelled`);
  const { server, args } = render(spec, ctx.scope);
  // A call of this step that a stopped bridge never saw end is not made a second time on its own.
  const journal = CallJournal.of(ctx);
  journal?.refuseIfInterrupted(what);
  const deadline = new Deadline(spec.timeoutSeconds * 1000, ctx.cancel);
  const log = childLogger(ctx.log, { mcp: spec.server.transport, tool: spec.tool });
  let conn: Connection | undefined;
  try {
    conn = await connect(server, deadline, what, (err) => log.debug({ err: err.message }, "mcp transport error"));
    if (conn.transport instanceof ChildStdioTransport) log.debug({ pid: conn.transport.pid }, "mcp server started");
    const client = conn.client;
    // A failed call may mean the tool does not exist (servers answer that either as a protocol
    // error or as an isError result): then say so, with the tools it has.
    const unknownTool = async (): Promise<ExecError | undefined> => {
      if (deadline.reason) return undefined;
      try {
        const tools = await listAllTools(client, deadline);
        return tools.some((t) => t.name === spec.tool)
          ? undefined
          : new ExecError("tool_error", noSuchTool(spec.tool, tools));
      } catch {
        return undefined; // keep the original error
      }
    };
    let result: CallToolResult;
    if (
      journal &&
      !journal.sent({
        tool: spec.tool,
        server: describeServer(spec.server),
        ...(conn.transport instanceof ChildStdioTransport ? { identity: conn.transport.identity } : {}),
      })
    )
      log.warn({ file: journal.file }, "could not write down the MCP call; a resume after a crash may call it again");
    try {
      result = (await client.callTool({ name: spec.tool, arguments: args as Record<string, unknown> }, undefined, {
        signal: deadline.signal,
        timeout: deadline.remaining(),
      })) as CallToolResult;
    } catch (err) {
      const e = classify(err, "call", server, conn, deadline, what);
      throw (e.code === "tool_error" && err instanceof McpError && (await unknownTool())) || e;
    }
    const { texts, other } = split(result);
    const text = texts.join("\n");
    if (result.isError) {
      throw (
        (await unknownTool()) ??
        new ExecError("tool_error", text || (other.length ? JSON.stringify(other) : `${what} reported an error`))
      );
    }
    texts.forEach((t, i) => ctx.output(i === 0 ? t : "\n" + t));
    if (result.structuredContent !== undefined) return { output: result.structuredContent };
    if (texts.length === 0 && other.length > 0) return { output: other };
    return { output: text };
  } finally {
    deadline.dispose();
    if (conn) {
      await conn.close();
      if (conn.transport instanceof ChildStdioTransport)
        log.debug({ pid: conn.transport.pid, exit: conn.transport.exitStatus }, "mcp server stopped");
    }
    // The call has ended and its server is reaped (or no call was sent).
    journal?.ended();
  }
};

/**
 * A tool's input schema and annotations, read from the server (`tools/list`, pagination followed).
 * Throws an Error naming the server's tools when it has no such tool, and an ExecError when the
 * server cannot be reached or does not answer within `timeoutMs`.
 */
export async function describeMcpTool(
  server: McpServer,
  tool: string,
  opts: { timeoutMs: number; signal?: AbortSignal },
): Promise<McpToolInfo> {
  const what = `listing the tools of ${describeServer(server)}`;
  const deadline = new Deadline(opts.timeoutMs, opts.signal);
  let conn: Connection | undefined;
  try {
    if (opts.signal?.aborted) throw new ExecError("cancelled", `${what} was cancelled`);
    conn = await connect(server, deadline, what, () => {});
    let tools: Tool[];
    try {
      tools = await listAllTools(conn.client, deadline);
    } catch (err) {
      throw classify(err, "call", server, conn, deadline, what);
    }
    const found = tools.find((t) => t.name === tool);
    if (!found) throw new Error(noSuchTool(tool, tools));
    const info: McpToolInfo = { inputSchema: found.inputSchema as Record<string, unknown> };
    if (found.description !== undefined) info.description = found.description;
    if (typeof found.annotations?.destructiveHint === "boolean") info.destructive = found.annotations.destructiveHint;
    if (typeof found.annotations?.readOnlyHint === "boolean") info.readOnly = found.annotations.readOnlyHint;
    return info;
  } finally {
    deadline.dispose();
    await conn?.close();
  }
}
