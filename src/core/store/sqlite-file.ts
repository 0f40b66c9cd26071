/**
 * Opening one of the bridge's small SQLite files (the usage ledger, the Responses store): the
 * directory made 0700 and the file 0600 before SQLite creates it (it may hold conversations), WAL on
 * disk, the pragmas every one of them uses, and a schema newer than this build refused with a
 * message that says so. `:memory:` keeps nothing on disk. The caller migrates `version` up to its own
 * `schemaVersion` and closes `db` if that fails; `openSqliteSql` does that for a file whose schema
 * is one piece of SQL, and gives the file as the async `Sql` engine its store is written against
 * (the same store runs on the shared PostgreSQL, whose schema src/core/db/pg-migrations.ts makes).
 */
import { closeSync, mkdirSync, openSync } from "node:fs";
import path from "node:path";
import Database from "better-sqlite3";
import { SqliteSql } from "../db/sql.js";

export interface OpenedSqlite {
  db: Database.Database;
  /** The file's absolute path, or `:memory:`. */
  target: string;
  /** The file's `user_version` as found (0: new). */
  version: number;
}

export function openSqliteFile(file: string, what: string, schemaVersion: number): OpenedSqlite {
  const memory = file === ":memory:";
  const target = memory ? file : path.resolve(file);
  if (!memory) {
    mkdirSync(path.dirname(target), { recursive: true, mode: 0o700 });
    closeSync(openSync(target, "a", 0o600));
  }
  const db = new Database(target, { timeout: 5000 });
  try {
    db.pragma("busy_timeout = 5000");
    if (!memory) db.pragma("journal_mode = WAL");
    db.pragma("synchronous = NORMAL");
    db.pragma("trusted_schema = OFF");
    const version = Number(db.pragma("user_version", { simple: true }));
    if (version > schemaVersion)
      throw new Error(
        `${target} has ${what} schema version ${version}, newer than this clawbridge understands (${schemaVersion})`,
      );
    return { db, target, version };
  } catch (err) {
    db.close();
    throw err;
  }
}

/** The file opened, `schema` applied when it is older than `schemaVersion`, as an `Sql` engine (the caller closes `db`). */
export function openSqliteSql(
  file: string,
  what: string,
  schemaVersion: number,
  schema: string,
): OpenedSqlite & { sql: SqliteSql } {
  const opened = openSqliteFile(file, what, schemaVersion);
  const { db } = opened;
  try {
    if (opened.version < schemaVersion) {
      db.transaction(() => {
        db.exec(schema);
        db.pragma(`user_version = ${schemaVersion}`);
      }).immediate();
    }
  } catch (err) {
    db.close();
    throw err;
  }
  return { ...opened, sql: new SqliteSql(db) };
}
