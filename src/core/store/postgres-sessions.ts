/**
 * The session store on PostgreSQL (`store: { kind: postgres }`): conversation bindings and their
 * history in the tables `sessions` / `session_events` (migration 1 of src/core/db/pg-migrations.ts),
 * shared by every bridge on the database. Same contract and validation as the SQLite store
 * (src/core/store/sqlite.ts): "bound" / "rebound" / "error" / "deleted" events, MAX_EVENTS_PER_KEY
 * kept per key, messages clipped to MAX_MESSAGE_CHARS.
 *
 * Round trips are what a turn pays here, so the turn's writes are one statement each: `beginTurn` an
 * UPDATE; `recordTurn`, `recordError` and `delete` one statement that changes the binding and
 * writes its event together (data-modifying CTEs: atomic without BEGIN/COMMIT); the history is pruned
 * by a second statement only when an event was written. `put` (a new or changed binding, rare) runs
 * in a transaction that inserts first (`ON CONFLICT DO NOTHING` waits for another instance inserting
 * the same key), so two instances binding one new conversation at once record "bound" then
 * "rebound", as one instance would.
 *
 * The database belongs to the store backing (src/core/db/backing.ts), not to this store: `close()`
 * ends this store's use of it, the backing closes the pool.
 */
import type { PostgresDb } from "../db/postgres.js";
import {
  clip,
  MAX_EVENTS_PER_KEY,
  optionalText,
  requireCount,
  requireText,
  rowToBinding,
  SessionStoreError,
  validateBinding,
  type ListOptions,
  type SessionBinding,
  type SessionEvent,
  type SessionEventKind,
  type SessionRow,
  type SessionStore,
} from "./types.js";

export interface PgSessionStoreOptions {
  /** Clock (epoch ms) for updatedAt/event times; default Date.now. */
  now?: () => number;
}

const COLUMNS = "key, backend, backend_session_id, cwd, turns, created_at, updated_at, last_error, model";

/** Keeps the newest MAX_EVENTS_PER_KEY events of a key (nothing to do while it has fewer). */
const PRUNE = `DELETE FROM session_events WHERE key = ? AND id < (
  SELECT id FROM session_events WHERE key = ? ORDER BY id DESC OFFSET ${MAX_EVENTS_PER_KEY - 1} LIMIT 1)`;

/** turns+1 and the session id; the event of a changed session in the same statement. Returns the session it had. */
const RECORD_TURN = `
  WITH prev AS (SELECT key, backend_session_id FROM sessions WHERE key = ? FOR UPDATE),
  upd AS (
    UPDATE sessions s SET turns = s.turns + 1, backend_session_id = ?, updated_at = ?, last_error = NULL
    FROM prev WHERE s.key = prev.key RETURNING prev.backend_session_id AS was),
  ev AS (
    INSERT INTO session_events (key, at, kind, reason)
    SELECT ?, ?::bigint, 'rebound', ? || was || ')' FROM upd WHERE was <> ? RETURNING id)
  SELECT was, (SELECT count(*) FROM ev) AS events FROM upd`;

/** lastError and updatedAt, and the "error" event, when the key is bound. */
const RECORD_ERROR = `
  WITH upd AS (UPDATE sessions SET last_error = ?, updated_at = ? WHERE key = ? RETURNING key)
  INSERT INTO session_events (key, at, kind, reason) SELECT key, ?::bigint, 'error', ? FROM upd`;

/** The binding removed and its "deleted" event written. */
const DELETE = `
  WITH del AS (DELETE FROM sessions WHERE key = ? RETURNING key)
  INSERT INTO session_events (key, at, kind, reason) SELECT key, ?::bigint, 'deleted', NULL FROM del`;

const INSERT = `INSERT INTO sessions (${COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`;
const UPSERT = `${INSERT}
  ON CONFLICT (key) DO UPDATE SET
    backend = excluded.backend, backend_session_id = excluded.backend_session_id, cwd = excluded.cwd,
    turns = excluded.turns, created_at = excluded.created_at, updated_at = excluded.updated_at,
    last_error = excluded.last_error, model = excluded.model`;

export class PgSessionStore implements SessionStore {
  private closed = false;
  private readonly now: () => number;

  constructor(
    private readonly db: PostgresDb,
    opts: PgSessionStoreOptions = {},
  ) {
    this.now = opts.now ?? Date.now;
  }

  private live(): void {
    if (this.closed) throw new SessionStoreError("session store is closed");
  }

  private async prune(key: string): Promise<void> {
    await this.db.run(PRUNE, [key, key]);
  }

  async get(key: string): Promise<SessionBinding | undefined> {
    this.live();
    const row = await this.db.get<SessionRow>(`SELECT ${COLUMNS} FROM sessions WHERE key = ?`, [
      requireText(key, "key"),
    ]);
    return row ? rowToBinding(row) : undefined;
  }

  async put(binding: SessionBinding): Promise<void> {
    this.live();
    const b = validateBinding(binding);
    const at = this.now();
    const row = [b.key, b.backend, b.backendSessionId, b.cwd, b.turns, b.createdAt, b.updatedAt, b.lastError, b.model];
    const event = await this.db.tx(async (q) => {
      // A new key: the insert (which waits for another instance inserting the same key) says so.
      const added = (await q.run(`${INSERT} ON CONFLICT (key) DO NOTHING`, row)).changes > 0;
      let prev: { backend_session_id: string } | undefined;
      if (!added) {
        prev = await q.get("SELECT backend_session_id FROM sessions WHERE key = ? FOR UPDATE", [b.key]);
        await q.run(UPSERT, row);
      }
      // No row before (or one deleted meanwhile): bound.
      const reason = !prev
        ? { kind: "bound", text: `session ${b.backendSessionId} on ${b.backend}` }
        : prev.backend_session_id !== b.backendSessionId
          ? { kind: "rebound", text: `session ${prev.backend_session_id} -> ${b.backendSessionId} on ${b.backend}` }
          : undefined;
      if (reason)
        await q.run("INSERT INTO session_events (key, at, kind, reason) VALUES (?, ?, ?, ?)", [
          b.key,
          at,
          reason.kind,
          clip(reason.text),
        ]);
      return reason !== undefined;
    });
    if (event) await this.prune(b.key);
  }

  async beginTurn(key: string, marker: string): Promise<void> {
    this.live();
    const k = requireText(key, "key");
    if (typeof marker !== "string") throw new SessionStoreError("marker must be a string");
    await this.db.run("UPDATE sessions SET last_error = ?, updated_at = ? WHERE key = ?", [
      clip(marker),
      this.now(),
      k,
    ]);
  }

  async recordTurn(key: string, backendSessionId: string): Promise<void> {
    this.live();
    const k = requireText(key, "key");
    const id = requireText(backendSessionId, "backendSessionId");
    const at = this.now();
    const r = await this.db.get<{ was: string; events: number }>(RECORD_TURN, [
      k,
      id,
      at,
      k,
      at,
      `backend reported session ${id} (was `,
      id,
    ]);
    if (r?.events) await this.prune(k);
  }

  async recordError(key: string, message: string): Promise<void> {
    this.live();
    if (typeof message !== "string") throw new SessionStoreError("message must be a string");
    const k = requireText(key, "key");
    const msg = clip(message);
    const at = this.now();
    const { changes } = await this.db.run(RECORD_ERROR, [msg, at, k, at, msg]);
    if (changes > 0) await this.prune(k);
  }

  async delete(key: string): Promise<boolean> {
    this.live();
    const k = requireText(key, "key");
    const { changes } = await this.db.run(DELETE, [k, this.now()]);
    if (changes > 0) await this.prune(k);
    return changes > 0;
  }

  async list(opts: ListOptions = {}): Promise<SessionBinding[]> {
    this.live();
    const where = opts.backend === undefined ? "" : " WHERE backend = ?";
    const params: unknown[] = opts.backend === undefined ? [] : [requireText(opts.backend, "backend")];
    let limit = "";
    if (opts.limit !== undefined) {
      limit = " LIMIT ?";
      params.push(requireCount(opts.limit, "limit"));
    }
    const rows = await this.db.all<SessionRow>(
      `SELECT ${COLUMNS} FROM sessions${where} ORDER BY updated_at DESC, key${limit}`,
      params,
    );
    return rows.map(rowToBinding);
  }

  async appendEvent(key: string, kind: SessionEventKind, reason?: string | null): Promise<void> {
    this.live();
    const k = requireText(key, "key");
    const text = optionalText(reason, "reason");
    await this.db.run("INSERT INTO session_events (key, at, kind, reason) VALUES (?, ?, ?, ?)", [
      k,
      this.now(),
      requireText(kind, "kind", 64),
      text === null ? null : clip(text),
    ]);
    await this.prune(k);
  }

  async listEvents(key: string, opts: { limit?: number } = {}): Promise<SessionEvent[]> {
    this.live();
    const params: unknown[] = [requireText(key, "key")];
    let limit = "";
    if (opts.limit !== undefined) {
      limit = " LIMIT ?";
      params.push(requireCount(opts.limit, "limit"));
    }
    return this.db.all<SessionEvent>(
      `SELECT id, key, at, kind, reason FROM session_events WHERE key = ? ORDER BY id DESC${limit}`,
      params,
    );
  }

  /** Ends this store's use of the database (the backing closes the pool). */
  async close(): Promise<void> {
    this.closed = true;
  }
}
