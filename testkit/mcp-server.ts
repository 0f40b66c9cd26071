/**
 * A real MCP server (the SDK's McpServer, zod input schemas) for the `mcp` kind's tests, usable
 * two ways:
 *   - as a stdio server: `node --import tsx testkit/mcp-server.ts [--stubborn | --crash]`
 *     (`mcpStdioCommand()` gives the command with absolute paths, so any cwd works);
 *   - in-process over Streamable HTTP: `startMcpHttpServer()` listens on 127.0.0.1 on a free port.
 *
 * Tools: `echo` {text} (readOnlyHint), `add` {a,b} (structuredContent {sum} and text),
 * `delete_item` {id} (destructiveHint), `fail` (isError), `slow` {ms} (waits, honouring the
 * request's cancellation), `env` (which test variables it sees, and every name it sees),
 * `lines` {count} (that many text blocks) and `pixel` (one image block, no text).
 *
 * Stdio modes: when MCP_TESTKIT_PIDFILE is set the server writes `{pid, helper}` there at start, and
 * `<file>.slow` when a `slow` call starts. `--stubborn` ignores SIGTERM and the end of stdin and
 * starts a `sleep` helper in its process group (so only SIGKILL to the group ends it all).
 * `--crash` writes a line to stderr and exits with code 3 before answering anything.
 */
import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { writeFileSync } from "node:fs";
import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";
import { fileURLToPath, pathToFileURL } from "node:url";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { z } from "zod";

/** The variables the `env` tool reports on. */
export const ENV_PROBES = [
  "CLAWBRIDGE_TEST_SECRET",
  "CLAWBRIDGE_TEST_ALLOWED",
  "CLAWBRIDGE_TEST_SET",
  "PATH",
  "HOME",
  "USER",
  "SHELL",
] as const;

/** What a test can see of the server's work (HTTP: in-process, so shared directly). */
export interface McpServerState {
  /** Names of the tools called, in order. */
  calls: string[];
  /** `slow` calls still waiting. */
  activeSlow: number;
  /** `slow` calls that ended because the request was cancelled. */
  abortedSlow: number;
}

/** An McpServer with the test tools; `onSlowStart` is called as a `slow` call begins. */
export function createTestMcpServer(state: McpServerState, onSlowStart?: () => void): McpServer {
  const server = new McpServer({ name: "clawbridge-testkit", version: "1.0.0" });
  server.registerTool(
    "echo",
    { description: "Echo the text back.", inputSchema: { text: z.string() }, annotations: { readOnlyHint: true } },
    async ({ text }) => {
      state.calls.push("echo");
      return { content: [{ type: "text", text: `echo: ${text}` }] };
    },
  );
  server.registerTool(
    "add",
    {
      description: "Add two numbers.",
      inputSchema: { a: z.number(), b: z.number() },
      outputSchema: { sum: z.number() },
      annotations: { readOnlyHint: true },
    },
    async ({ a, b }) => {
      state.calls.push("add");
      return { content: [{ type: "text", text: `${a} + ${b} = ${a + b}` }], structuredContent: { sum: a + b } };
    },
  );
  server.registerTool(
    "delete_item",
    {
      description: "Delete an item.",
      inputSchema: { id: z.string() },
      annotations: { destructiveHint: true, readOnlyHint: false },
    },
    async ({ id }) => {
      state.calls.push("delete_item");
      return { content: [{ type: "text", text: `deleted ${id}` }] };
    },
  );
  server.registerTool("fail", { description: "Always fails." }, async () => {
    state.calls.push("fail");
    return { isError: true, content: [{ type: "text", text: "the tool failed on purpose" }] };
  });
  server.registerTool(
    "slow",
    { description: "Answer after ms milliseconds.", inputSchema: { ms: z.number().int().min(0).max(60_000) } },
    async ({ ms }, extra) => {
      state.calls.push("slow");
      state.activeSlow++;
      onSlowStart?.();
      try {
        await new Promise<void>((resolve, reject) => {
          const timer = setTimeout(resolve, ms);
          const onAbort = () => {
            clearTimeout(timer);
            state.abortedSlow++;
            reject(new Error("cancelled"));
          };
          if (extra.signal.aborted) onAbort();
          else extra.signal.addEventListener("abort", onAbort, { once: true });
        });
      } finally {
        state.activeSlow--;
      }
      return { content: [{ type: "text", text: `waited ${ms} ms` }] };
    },
  );
  server.registerTool("env", { description: "Which of the probe variables this server sees." }, async () => {
    state.calls.push("env");
    const seen = Object.fromEntries(ENV_PROBES.map((n) => [n, process.env[n] ?? null]));
    return { content: [{ type: "text", text: JSON.stringify({ seen, names: Object.keys(process.env).sort() }) }] };
  });
  server.registerTool(
    "lines",
    { description: "count text blocks.", inputSchema: { count: z.number().int().min(0).max(100) } },
    async ({ count }) => {
      state.calls.push("lines");
      return { content: Array.from({ length: count }, (_, i) => ({ type: "text" as const, text: `line ${i + 1}` })) };
    },
  );
  server.registerTool("pixel", { description: "One 1x1 PNG, no text." }, async () => {
    state.calls.push("pixel");
    const png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=";
    return { content: [{ type: "image", data: png, mimeType: "image/png" }] };
  });
  return server;
}

/** This file, and the tsx loader as a URL (so the server starts whatever the cwd). */
export const MCP_SERVER_SCRIPT = fileURLToPath(import.meta.url);
export const TSX_LOADER = import.meta.resolve("tsx");

/** The stdio server as `{command, args}` for an McpServer config. */
export function mcpStdioCommand(...flags: Array<"--stubborn" | "--crash">): { command: string; args: string[] } {
  return { command: process.execPath, args: ["--import", TSX_LOADER, MCP_SERVER_SCRIPT, ...flags] };
}

export interface McpHttpServer {
  /** The endpoint, `http://127.0.0.1:<port>/mcp`. */
  url: string;
  state: McpServerState;
  /** Headers of every request received (lower-case names). */
  requests: Array<IncomingMessage["headers"]>;
  /** Sessions currently open. */
  sessions(): number;
  close(): Promise<void>;
}

/** The test server over Streamable HTTP (one McpServer per session), on 127.0.0.1 and a free port. */
export async function startMcpHttpServer(): Promise<McpHttpServer> {
  const state: McpServerState = { calls: [], activeSlow: 0, abortedSlow: 0 };
  const requests: Array<IncomingMessage["headers"]> = [];
  const sessions = new Map<string, { transport: StreamableHTTPServerTransport; server: McpServer }>();
  const http = createServer((req, res) => {
    void (async () => {
      if (new URL(req.url ?? "/", "http://127.0.0.1").pathname !== "/mcp") {
        res.writeHead(404).end();
        return;
      }
      if (requests.length < 10_000) requests.push(req.headers);
      const sid = req.headers["mcp-session-id"];
      const known = typeof sid === "string" ? sessions.get(sid) : undefined;
      if (known) {
        await known.transport.handleRequest(req, res);
        return;
      }
      if (sid !== undefined) {
        res
          .writeHead(404, { "content-type": "application/json" })
          .end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32001, message: "Session not found" }, id: null }));
        return;
      }
      // No session yet: only an initialize request starts one (the transport rejects anything else).
      const server = createTestMcpServer(state);
      const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => void sessions.set(id, { transport, server }),
        onsessionclosed: (id) => void sessions.delete(id),
      });
      await server.connect(transport);
      await transport.handleRequest(req, res);
      if (!transport.sessionId) await server.close();
    })().catch(() => {
      if (!res.headersSent) res.writeHead(500);
      res.end();
    });
  });
  await new Promise<void>((resolve, reject) => {
    http.once("error", reject);
    http.listen(0, "127.0.0.1", () => resolve());
  });
  const { port } = http.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    state,
    requests,
    sessions: () => sessions.size,
    async close() {
      for (const { server } of sessions.values()) await server.close().catch(() => {});
      sessions.clear();
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
}

/** Run as a stdio server. */
async function main(argv: string[]): Promise<void> {
  if (argv.includes("--crash")) {
    process.stderr.write("mcp-server: missing configuration, giving up\n");
    process.exit(3);
  }
  const stubborn = argv.includes("--stubborn");
  const pidFile = process.env.MCP_TESTKIT_PIDFILE;
  const state: McpServerState = { calls: [], activeSlow: 0, abortedSlow: 0 };
  let helper: number | undefined;
  if (stubborn) {
    process.on("SIGTERM", () => process.stderr.write("mcp-server: ignoring SIGTERM\n"));
    // A helper in our process group that only the group's SIGKILL ends; stdio ignored so it holds no pipe.
    helper = spawn("sleep", ["30"], { stdio: "ignore" }).pid;
    // Keep running without stdin for at most a minute.
    setTimeout(() => process.exit(0), 60_000);
  }
  const server = createTestMcpServer(state, () => {
    if (pidFile) writeFileSync(`${pidFile}.slow`, String(Date.now()));
  });
  await server.connect(new StdioServerTransport());
  if (!stubborn) process.stdin.once("end", () => process.exit(0));
  if (pidFile) writeFileSync(pidFile, JSON.stringify({ pid: process.pid, helper }));
  process.stderr.write("mcp-server: ready\n");
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  await main(process.argv.slice(2));
}
