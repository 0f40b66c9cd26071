/**
 * The usage ledger: per backend per day (UTC), how many turns ended, how many of them failed, the
 * tokens in and out, how many times the backend answered with a limit, its last limit message (the
 * CLI's or upstream's own words, clipped; no secrets), when that was, and when it said the limit
 * resets. Written once against the async `Sql` interface (src/core/db/sql.ts) for two engines: one
 * SQLite file, `<dataDir>/usage.db` (WAL, its own handle), or the `usage` table of the PostgreSQL
 * several bridges share (`store: { kind: postgres }`, src/core/db/pg-migrations.ts). Rows are kept
 * `KEEP_DAYS` days: older ones are deleted when the ledger is opened and, after that, on the first
 * write of each new day.
 *
 * Several instances on one database write the SAME rows: a row is one backend's day for the whole
 * cluster (no instance id), and each instance adds its deltas with one atomic upsert per row
 * (`turns = usage.turns + excluded.turns`), so any instance reads the cluster's sums.
 *
 * Writes are cheap on purpose: callers add deltas (`add`), which are summed in memory and written
 * in one transaction by `flush()` (src/ops/usage calls it on a short timer and before every read;
 * flushes run one after the other), so the request path never waits for the disk or the database.
 * `synchronous=NORMAL`: a crash of the machine may lose the last second of counts, never the file.
 */
import path from "node:path";
import type Database from "better-sqlite3";
import type { Sql } from "../db/sql.js";
import { openSqliteSql } from "./sqlite-file.js";

export const USAGE_DB_FILENAME = "usage.db";
/** Days of rows kept, today included. */
export const KEEP_DAYS = 30;
/** The longest limit message kept. */
export const MAX_MESSAGE_CHARS = 500;
const SCHEMA_VERSION = 1;
const DAY_MS = 86_400_000;
/** The SQLite file's schema (the PostgreSQL one is migration 6 of src/core/db/pg-migrations.ts). */
const SQLITE_SCHEMA = `
  CREATE TABLE IF NOT EXISTS usage (
    day                TEXT NOT NULL,
    backend            TEXT NOT NULL,
    turns              INTEGER NOT NULL DEFAULT 0,
    failed             INTEGER NOT NULL DEFAULT 0,
    tokens_in          INTEGER NOT NULL DEFAULT 0,
    tokens_out         INTEGER NOT NULL DEFAULT 0,
    limit_hits         INTEGER NOT NULL DEFAULT 0,
    fallbacks          INTEGER NOT NULL DEFAULT 0,
    last_limit_message TEXT,
    last_limit_at      INTEGER,
    reset_at           INTEGER,
    PRIMARY KEY (day, backend)
  );`;
/** One backend's day: the counts added to what is there, the newer limit kept (one SQL for both engines). */
const UPSERT = `
  INSERT INTO usage (day, backend, turns, failed, tokens_in, tokens_out, limit_hits, fallbacks,
                     last_limit_message, last_limit_at, reset_at)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
  ON CONFLICT (day, backend) DO UPDATE SET
    turns = usage.turns + excluded.turns,
    failed = usage.failed + excluded.failed,
    tokens_in = usage.tokens_in + excluded.tokens_in,
    tokens_out = usage.tokens_out + excluded.tokens_out,
    limit_hits = usage.limit_hits + excluded.limit_hits,
    fallbacks = usage.fallbacks + excluded.fallbacks,
    last_limit_message = CASE WHEN excluded.last_limit_at IS NOT NULL
        AND (usage.last_limit_at IS NULL OR excluded.last_limit_at >= usage.last_limit_at)
      THEN excluded.last_limit_message ELSE usage.last_limit_message END,
    last_limit_at = CASE WHEN excluded.last_limit_at IS NOT NULL
        AND (usage.last_limit_at IS NULL OR excluded.last_limit_at >= usage.last_limit_at)
      THEN excluded.last_limit_at ELSE usage.last_limit_at END,
    reset_at = COALESCE(excluded.reset_at, usage.reset_at)`;
/** Each backend's rows holding its latest limit (newest day first). */
const LATEST_LIMITS = `
  SELECT u.* FROM usage u
  JOIN (SELECT backend, MAX(last_limit_at) AS m FROM usage WHERE last_limit_at IS NOT NULL GROUP BY backend) x
    ON u.backend = x.backend AND u.last_limit_at = x.m
  ORDER BY u.backend, u.day DESC`;

/** `<dataDir>/usage.db` */
export function defaultUsageLedgerPath(dataDir: string): string {
  return path.join(dataDir, USAGE_DB_FILENAME);
}

/** The UTC day of an instant, `YYYY-MM-DD`. */
export function utcDay(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10);
}

/** One backend's counts on one day. */
export interface UsageDayRow {
  day: string;
  backend: string;
  turns: number;
  failed: number;
  tokensIn: number;
  tokensOut: number;
  limitHits: number;
  /** Turns handed from this backend to the next model of a fallback chain. */
  fallbacks: number;
  lastLimitMessage: string | null;
  lastLimitAt: number | null;
  /** When the backend said its limit resets (ms since the epoch), as of its last limit that day. */
  resetAt: number | null;
}

/** What to add to one backend's day: counts to sum, and a limit to remember. */
export interface UsageDelta {
  turns?: number;
  failed?: number;
  tokensIn?: number;
  tokensOut?: number;
  limitHits?: number;
  fallbacks?: number;
  /** A limit seen at `at`: its message (replaces the day's last one when newer). */
  limit?: { message: string; at: number; resetAt?: number | null };
  /** A reset time learnt without a new message (a fallback's `resetAt`). */
  resetAt?: number;
}

/** A backend's latest limit, over the days kept. */
export interface UsageLimitState {
  backend: string;
  message: string | null;
  at: number;
  resetAt: number | null;
}

export interface UsageLedgerOptions {
  /** The clock (tests move it). */
  now?: () => number;
}

interface Row {
  day: string;
  backend: string;
  turns: number;
  failed: number;
  tokens_in: number;
  tokens_out: number;
  limit_hits: number;
  fallbacks: number;
  last_limit_message: string | null;
  last_limit_at: number | null;
  reset_at: number | null;
}

const toRow = (r: Row): UsageDayRow => ({
  day: r.day,
  backend: r.backend,
  turns: r.turns,
  failed: r.failed,
  tokensIn: r.tokens_in,
  tokensOut: r.tokens_out,
  limitHits: r.limit_hits,
  fallbacks: r.fallbacks,
  lastLimitMessage: r.last_limit_message,
  lastLimitAt: r.last_limit_at,
  resetAt: r.reset_at,
});

/** A count to add: a finite, non-negative integer (anything else adds 0). */
const count = (n: number | undefined): number =>
  typeof n === "number" && Number.isFinite(n) && n > 0 ? Math.min(Math.round(n), 2 ** 40) : 0;

/** A time: a finite, positive number of ms (else null). */
const time = (n: number | null | undefined): number | null =>
  typeof n === "number" && Number.isFinite(n) && n > 0 ? Math.round(n) : null;

export function clipMessage(message: string): string {
  const one = message.replace(/\s+/g, " ").trim();
  return one.length > MAX_MESSAGE_CHARS ? `${one.slice(0, MAX_MESSAGE_CHARS - 1)}…` : one;
}

interface Pending {
  day: string;
  backend: string;
  turns: number;
  failed: number;
  tokensIn: number;
  tokensOut: number;
  limitHits: number;
  fallbacks: number;
  limit: { message: string; at: number; resetAt: number | null } | null;
  resetAt: number | null;
}

export class UsageLedger {
  private readonly now: () => number;
  private readonly pending = new Map<string, Pending>();
  private prunedDay = "";
  private closed = false;
  private closing: Promise<void> | undefined;
  /** The flush running now (flushes run one after the other). */
  private writing: Promise<void> = Promise.resolve();

  private constructor(
    private readonly sql: Sql,
    /** The SQLite file (or `:memory:`), or `postgres` for the shared database. */
    readonly path: string,
    /** The SQLite handle this ledger opened (and closes); none on the shared database. */
    private readonly own: Database.Database | undefined,
    opts: UsageLedgerOptions,
  ) {
    this.now = opts.now ?? Date.now;
  }

  /**
   * Opens a SQLite file (creating the directory 0700 and the file 0600 when missing; migrated), or
   * uses the shared PostgreSQL (`sql`, migrated when it was opened); then prunes.
   */
  static async open(where: string | Sql, opts: UsageLedgerOptions = {}): Promise<UsageLedger> {
    let ledger: UsageLedger;
    if (typeof where === "string") {
      const { db, target, sql } = openSqliteSql(where, "usage", SCHEMA_VERSION, SQLITE_SCHEMA);
      ledger = new UsageLedger(sql, target, db, opts);
    } else ledger = new UsageLedger(where, where.dialect, undefined, opts);
    try {
      await ledger.prune();
    } catch (err) {
      ledger.own?.close();
      throw err;
    }
    return ledger;
  }

  /** Add to a backend's counts on the day of `at` (default now); written by the next `flush()`. */
  add(backend: string, delta: UsageDelta, at = this.now()): void {
    if (this.closed || typeof backend !== "string" || !backend) return;
    const day = utcDay(at);
    const key = `${day}\u0000${backend}`;
    let p = this.pending.get(key);
    if (!p) {
      p = {
        day,
        backend,
        turns: 0,
        failed: 0,
        tokensIn: 0,
        tokensOut: 0,
        limitHits: 0,
        fallbacks: 0,
        limit: null,
        resetAt: null,
      };
      this.pending.set(key, p);
    }
    p.turns += count(delta.turns);
    p.failed += count(delta.failed);
    p.tokensIn += count(delta.tokensIn);
    p.tokensOut += count(delta.tokensOut);
    p.limitHits += count(delta.limitHits);
    p.fallbacks += count(delta.fallbacks);
    const limitAt = time(delta.limit?.at);
    if (delta.limit && limitAt !== null && (!p.limit || limitAt >= p.limit.at)) {
      p.limit = {
        message: clipMessage(String(delta.limit.message ?? "")),
        at: limitAt,
        resetAt: time(delta.limit.resetAt) ?? p.limit?.resetAt ?? null,
      };
    }
    const reset = time(delta.resetAt);
    if (reset !== null) p.resetAt = reset;
  }

  /** Counts added and not yet written. */
  get pendingCount(): number {
    return this.pending.size;
  }

  /** Write what was added, in one transaction (and prune once a day); after the flush before it. */
  flush(): Promise<void> {
    const next = this.writing.then(() => this.write());
    this.writing = next.catch(() => {});
    return next;
  }

  private async write(): Promise<void> {
    if (this.closed) return;
    if (utcDay(this.now()) !== this.prunedDay) await this.prune();
    if (!this.pending.size) return;
    const rows = [...this.pending.values()];
    this.pending.clear();
    await this.sql.tx(async (q) => {
      for (const p of rows)
        await q.run(UPSERT, [
          p.day,
          p.backend,
          p.turns,
          p.failed,
          p.tokensIn,
          p.tokensOut,
          p.limitHits,
          p.fallbacks,
          p.limit?.message ?? null,
          p.limit?.at ?? null,
          p.limit?.resetAt ?? p.resetAt,
        ]);
    });
  }

  /** Delete the rows older than `KEEP_DAYS` days (today included). Returns how many went. */
  async prune(): Promise<number> {
    if (this.closed) return 0;
    this.prunedDay = utcDay(this.now());
    return (await this.sql.run("DELETE FROM usage WHERE day < ?", [this.firstDay(KEEP_DAYS)])).changes;
  }

  /** The first day (UTC) of the last `days` days, today included. */
  firstDay(days: number): string {
    return utcDay(this.now() - (Math.max(1, Math.floor(days)) - 1) * DAY_MS);
  }

  /** Rows of the last `days` days (today included), oldest day first, written ones only. */
  async days(days: number): Promise<UsageDayRow[]> {
    if (this.closed) return [];
    const rows = await this.sql.all<Row>("SELECT * FROM usage WHERE day >= ? ORDER BY day, backend", [
      this.firstDay(days),
    ]);
    return rows.map(toRow);
  }

  /** Each backend's latest limit (message, time, reset), and the latest reset any row knows. */
  async limits(): Promise<UsageLimitState[]> {
    if (this.closed) return [];
    const out = new Map<string, UsageLimitState>();
    for (const r of await this.sql.all<Row>(LATEST_LIMITS)) {
      if (out.has(r.backend)) continue;
      out.set(r.backend, {
        backend: r.backend,
        message: r.last_limit_message,
        at: r.last_limit_at ?? 0,
        resetAt: r.reset_at,
      });
    }
    const resets = await this.sql.all<{ backend: string; reset_at: number }>(
      "SELECT backend, MAX(reset_at) AS reset_at FROM usage WHERE reset_at IS NOT NULL GROUP BY backend",
    );
    for (const r of resets) {
      const s = out.get(r.backend);
      if (s && (s.resetAt === null || r.reset_at > s.resetAt) && r.reset_at > s.at) s.resetAt = r.reset_at;
    }
    return [...out.values()];
  }

  /** Write what is pending and close the file (the shared database stays open: its opener closes it). */
  close(): Promise<void> {
    this.closing ??= (async () => {
      try {
        await this.flush();
      } finally {
        this.closed = true;
        this.own?.close();
      }
    })();
    return this.closing;
  }
}
