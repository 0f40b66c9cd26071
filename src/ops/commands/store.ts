/**
 * `clawbridge store import [--data-dir DIR] [--dry-run] [--json] [-c FILE]`: copies a bridge's SQLite
 * files (sessions, runs, versions, canvases, usage, responses…) into the PostgreSQL of its config
 * (`store: { kind: postgres }`), so moving to several bridges loses nothing (src/core/db/sqlite-import.ts:
 * one transaction, rows already there kept). The database is migrated first, as `serve` would.
 * Registered on the main program by src/ops/commands/main.ts. Exit codes: 0 copied; 1 the database
 * refused; 2 the config's store is not PostgreSQL.
 */
import type { Command } from "commander";
import { fail, loadConfig, out } from "./common.js";

interface StoreImportOptions {
  config?: string;
  dataDir?: string;
  dryRun?: boolean;
  json?: boolean;
}

export function registerStoreCommands(program: Command): void {
  const store = program
    .command("store")
    .description("the store: SQLite files, or one PostgreSQL shared by several bridges");
  store
    .command("import")
    .description("copy the data dir's SQLite files into the config's PostgreSQL (rows already there are kept)")
    .option("-c, --config <file>", "bridge config (default: $CLAWBRIDGE_CONFIG, else embedded defaults)")
    .option("--data-dir <dir>", "the data dir whose SQLite files are copied (default: the config's dataDir)")
    .option("--dry-run", "count the rows only; write nothing")
    .option("--json", "print JSON")
    .action(async (opts: StoreImportOptions) => {
      try {
        const config = await loadConfig({ configPath: opts.config });
        if (config.store.kind !== "postgres") {
          process.stderr.write(
            "clawbridge store import: the config's store is SQLite; set store: { kind: postgres, url } (or CLAWBRIDGE_STORE_URL) first\n",
          );
          process.exitCode = 2;
          return;
        }
        const path = await import("node:path");
        const [{ PostgresDb, redactUrl }, { importSqliteDataDir }] = await Promise.all([
          import("../../core/db/postgres.js"),
          import("../../core/db/sqlite-import.js"),
        ]);
        const dataDir = path.resolve(opts.dataDir ?? config.dataDir);
        const db = await PostgresDb.open({ url: config.store.url!, poolSize: 2 });
        try {
          const tables = await importSqliteDataDir(dataDir, db, { dryRun: opts.dryRun });
          if (opts.json) {
            out(
              JSON.stringify({ dataDir, into: redactUrl(config.store.url!), dryRun: !!opts.dryRun, tables }, null, 2),
            );
            return;
          }
          if (!tables.length) out(`no SQLite files in ${dataDir}`);
          for (const t of tables)
            out(
              `${t.file} ${t.table}${t.into && t.into !== t.table ? ` -> ${t.into}` : ""}: ${t.rows} row${t.rows === 1 ? "" : "s"}${opts.dryRun || !t.into ? "" : `, ${t.inserted} new`}${t.skipped ? ` (${t.skipped})` : ""}`,
            );
          out(`${opts.dryRun ? "would copy into" : "copied into"} ${redactUrl(config.store.url!)}`);
        } finally {
          await db.close();
        }
      } catch (e) {
        fail(e);
      }
    });
}
