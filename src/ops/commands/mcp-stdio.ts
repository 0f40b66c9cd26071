/**
 * `clawbridge mcp`: the builder's canvas and sandbox tools (src/workflows/builder/mcp-server.ts) over stdio,
 * for an MCP host that starts it as a child process (Claude Code, OpenClaw, any MCP client). It
 * opens the bridge's own store — `<dataDir>/systems.db` (both can run at once, every edit is one
 * transaction), and with `store: { kind: postgres }` the canvases in that PostgreSQL — and the
 * sandboxes under `<dataDir>/sandboxes/`. stdout carries JSON-RPC only;
 * messages go to stderr. It ends when stdin closes or on SIGTERM/SIGINT.
 */
import type { Command } from "commander";
import { fail, loadConfig } from "./common.js";

export function registerMcpCommand(program: Command): void {
  program
    .command("mcp")
    .description("serve the builder's canvas and sandbox tools over MCP on stdio (for an MCP host to start)")
    .option("-c, --config <file>", "config file (for the data directory)")
    .action(async (opts: { config?: string }) => {
      try {
        // The server's modules load while the config is read: the host waits for the first answer.
        const modules = Promise.all([
          import("../../workflows/systems/db.js"),
          import("../../workflows/builder/runtime.js"),
          import("../../workflows/builder/mcp-server.js"),
          import("@modelcontextprotocol/sdk/server/stdio.js"),
          import("../../core/db/sql.js"),
          import("../../core/db/backing.js"),
        ]);
        modules.catch(() => {}); // a config error is the one reported
        const config = await loadConfig({ configPath: opts.config });
        const [
          { openSystemsDb, systemsDbPath },
          { openBuilderTools },
          { createBuilderMcpServer },
          { StdioServerTransport },
          { SqliteSql },
          { openBacking, closeBacking },
        ] = await modules;
        const db = openSystemsDb(systemsDbPath(config.dataDir));
        const backing = await openBacking(config);
        const sql = backing.kind === "postgres" ? backing.db : new SqliteSql(db);
        const server = createBuilderMcpServer(openBuilderTools({ sql, db, dataDir: config.dataDir }));
        const transport = new StdioServerTransport();
        let closing = false;
        const close = () => {
          if (closing) return;
          closing = true;
          void server
            .close()
            .catch(() => {})
            .then(() => closeBacking(backing))
            .finally(() => {
              db.close();
              process.exit(0);
            });
        };
        transport.onclose = close;
        process.stdin.once("end", close);
        process.once("SIGTERM", close);
        process.once("SIGINT", close);
        await server.connect(transport);
        process.stderr.write(`clawbridge mcp: serving the builder tools on stdio (data: ${config.dataDir})\n`);
      } catch (err) {
        fail(err);
      }
    });
}
