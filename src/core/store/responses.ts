/**
 * The response store of the Responses API door (src/request/responses-api): every response a client
 * asked to keep (`store`, true by default), so that `previous_response_id` can continue its
 * conversation and `GET /v1/responses/:id` can return it. Written once against the async `Sql`
 * interface (src/core/db/sql.ts) for two engines: one SQLite file, `<dataDir>/responses.db` (WAL,
 * its own handle, like the usage ledger), or the `responses` table of the PostgreSQL several
 * bridges share (`store: { kind: postgres }`), where a chain begun on one instance is continued on
 * any other. Either survives a restart.
 *
 * A row holds only what its response ADDED to the conversation (its new input and its output, as
 * Chat Completions messages), the id of the response before it and the chain's root; a chain is read
 * back by walking `previous_id` to the root, so a long conversation costs its length, not its
 * length squared. The conversation key of a chain is its first response's, kept on every row, so
 * every turn of a chain is one conversation (one CLI session in resume mode).
 *
 * Bounded: rows unused for `keepDays` days go (a chain is "used" when a response is added to it:
 * every row of the chain is touched), and past `maxStored` rows the least recently used go first,
 * whole chains before parts of one. Pruning runs when the store is opened, at most once an hour
 * while writing, and whenever the count goes over the cap (then down to 90% of it, so that a full
 * store does not delete on every write). On a shared database the count each instance goes by is
 * the table's at its last prune plus its own writes since: the cap may be passed by what the other
 * instances wrote meanwhile, until the next prune (hourly, or this instance's next over the cap).
 * A chain whose older part was pruned cannot be continued: `chain()` says which response is missing.
 *
 * Writes stay off the request path: `put()` queues a response and the queue is written in ONE
 * transaction 50 ms later (or at 256 waiting); every read writes the queue first, so a follow-up
 * that names a response just answered finds it. On a shared database a follow-up may reach another
 * instance before the answering one wrote it: a read of an id not found there looks again for up to
 * `LATE_MS` before it says the id is unknown. One insert per response cost the Responses door ~280 µs of CPU per request in the doors
 * benchmark; a batch costs a fraction of that per row. The price: a crash of the process may lose
 * the responses of its last 50 ms, a crash of the machine (`synchronous=NORMAL`) its last commits;
 * never the file.
 */
import path from "node:path";
import type Database from "better-sqlite3";
import type { Sql } from "../db/sql.js";
import { openSqliteSql } from "./sqlite-file.js";

export const RESPONSES_DB_FILENAME = "responses.db";
const SCHEMA_VERSION = 1;
const DAY_MS = 86_400_000;
const HOUR_MS = 3_600_000;
/** The longest chain walked back (a loop in the data could otherwise never end). */
const MAX_CHAIN = 100_000;
/** The SQLite file's schema (the PostgreSQL one is migration 6 of src/core/db/pg-migrations.ts). */
const SQLITE_SCHEMA = `
  CREATE TABLE IF NOT EXISTS responses (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    id           TEXT NOT NULL UNIQUE,
    previous_id  TEXT,
    root         TEXT NOT NULL,
    conversation TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    used_at      INTEGER NOT NULL,
    messages     TEXT NOT NULL,
    input        TEXT NOT NULL,
    body         TEXT NOT NULL
  );
  CREATE INDEX IF NOT EXISTS responses_root ON responses(root);
  CREATE INDEX IF NOT EXISTS responses_used ON responses(used_at, seq);`;
/** A chain read from `id` back to its root, oldest first (one SQL for both engines). */
const WALK = `
  WITH RECURSIVE chain(id, previous_id, root, conversation, messages, depth) AS (
    SELECT id, previous_id, root, conversation, messages, 0 FROM responses WHERE id = ?
    UNION ALL
    SELECT r.id, r.previous_id, r.root, r.conversation, r.messages, chain.depth + 1
      FROM responses r JOIN chain ON r.id = chain.previous_id
      WHERE chain.depth < ?
  )
  SELECT * FROM chain ORDER BY depth DESC`;
const COUNT = "SELECT COUNT(*) AS n FROM responses";
/** Responses put are written together, at most this long after the first of them... */
const FLUSH_MS = 50;
/** ...or as soon as this many wait. */
const MAX_PENDING = 256;
/** How long a shared store looks again for a response another instance may not have written yet. */
const LATE_MS = 250;

/** `<dataDir>/responses.db` */
export function defaultResponseStorePath(dataDir: string): string {
  return path.join(dataDir, RESPONSES_DB_FILENAME);
}

export interface ResponseStoreOptions {
  /** Days a chain is kept after it was last used. */
  keepDays: number;
  /** Responses kept at most. */
  maxStored: number;
  /** The clock (tests move it). */
  now?: () => number;
  /** A write that failed (the disk is full...): those responses are not kept. */
  onError?(err: Error, responses: number): void;
}

interface Pending {
  r: StoredResponse;
  at: number;
}

/** One response to keep. */
export interface StoredResponse {
  id: string;
  /** The response this one continued (`previous_response_id`), or null for the first of a chain. */
  previousId: string | null;
  /** The first response of the chain (this one's id when it is the first). */
  root: string;
  /** The chain's conversation key (its first response's). */
  conversation: string;
  /** What this response added to the conversation, as Chat Completions messages: its new input, then its output. */
  messages: unknown[];
  /** The input items as the client sent them (for `GET /v1/responses/:id/input_items`). */
  input: unknown[];
  /** The response object as answered, JSON text (the stream serialised it already). */
  body: string;
}

/** A chain read back to its root: the whole conversation so far. */
export type Chain =
  | { ok: true; root: string; conversation: string; messages: unknown[] }
  /** `missing`: the id that is not kept (the one asked for, or one of its predecessors that was pruned). */
  | { ok: false; missing: string };

interface Row {
  id: string;
  previous_id: string | null;
  root: string;
  conversation: string;
  messages: string;
}

export class ResponseStore {
  private readonly now: () => number;
  private readonly keepMs: number;
  private readonly maxStored: number;
  private count = 0;
  private prunedAt = 0;
  private closed = false;
  private closing: Promise<void> | undefined;
  private pending: Pending[] = [];
  private timer: NodeJS.Timeout | undefined;
  /** The write running now (writes run one after the other). */
  private writing: Promise<void> = Promise.resolve();
  private readonly onError: ResponseStoreOptions["onError"];

  private constructor(
    private readonly sql: Sql,
    /** The SQLite file (or `:memory:`), or `postgres` for the shared database. */
    readonly path: string,
    /** The SQLite handle this store opened (and closes); none on the shared database. */
    private readonly own: Database.Database | undefined,
    opts: ResponseStoreOptions,
  ) {
    this.now = opts.now ?? Date.now;
    this.keepMs = opts.keepDays * DAY_MS;
    this.maxStored = Math.max(1, Math.floor(opts.maxStored));
    this.onError = opts.onError;
  }

  /**
   * Opens a SQLite file (creating the directory 0700 and the file 0600 when missing; migrated;
   * `:memory:` keeps nothing on disk), or uses the shared PostgreSQL (`sql`, migrated when it was
   * opened); then prunes.
   */
  static async open(where: string | Sql, opts: ResponseStoreOptions): Promise<ResponseStore> {
    let store: ResponseStore;
    if (typeof where === "string") {
      const { db, target, sql } = openSqliteSql(where, "responses", SCHEMA_VERSION, SQLITE_SCHEMA);
      store = new ResponseStore(sql, target, db, opts);
    } else store = new ResponseStore(where, where.dialect, undefined, opts);
    try {
      await store.prune();
    } catch (err) {
      store.own?.close();
      throw err;
    }
    return store;
  }

  /** Responses kept now (written ones: what waits is written first). */
  async size(): Promise<number> {
    await this.flush();
    if (this.closed) return 0;
    return (await this.sql.get<{ n: number }>(COUNT))?.n ?? 0;
  }

  /**
   * Keep a response; its chain counts as used now. Written with the others of the next
   * `FLUSH_MS` (or at once past `MAX_PENDING`) in one transaction: every read writes what waits
   * first, so it is never missed.
   */
  put(r: StoredResponse): void {
    if (this.closed) return;
    this.pending.push({ r, at: this.now() });
    if (this.pending.length >= MAX_PENDING) void this.flush();
    else if (!this.timer) {
      this.timer = setTimeout(() => void this.flush(), FLUSH_MS);
      this.timer.unref();
    }
  }

  /** Write the responses put since the last write, in one transaction (and prune when due); never rejects. */
  flush(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    if (this.closed || !this.pending.length) return this.writing;
    const rows = this.pending;
    this.pending = [];
    this.writing = this.writing.then(() => this.write(rows));
    return this.writing;
  }

  private async write(rows: Pending[]): Promise<void> {
    try {
      await this.sql.tx(async (q) => {
        const touched = new Map<string, number>();
        for (const { r, at } of rows) {
          await q.run(
            `INSERT INTO responses (id, previous_id, root, conversation, created_at, used_at, messages, input, body)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
            [
              r.id,
              r.previousId,
              r.root,
              r.conversation,
              at,
              at,
              JSON.stringify(r.messages),
              JSON.stringify(r.input),
              r.body,
            ],
          );
          if (r.previousId) touched.set(r.root, at);
        }
        for (const [root, at] of touched) await q.run("UPDATE responses SET used_at = ? WHERE root = ?", [at, root]);
      });
      this.count += rows.length;
      if (this.count > this.maxStored || this.now() - this.prunedAt >= HOUR_MS) await this.prune();
    } catch (err) {
      this.onError?.(err as Error, rows.length);
    }
  }

  /** The response object kept under `id`, as JSON text (undefined when it is not kept). */
  async body(id: string): Promise<string | undefined> {
    await this.flush();
    if (this.closed) return undefined;
    const row = await this.late(() => this.sql.get<{ body: string }>("SELECT body FROM responses WHERE id = ?", [id]));
    return row?.body;
  }

  /** The input items of the response `id`, as the client sent them (undefined when it is not kept). */
  async input(id: string): Promise<unknown[] | undefined> {
    await this.flush();
    if (this.closed) return undefined;
    const row = await this.late(() =>
      this.sql.get<{ input: string }>("SELECT input FROM responses WHERE id = ?", [id]),
    );
    return row ? (JSON.parse(row.input) as unknown[]) : undefined;
  }

  /** The conversation up to and including the response `id`: every message of its chain, oldest first. */
  async chain(id: string): Promise<Chain> {
    await this.flush();
    if (this.closed) return { ok: false, missing: id };
    const rows =
      (await this.late(async () => {
        const found = await this.sql.all<Row & { depth: number }>(WALK, [id, MAX_CHAIN]);
        return found.length ? found : undefined;
      })) ?? [];
    const first = rows[0];
    if (!first) return { ok: false, missing: id };
    // The oldest row found must be the chain's first: else a predecessor was pruned.
    if (first.previous_id !== null) return { ok: false, missing: first.previous_id };
    const messages: unknown[] = [];
    for (const r of rows) for (const m of JSON.parse(r.messages) as unknown[]) messages.push(m);
    return { ok: true, root: first.id, conversation: first.conversation, messages };
  }

  /**
   * `read()`, and on a shared database read again for up to `LATE_MS` while it finds nothing: the
   * instance that answered the response may still hold it back (`FLUSH_MS`).
   */
  private async late<T>(read: () => Promise<T | undefined>): Promise<T | undefined> {
    let found = await read();
    for (let waited = 0; found === undefined && !this.own && waited < LATE_MS; waited += 25) {
      await new Promise((r) => setTimeout(r, 25));
      found = await read();
    }
    return found;
  }

  /** Forget a response (its successors can no longer be continued). Whether it was kept. */
  async delete(id: string): Promise<boolean> {
    await this.flush();
    if (this.closed) return false;
    const gone = (await this.sql.run("DELETE FROM responses WHERE id = ?", [id])).changes > 0;
    if (gone) this.count--;
    return gone;
  }

  /** Delete what is past `keepDays` or over `maxStored`. Returns how many rows went. */
  async prune(): Promise<number> {
    if (this.closed) return 0;
    const now = this.now();
    this.prunedAt = now;
    let gone = (await this.sql.run("DELETE FROM responses WHERE used_at < ?", [now - this.keepMs])).changes;
    this.count = (await this.sql.get<{ n: number }>(COUNT))?.n ?? 0;
    if (this.count > this.maxStored) {
      const target = Math.floor(this.maxStored * 0.9);
      gone += (
        await this.sql.run(
          "DELETE FROM responses WHERE seq IN (SELECT seq FROM responses ORDER BY used_at, seq LIMIT ?)",
          [this.count - target],
        )
      ).changes;
      this.count = (await this.sql.get<{ n: number }>(COUNT))?.n ?? 0;
    }
    return gone;
  }

  /** Writes what waits, then closes the file (the shared database stays open: its opener closes it). */
  close(): Promise<void> {
    this.closing ??= (async () => {
      await this.flush();
      this.closed = true;
      this.own?.close();
    })();
    return this.closing;
  }
}
