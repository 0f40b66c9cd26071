/**
 * A stubborn MCP stdio server for the kill9 part (issue 30, item 3): a system whose one step calls
 * its tool `work`, which takes a minute. The server (the SDK's McpServer, as a plain .mjs written
 * into the part's folder, so it starts without tsx) ignores SIGTERM and the end of its stdin, keeps
 * a `sleep` helper in its process group, and ends itself after 90 s whatever happens. It and its
 * helper carry `FAULTS_MARK=<mark>` (the step's `setEnv`), so the harness finds them as it finds the
 * fake CLIs' processes (lib/procs.ts); each call appends the server's pid to a file, so the harness
 * knows the call is running.
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";

export const MCP_SYSTEM = "faults-mcp";

const SDK_MCP = import.meta.resolve("@modelcontextprotocol/sdk/server/mcp.js");
const SDK_STDIO = import.meta.resolve("@modelcontextprotocol/sdk/server/stdio.js");

/** argv: calls file, ms the tool takes. */
const SERVER = `
import { spawn } from "node:child_process";
import { appendFileSync } from "node:fs";
import { McpServer } from ${JSON.stringify(SDK_MCP)};
import { StdioServerTransport } from ${JSON.stringify(SDK_STDIO)};
const [calls, ms] = process.argv.slice(2);
process.on("SIGTERM", () => {}); // stubborn: only SIGKILL ends it
process.stdout.on("error", () => {}); // a dead bridge's pipe does not end it either
spawn("sleep", ["90"], { stdio: "ignore" }); // a helper in its process group
setTimeout(() => process.exit(0), 90_000); // bounded, whatever happens
const server = new McpServer({ name: "faults-stubborn", version: "1.0.0" });
server.registerTool("work", { description: "Works for a minute." }, async () => {
  appendFileSync(calls, process.pid + "\\n");
  await new Promise((r) => setTimeout(r, Number(ms)));
  return { content: [{ type: "text", text: "worked" }] };
});
await server.connect(new StdioServerTransport()); // the end of stdin is ignored
`;

export interface StubbornMcp {
  /** The system to put in the bridge's config. */
  system: Record<string, unknown>;
  /** FAULTS_MARK of the server and its helper. */
  mark: string;
  /** Tool calls made so far (each appends a line). */
  calls(): number;
}

/** Write the server into `dir` and describe the system that calls it; its processes carry `mark`. */
export function stubbornMcp(dir: string, mark: string, toolMs = 60_000): StubbornMcp {
  const script = path.join(dir, "mcp-stubborn.mjs");
  const callsFile = path.join(dir, "mcp-calls");
  writeFileSync(script, SERVER);
  return {
    mark,
    calls: () => (existsSync(callsFile) ? readFileSync(callsFile, "utf8").split("\n").filter(Boolean).length : 0),
    system: {
      id: MCP_SYSTEM,
      description: "one slow call of a stubborn MCP stdio server (fault suite, kill9)",
      sideEffects: true,
      confirm: "never",
      run: {
        kind: "mcp",
        server: {
          transport: "stdio",
          command: process.execPath,
          args: [script, callsFile, String(toolMs)],
          setEnv: { FAULTS_MARK: mark },
        },
        tool: "work",
        timeoutSeconds: 120,
      },
    },
  };
}

/** Start a run of the system over the bridge's HTTP API; the run id, or why not. */
export async function startMcpRun(origin: string): Promise<{ id?: string; error?: string }> {
  try {
    const res = await fetch(`${origin}/v1/systems/${MCP_SYSTEM}/runs`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ inputs: {} }),
      signal: AbortSignal.timeout(10_000),
    });
    const body = (await res.json().catch(() => ({}))) as { id?: string };
    if (res.status >= 300 || !body.id) return { error: `HTTP ${res.status} ${JSON.stringify(body).slice(0, 200)}` };
    return { id: body.id };
  } catch (err) {
    return { error: (err as Error).message };
  }
}
