/**
 * One attempt's connection to an MCP server, over stdio (`ChildStdioTransport`) or Streamable
 * HTTP: its deadline and cancellation as one AbortSignal (`Deadline`), the connect that stops
 * everything it started when it fails, a close that always disconnects (a stdio server reaped, an
 * HTTP session ended with a bounded DELETE), and the server's tools read page by page.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { Tool } from "@modelcontextprotocol/sdk/types.js";
import { onAbort, type Abortable } from "../../../core/util/cancel.js";
import { VERSION } from "../../../core/version.js";
import type { McpServer } from "../schema.js";
import { ExecError } from "../step-executor.js";
import { classify, describeServer } from "./mcp-errors.js";
import { childEnv } from "./command.js";
import { ChildStdioTransport, settles } from "./mcp-stdio.js";
import { renderString, type Scope } from "../../engine/template.js";

/** `tools/list` pages read at most (a server that keeps handing out cursors is cut off). */
const MAX_TOOL_PAGES = 50;
/** Tool names quoted in an "unknown tool" message at most. */
const MAX_NAMES_SHOWN = 30;
/** Bound on the DELETE that ends an HTTP session (normal end / after an abort). */
const HTTP_CLOSE_MS = 1000;
const HTTP_CLOSE_ABORTED_MS = 300;

/**
 * One attempt's deadline and cancellation as a single AbortSignal for the SDK. `reason` says which
 * fired first. A fresh controller per attempt, because the SDK never removes the "abort" listener
 * it adds to a request's signal.
 */
export class Deadline {
  private readonly ctl = new AbortController();
  reason: "timeout" | "cancelled" | undefined;
  private readonly timer: NodeJS.Timeout;
  private readonly off: () => void;
  private readonly end: number;

  constructor(
    readonly ms: number,
    parent?: Abortable,
  ) {
    this.end = Date.now() + ms;
    this.timer = setTimeout(() => this.stop("timeout"), ms);
    this.timer.unref();
    this.off = parent ? onAbort(parent, () => this.stop("cancelled")) : () => {};
  }

  get signal(): AbortSignal {
    return this.ctl.signal;
  }

  /** Time left, for the SDK's own request timer (ours fires first; its timer is only a backstop). */
  remaining(): number {
    return Math.max(1, this.end - Date.now()) + 1000;
  }

  private stop(reason: "timeout" | "cancelled"): void {
    if (this.reason) return;
    this.reason = reason;
    this.ctl.abort(new Error(reason === "timeout" ? `timed out after ${this.ms} ms` : "cancelled"));
  }

  dispose(): void {
    clearTimeout(this.timer);
    this.off();
  }
}

/**
 * The server's settings with their templates filled in: a stdio server's `setEnv`, an HTTP
 * server's `headers` (where `${secrets.NAME}` may appear). Throws `TemplateError`.
 */
export function renderServer(server: McpServer, scope: Scope): McpServer {
  const render = (o: Record<string, string>) =>
    Object.fromEntries(Object.entries(o).map(([k, v]) => [k, renderString(v, scope)]));
  return server.transport === "stdio"
    ? { ...server, setEnv: render(server.setEnv) }
    : { ...server, headers: render(server.headers) };
}

export interface Connection {
  client: Client;
  transport: ChildStdioTransport | StreamableHTTPClientTransport;
  close(): Promise<void>;
}

/** Connect a client to `server`; on any failure everything started is stopped before the ExecError is thrown. */
export async function connect(
  server: McpServer,
  deadline: Deadline,
  what: string,
  onError: (err: Error) => void,
): Promise<Connection> {
  const client = new Client({ name: "clawbridge", version: VERSION }, { capabilities: {} });
  client.onerror = onError;
  let transport: ChildStdioTransport | StreamableHTTPClientTransport;
  if (server.transport === "stdio") {
    transport = new ChildStdioTransport({
      command: server.command,
      args: server.args,
      env: childEnv(server.env, server.setEnv),
      ...(server.cwd ? { cwd: server.cwd } : {}),
    });
  } else {
    let url: URL;
    try {
      url = new URL(server.url);
    } catch {
      throw new ExecError("invalid", `${describeServer(server)}: the URL does not parse`);
    }
    transport = new StreamableHTTPClientTransport(url, { requestInit: { headers: server.headers } });
  }
  const close = async (): Promise<void> => {
    if (transport instanceof ChildStdioTransport) transport.hurry = deadline.reason !== undefined;
    else if (transport.sessionId) {
      // End the session on the server (DELETE), bounded. After a timeout or a cancel this is also
      // what stops the tool's work there: the server aborts a closed session's handlers.
      await settles(transport.terminateSession(), deadline.reason ? HTTP_CLOSE_ABORTED_MS : HTTP_CLOSE_MS);
    }
    try {
      await client.close();
    } catch {
      /* closing is best effort; the stdio transport has reaped its child either way */
    }
    if (transport instanceof ChildStdioTransport) await transport.close();
  };
  try {
    await client.connect(transport, { signal: deadline.signal, timeout: deadline.remaining() });
  } catch (err) {
    await close();
    throw classify(err, "connect", server, { transport }, deadline, what);
  }
  return { client, transport, close };
}

/** Every tool of a connected server (pagination followed, bounded). */
export async function listAllTools(client: Client, deadline: Deadline): Promise<Tool[]> {
  const tools: Tool[] = [];
  const seen = new Set<string>();
  let cursor: string | undefined;
  for (let page = 0; page < MAX_TOOL_PAGES; page++) {
    const res = await client.listTools(cursor ? { cursor } : undefined, {
      signal: deadline.signal,
      timeout: deadline.remaining(),
    });
    tools.push(...res.tools);
    cursor = res.nextCursor;
    if (!cursor || seen.has(cursor)) break;
    seen.add(cursor);
  }
  return tools;
}

export function noSuchTool(tool: string, tools: Tool[]): string {
  const names = tools.map((t) => t.name);
  const shown =
    names.slice(0, MAX_NAMES_SHOWN).join(", ") + (names.length > MAX_NAMES_SHOWN ? `, … (${names.length} in all)` : "");
  return `MCP server has no tool ${tool} (it has: ${shown || "no tools"})`;
}
