/**
 * Moving a bridge from its SQLite files to PostgreSQL without losing anything it made:
 * `clawbridge store import` copies every table of the data dir's SQLite files (sessions.db,
 * systems.db, usage.db, responses.db) into the configured PostgreSQL, table by table and column by
 * column (the PostgreSQL schema mirrors the SQLite one: the columns both have are copied), in one
 * transaction, with `ON CONFLICT DO NOTHING`: a row already there is kept, so a second import adds
 * only what is new, and an import never overwrites what other instances wrote. Identity columns'
 * sequences are moved past the copied ids.
 *
 * Tables only SQLite has (its bookkeeping: `meta`, a moved-away legacy table) are listed as skipped,
 * with the reason. The SQLite files are read only, never changed.
 */
import { existsSync } from "node:fs";
import path from "node:path";
import Database from "better-sqlite3";
import type { PostgresDb } from "./postgres.js";
import type { SqlQueries } from "./sql.js";

/** The SQLite files of a data dir, and tables whose PostgreSQL name differs. */
export const SQLITE_FILES: ReadonlyArray<{ file: string; rename?: Record<string, string> }> = [
  { file: "sessions.db", rename: { events: "session_events" } },
  { file: "systems.db" },
  { file: "usage.db" },
  { file: "responses.db" },
];

export interface TableImport {
  file: string;
  table: string;
  /** The PostgreSQL table it went to (undefined when skipped). */
  into?: string;
  rows: number;
  /** Rows new to PostgreSQL (the others were there already). */
  inserted: number;
  skipped?: string;
}

const BATCH = 200;

async function pgColumns(q: SqlQueries, table: string): Promise<Map<string, { serial: boolean }>> {
  const rows = await q.all<{ column_name: string; column_default: string | null }>(
    `SELECT column_name, column_default FROM information_schema.columns
      WHERE table_schema = current_schema() AND table_name = ?`,
    [table],
  );
  return new Map(rows.map((r) => [r.column_name, { serial: /^nextval\(/.test(r.column_default ?? "") }]));
}

const quote = (name: string) => `"${name.replace(/"/g, '""')}"`;

/** Copies `dataDir`'s SQLite tables into `db` (see the header). `dryRun`: counts only, writes nothing. */
export async function importSqliteDataDir(
  dataDir: string,
  db: PostgresDb,
  opts: { dryRun?: boolean } = {},
): Promise<TableImport[]> {
  const out: TableImport[] = [];
  const work = async (q: SqlQueries) => {
    for (const { file, rename } of SQLITE_FILES) {
      const full = path.join(dataDir, file);
      if (!existsSync(full)) continue;
      const lite = new Database(full, { readonly: true, fileMustExist: true });
      try {
        const tables = (
          lite
            .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY rowid")
            .all() as Array<{ name: string }>
        ).map((t) => t.name);
        for (const table of tables) {
          const into = rename?.[table] ?? table;
          const rows = (lite.prepare(`SELECT COUNT(*) AS n FROM ${quote(table)}`).get() as { n: number }).n;
          const target = await pgColumns(q, into);
          if (!target.size) {
            out.push({
              file,
              table,
              rows,
              inserted: 0,
              skipped: "SQLite's own bookkeeping (no such table in PostgreSQL)",
            });
            continue;
          }
          const liteCols = (lite.prepare(`PRAGMA table_info(${quote(table)})`).all() as Array<{ name: string }>).map(
            (c) => c.name,
          );
          const cols = liteCols.filter((c) => target.has(c));
          const missing = liteCols.filter((c) => !target.has(c));
          if (!cols.length) {
            out.push({ file, table, into, rows, inserted: 0, skipped: "no column in common" });
            continue;
          }
          let inserted = 0;
          if (!opts.dryRun) {
            const select = lite.prepare(`SELECT ${cols.map(quote).join(", ")} FROM ${quote(table)}`).raw(true);
            let batch: unknown[][] = [];
            const flush = async () => {
              if (!batch.length) return;
              const values = batch.map(() => `(${cols.map(() => "?").join(", ")})`).join(", ");
              const r = await q.run(
                `INSERT INTO ${quote(into)} (${cols.map(quote).join(", ")}) VALUES ${values} ON CONFLICT DO NOTHING`,
                batch.flat(),
              );
              inserted += r.changes;
              batch = [];
            };
            for (const row of select.iterate() as IterableIterator<unknown[]>) {
              batch.push(row.map((v) => (typeof v === "bigint" ? Number(v) : v)));
              if (batch.length >= BATCH) await flush();
            }
            await flush();
            for (const [col, info] of target)
              if (info.serial && cols.includes(col))
                await q.run(
                  `SELECT setval(pg_get_serial_sequence(?, ?), GREATEST((SELECT COALESCE(MAX(${quote(col)}), 0) FROM ${quote(into)}), 1))`,
                  [into, col],
                );
          }
          out.push({
            file,
            table,
            into,
            rows,
            inserted,
            ...(missing.length ? { skipped: `columns not in PostgreSQL: ${missing.join(", ")}` } : {}),
          });
        }
      } finally {
        lite.close();
      }
    }
  };
  if (opts.dryRun) await work(db);
  else await db.tx(work);
  return out;
}
