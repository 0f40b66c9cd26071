/**
 * One small async SQL interface that every durable store of the bridge is written against, with two
 * engines: SQLite (better-sqlite3, the embedded default: one person, one machine, nothing to set up)
 * and PostgreSQL (`pg`, src/core/db/postgres.ts: several bridges on one database). A store writes
 * its SQL once: `?` placeholders (the PostgreSQL engine numbers them `$1…`), `ON CONFLICT … DO
 * UPDATE` / `DO NOTHING` upserts, integers for times (epoch ms; BIGINT in PostgreSQL, read back as
 * numbers), TEXT for JSON. Where the two really differ a store asks `sql.dialect`.
 *
 * Transactions: `tx(fn)` runs `fn` on one connection inside BEGIN … COMMIT (ROLLBACK when it
 * throws). SQLite has one connection per file, so while a transaction is open every other call of
 * that engine waits for it (in order); PostgreSQL takes a client of the pool for it.
 */
import type Database from "better-sqlite3";

export type SqlDialect = "sqlite" | "postgres";

/** What a statement changed. */
export interface SqlRun {
  changes: number;
}

/** Queries on one connection (an engine, or a transaction of it). */
export interface SqlQueries {
  readonly dialect: SqlDialect;
  all<T = Record<string, unknown>>(sql: string, params?: readonly unknown[]): Promise<T[]>;
  get<T = Record<string, unknown>>(sql: string, params?: readonly unknown[]): Promise<T | undefined>;
  run(sql: string, params?: readonly unknown[]): Promise<SqlRun>;
}

export interface Sql extends SqlQueries {
  /** `fn` inside one transaction; its result, or its error after a rollback. */
  tx<T>(fn: (q: SqlQueries) => Promise<T>): Promise<T>;
}

/** `?` → `$1, $2, …` (the store's SQL never has a `?` inside a string literal). */
export function numberPlaceholders(sql: string): string {
  let n = 0;
  return sql.replace(/\?/g, () => `$${++n}`);
}

/** SQLite takes no booleans: true/false → 1/0; undefined → null. */
function sqliteParams(params: readonly unknown[] | undefined): unknown[] {
  if (!params) return [];
  return params.map((p) => (p === undefined ? null : typeof p === "boolean" ? (p ? 1 : 0) : p));
}

/**
 * The SQLite engine over one better-sqlite3 connection (the caller opened it with its pragmas and
 * schema, and closes it). Statements are prepared once and cached.
 */
export class SqliteSql implements Sql {
  readonly dialect = "sqlite" as const;
  private readonly cache = new Map<string, Database.Statement>();

  constructor(readonly db: Database.Database) {}

  private stmt(sql: string): Database.Statement {
    let s = this.cache.get(sql);
    if (!s) {
      s = this.db.prepare(sql);
      if (this.cache.size > 500) this.cache.clear();
      this.cache.set(sql, s);
    }
    return s;
  }

  private direct: SqlQueries = {
    dialect: "sqlite",
    all: async <T>(sql: string, params?: readonly unknown[]) => this.allNow<T>(sql, params),
    get: async <T>(sql: string, params?: readonly unknown[]) => this.getNow<T>(sql, params),
    run: async (sql: string, params?: readonly unknown[]) => this.runNow(sql, params),
  };

  allNow<T>(sql: string, params?: readonly unknown[]): T[] {
    const s = this.stmt(sql);
    return (s.reader ? s.all(...sqliteParams(params)) : (s.run(...sqliteParams(params)), [])) as T[];
  }
  getNow<T>(sql: string, params?: readonly unknown[]): T | undefined {
    return this.stmt(sql).get(...sqliteParams(params)) as T | undefined;
  }
  runNow(sql: string, params?: readonly unknown[]): SqlRun {
    return { changes: this.stmt(sql).run(...sqliteParams(params)).changes };
  }

  /**
   * Transactions queue in a chain (first come, first served); `queued` counts those queued or
   * open. A call outside a transaction runs at once when none is queued, else after the ones queued
   * before it: it waits for the chain's tail as it was, and runs synchronously when that settles,
   * before a transaction queued after it can begin (awaiters of one promise resume in order).
   */
  private tail: Promise<void> = Promise.resolve();
  private queued = 0;

  async all<T = Record<string, unknown>>(sql: string, params?: readonly unknown[]): Promise<T[]> {
    if (this.queued) await this.tail;
    return this.allNow<T>(sql, params);
  }
  async get<T = Record<string, unknown>>(sql: string, params?: readonly unknown[]): Promise<T | undefined> {
    if (this.queued) await this.tail;
    return this.getNow<T>(sql, params);
  }
  async run(sql: string, params?: readonly unknown[]): Promise<SqlRun> {
    if (this.queued) await this.tail;
    return this.runNow(sql, params);
  }

  async tx<T>(fn: (q: SqlQueries) => Promise<T>): Promise<T> {
    const before = this.tail;
    let release!: () => void;
    this.tail = new Promise<void>((r) => {
      release = r;
    });
    this.queued++;
    try {
      await before;
      this.db.exec("BEGIN IMMEDIATE");
      try {
        const out = await fn(this.direct);
        this.db.exec("COMMIT");
        return out;
      } catch (err) {
        if (this.db.inTransaction) this.db.exec("ROLLBACK");
        throw err;
      }
    } finally {
      this.queued--;
      release();
    }
  }
}

const sqliteEngines = new WeakMap<Database.Database, SqliteSql>();

/**
 * THE SqliteSql of a connection (made on first ask): every store of one file must share one
 * engine, since its transaction lock is per engine.
 */
export function sqliteSqlOf(db: Database.Database): SqliteSql {
  let s = sqliteEngines.get(db);
  if (!s) {
    s = new SqliteSql(db);
    sqliteEngines.set(db, s);
  }
  return s;
}
