/**
 * The response store of the Responses API door (src/request/responses-api): every response a client
 * asked to keep (`store`, true by default), so that `previous_response_id` can continue its
 * conversation and `GET /v1/responses/:id` can return it. One SQLite file, `<dataDir>/responses.db`
 * (WAL, better-sqlite3 like the usage ledger, src/core/store/usage-ledger.ts): it survives a restart.
 *
 * A row holds only what its response ADDED to the conversation (its new input and its output, as
 * Chat Completions messages), the id of the response before it and the chain's root; a chain is read
 * back by walking `previous_id` to the root, so a long conversation costs its length, not its
 * length squared. The conversation key of a chain is its first response's, kept on every row, so
 * every turn of a chain is one conversation (one CLI session in resume mode).
 *
 * Bounded: rows unused for `keepDays` days go (a chain is "used" when a response is added to it:
 * every row of the chain is touched), and past `maxStored` rows the least recently used go first,
 * whole chains before parts of one. Pruning runs when the file is opened, at most once an hour
 * while writing, and whenever the count goes over the cap (then down to 90% of it, so that a full
 * store does not delete on every write). A chain whose older part was pruned cannot be continued:
 * `chain()` says which response is missing.
 *
 * Writes stay off the request path: `put()` queues a response and the queue is written in ONE
 * transaction 50 ms later (or at 256 waiting); every read writes the queue first, so a follow-up
 * that names a response just answered finds it. One insert per response cost the Responses door
 * ~280 µs of CPU per request in the doors benchmark; a batch costs a fraction of that per row.
 * The price: a crash of the process may lose the responses of its last 50 ms, a crash of the
 * machine (`synchronous=NORMAL`) its last commits; never the file.
 */
import path from "node:path";
import type Database from "better-sqlite3";
import { openSqliteFile } from "./sqlite-file.js";

export const RESPONSES_DB_FILENAME = "responses.db";
const SCHEMA_VERSION = 1;
const DAY_MS = 86_400_000;
const HOUR_MS = 3_600_000;
/** The longest chain walked back (a loop in the data could otherwise never end). */
const MAX_CHAIN = 100_000;
/** Responses put are written together, at most this long after the first of them... */
const FLUSH_MS = 50;
/** ...or as soon as this many wait. */
const MAX_PENDING = 256;

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
  private count: number;
  private prunedAt = 0;
  private closed = false;
  private pending: Pending[] = [];
  private timer: NodeJS.Timeout | undefined;
  private readonly onError: ResponseStoreOptions["onError"];
  private readonly stmt;
  private readonly writeAll: Database.Transaction<(rows: Pending[]) => void>;

  private constructor(
    private readonly db: Database.Database,
    readonly path: string,
    opts: ResponseStoreOptions,
  ) {
    this.now = opts.now ?? Date.now;
    this.keepMs = opts.keepDays * DAY_MS;
    this.maxStored = Math.max(1, Math.floor(opts.maxStored));
    this.stmt = {
      insert: db.prepare(`
        INSERT INTO responses (id, previous_id, root, conversation, created_at, used_at, messages, input, body)
        VALUES (@id, @previousId, @root, @conversation, @now, @now, @messages, @input, @body)`),
      touch: db.prepare<[number, string]>("UPDATE responses SET used_at = ? WHERE root = ?"),
      body: db.prepare<[string], { body: string }>("SELECT body FROM responses WHERE id = ?"),
      input: db.prepare<[string], { input: string }>("SELECT input FROM responses WHERE id = ?"),
      walk: db.prepare<[string, number], Row & { depth: number }>(`
        WITH RECURSIVE chain(id, previous_id, root, conversation, messages, depth) AS (
          SELECT id, previous_id, root, conversation, messages, 0 FROM responses WHERE id = ?
          UNION ALL
          SELECT r.id, r.previous_id, r.root, r.conversation, r.messages, chain.depth + 1
            FROM responses r JOIN chain ON r.id = chain.previous_id
            WHERE chain.depth < ?
        )
        SELECT * FROM chain ORDER BY depth DESC`),
      remove: db.prepare<[string]>("DELETE FROM responses WHERE id = ?"),
      count: db.prepare<[], { n: number }>("SELECT COUNT(*) AS n FROM responses"),
      pruneOld: db.prepare<[number]>("DELETE FROM responses WHERE used_at < ?"),
      pruneLru: db.prepare<[number]>(
        "DELETE FROM responses WHERE seq IN (SELECT seq FROM responses ORDER BY used_at, seq LIMIT ?)",
      ),
    };
    this.count = this.stmt.count.get()?.n ?? 0;
    this.onError = opts.onError;
    const st = this.stmt;
    this.writeAll = db.transaction((rows: Pending[]) => {
      const touched = new Map<string, number>();
      for (const { r, at } of rows) {
        st.insert.run({
          id: r.id,
          previousId: r.previousId,
          root: r.root,
          conversation: r.conversation,
          now: at,
          messages: JSON.stringify(r.messages),
          input: JSON.stringify(r.input),
          body: r.body,
        });
        if (r.previousId) touched.set(r.root, at);
      }
      for (const [root, at] of touched) st.touch.run(at, root);
    });
  }

  /** Opens (creating the directory 0700 and the file 0600 when missing), migrates and prunes. `:memory:` keeps nothing on disk. */
  static open(file: string, opts: ResponseStoreOptions): ResponseStore {
    const { db, target, version } = openSqliteFile(file, "responses", SCHEMA_VERSION);
    try {
      if (version < 1) {
        db.transaction(() => {
          db.exec(`
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
            CREATE INDEX IF NOT EXISTS responses_used ON responses(used_at, seq);
          `);
          db.pragma(`user_version = ${SCHEMA_VERSION}`);
        }).immediate();
      }
      const store = new ResponseStore(db, target, opts);
      store.prune();
      return store;
    } catch (err) {
      db.close();
      throw err;
    }
  }

  /** Responses kept now. */
  get size(): number {
    this.flush();
    return this.count;
  }

  /**
   * Keep a response; its chain counts as used now. Written with the others of the next
   * `FLUSH_MS` (or at once past `MAX_PENDING`) in one transaction: every read writes what waits
   * first, so it is never missed.
   */
  put(r: StoredResponse): void {
    if (this.closed) return;
    this.pending.push({ r, at: this.now() });
    if (this.pending.length >= MAX_PENDING) this.flush();
    else if (!this.timer) {
      this.timer = setTimeout(() => this.flush(), FLUSH_MS);
      this.timer.unref();
    }
  }

  /** Write the responses put since the last write, in one transaction (and prune when due). */
  flush(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    if (this.closed || !this.pending.length) return;
    const rows = this.pending;
    this.pending = [];
    try {
      this.writeAll.immediate(rows);
      this.count += rows.length;
      const now = this.now();
      if (this.count > this.maxStored || now - this.prunedAt >= HOUR_MS) this.prune();
    } catch (err) {
      this.onError?.(err as Error, rows.length);
    }
  }

  /** The response object kept under `id`, as JSON text (undefined when it is not kept). */
  body(id: string): string | undefined {
    if (this.closed) return undefined;
    this.flush();
    return this.stmt.body.get(id)?.body;
  }

  /** The input items of the response `id`, as the client sent them (undefined when it is not kept). */
  input(id: string): unknown[] | undefined {
    if (this.closed) return undefined;
    this.flush();
    const row = this.stmt.input.get(id);
    return row ? (JSON.parse(row.input) as unknown[]) : undefined;
  }

  /** The conversation up to and including the response `id`: every message of its chain, oldest first. */
  chain(id: string): Chain {
    if (this.closed) return { ok: false, missing: id };
    this.flush();
    const rows = this.stmt.walk.all(id, MAX_CHAIN);
    const first = rows[0];
    if (!first) return { ok: false, missing: id };
    // The oldest row found must be the chain's first: else a predecessor was pruned.
    if (first.previous_id !== null) return { ok: false, missing: first.previous_id };
    const messages: unknown[] = [];
    for (const r of rows) for (const m of JSON.parse(r.messages) as unknown[]) messages.push(m);
    return { ok: true, root: first.id, conversation: first.conversation, messages };
  }

  /** Forget a response (its successors can no longer be continued). Whether it was kept. */
  delete(id: string): boolean {
    if (this.closed) return false;
    this.flush();
    const gone = this.stmt.remove.run(id).changes > 0;
    if (gone) this.count--;
    return gone;
  }

  /** Delete what is past `keepDays` or over `maxStored`. Returns how many rows went. */
  prune(): number {
    if (this.closed) return 0;
    const now = this.now();
    this.prunedAt = now;
    let gone = this.stmt.pruneOld.run(now - this.keepMs).changes;
    this.count = this.stmt.count.get()?.n ?? 0;
    if (this.count > this.maxStored) {
      const target = Math.floor(this.maxStored * 0.9);
      gone += this.stmt.pruneLru.run(this.count - target).changes;
      this.count = this.stmt.count.get()?.n ?? 0;
    }
    return gone;
  }

  /** Writes what waits, then closes the file. */
  close(): void {
    if (this.closed) return;
    this.flush();
    this.closed = true;
    this.db.close();
  }
}
