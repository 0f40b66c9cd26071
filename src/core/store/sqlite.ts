/**
 * Embedded session store: one SQLite file (normally `<dataDir>/sessions.db`) via better-sqlite3.
 *
 * Pragmas and why:
 * - `journal_mode=WAL`: readers never block the writer and vice versa, so two bridge processes can
 *   share one file; a commit is one append to the -wal file.
 * - `synchronous=FULL` (default; NORMAL selectable): in WAL mode FULL fsyncs the WAL on every commit,
 *   so a put() that resolved survives `kill -9` AND power loss / OS crash. NORMAL also survives
 *   `kill -9` (the commit has been written to the OS before put() returns; only the fsync is
 *   deferred to checkpoints) but may lose the last commits on power loss. A lost binding means a
 *   conversation silently cold-starts: every write of a binding, an error or an event is FULL.
 * - Turn bookkeeping is the exception (`beginTurn`, and `recordTurn` when the session stays the
 *   same): two writes per turn, and a warm turn takes ~60 ms, of which an fsync each took ~5 ms of
 *   the event loop (measured: 10.7 ms wall for the pair, bench/results/*-warm-turn-cpu.md). They
 *   commit with `synchronous=NORMAL` (switched for that commit only): still on disk as far as a
 *   crash of the bridge is concerned (`kill -9`: the OS has the WAL pages), and made durable by the
 *   next FULL commit or checkpoint, since the WAL is fsynced as a whole and in order. What a power
 *   loss can take back is only that bookkeeping of the last turns — a turn count one short, or a
 *   finished turn still marked in progress (then an identical next message starts a new session
 *   seeded from the conversation, as a retry would) — never a binding.
 * - `busy_timeout` (default 5000 ms): a writer that finds another process holding the write lock
 *   waits instead of failing with SQLITE_BUSY. Every read-modify-write runs in `BEGIN IMMEDIATE`,
 *   which takes the write lock up front, so a WAL snapshot can never go stale mid-transaction
 *   (SQLITE_BUSY_SNAPSHOT is not retried by the busy handler). better-sqlite3 is synchronous, so a
 *   wait blocks this process's event loop; transactions here are a few rows, waits are tiny.
 * - `trusted_schema=OFF`: hygiene; the schema uses no functions that would need it.
 *
 * Schema versioning: a `meta` table holds `schema_version`; MIGRATIONS run in order inside one
 * IMMEDIATE transaction that re-reads the version (two processes may open a fresh file together).
 * A fresh file runs every migration, so the upgrade path is the path that is always exercised.
 * A file from a newer clawbridge is refused rather than guessed at.
 */
import { closeSync, mkdirSync, openSync } from "node:fs";
import path from "node:path";
import Database from "better-sqlite3";
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
  type SqliteSynchronous,
} from "./types.js";

export const SESSION_DB_FILENAME = "sessions.db";
export const SCHEMA_VERSION = 2;
const DEFAULT_BUSY_TIMEOUT_MS = 5000;

type DB = Database.Database;

export interface Migration {
  version: number;
  description: string;
  up(db: DB): void;
}

/** In order; `version` is the schema version after the migration ran. Never edit a shipped one. */
export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    description: "sessions table",
    up(db) {
      db.exec(`
        CREATE TABLE sessions (
          key                TEXT PRIMARY KEY NOT NULL,
          backend            TEXT NOT NULL,
          backend_session_id TEXT NOT NULL,
          cwd                TEXT NOT NULL,
          turns              INTEGER NOT NULL DEFAULT 0,
          created_at         INTEGER NOT NULL,
          updated_at         INTEGER NOT NULL
        );
      `);
    },
  },
  {
    version: 2,
    description: "last_error, model, events history, list indexes",
    up(db) {
      db.exec(`
        ALTER TABLE sessions ADD COLUMN last_error TEXT;
        ALTER TABLE sessions ADD COLUMN model TEXT;
        CREATE INDEX sessions_updated ON sessions (updated_at DESC, key);
        CREATE INDEX sessions_backend_updated ON sessions (backend, updated_at DESC, key);
        CREATE TABLE events (
          id     INTEGER PRIMARY KEY AUTOINCREMENT,
          key    TEXT NOT NULL,
          at     INTEGER NOT NULL,
          kind   TEXT NOT NULL,
          reason TEXT
        );
        CREATE INDEX events_key ON events (key, id);
      `);
    },
  },
];

export interface SqliteSessionStoreOptions {
  synchronous?: SqliteSynchronous;
  busyTimeoutMs?: number;
  now?: () => number;
}

export interface SqliteStoreInfo {
  path: string;
  schemaVersion: number;
  journalMode: string;
  synchronous: SqliteSynchronous | "OFF" | "EXTRA";
  busyTimeoutMs: number;
}

interface EventRow {
  id: number;
  key: string;
  at: number;
  kind: string;
  reason: string | null;
}

function limitArg(limit: number | undefined): number {
  if (limit === undefined) return -1; // SQLite: no limit
  return requireCount(limit, "limit");
}

function readSchemaVersion(db: DB): number {
  const hasMeta = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'").get();
  if (!hasMeta) return 0;
  const row = db.prepare("SELECT value FROM meta WHERE key = 'schema_version'").get() as { value: string } | undefined;
  if (!row) return 0;
  const v = Number(row.value);
  if (!Number.isSafeInteger(v) || v < 0)
    throw new SessionStoreError(`meta.schema_version is not a version: "${row.value}"`);
  return v;
}

function migrate(db: DB, file: string): void {
  const check = (v: number): void => {
    if (v > SCHEMA_VERSION) {
      throw new SessionStoreError(
        `${file} has session schema version ${v}, newer than this clawbridge understands (${SCHEMA_VERSION}); upgrade clawbridge or use another data directory`,
      );
    }
  };
  const seen = readSchemaVersion(db);
  check(seen);
  if (seen === SCHEMA_VERSION) return;
  db.transaction(() => {
    const from = readSchemaVersion(db); // another process may have migrated meanwhile
    check(from);
    db.exec("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL)");
    for (const m of MIGRATIONS) {
      if (m.version <= from) continue;
      try {
        m.up(db);
      } catch (err) {
        throw new SessionStoreError(
          `${file}: migration to schema version ${m.version} (${m.description}) failed: ${(err as Error).message}`,
          { cause: err },
        );
      }
    }
    const set = db.prepare(
      "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
    );
    set.run("schema_version", String(SCHEMA_VERSION));
    if (from === 0) set.run("created_at", String(Date.now()));
  }).immediate();
}

/** SQLITE_BUSY and its extended codes (recovery, snapshot...), here or in an error's cause. */
function isBusy(err: unknown): boolean {
  for (let e: unknown = err, i = 0; e && typeof e === "object" && i < 3; e = (e as { cause?: unknown }).cause, i++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && code.startsWith("SQLITE_BUSY")) return true;
  }
  return false;
}

/** Block this thread for `ms` (only while opening: a pause before trying again). */
function sleepSync(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, Math.max(1, Math.round(ms)));
}

/** An error while opening, as a SessionStoreError that names the file. */
function openError(err: unknown, target: string): SessionStoreError {
  if (err instanceof SessionStoreError) return err;
  const code = (err as { code?: string }).code;
  const hint = code === "SQLITE_NOTADB" ? " (the file is not a SQLite database)" : "";
  return new SessionStoreError(`cannot open session store ${target}: ${(err as Error).message}${hint}`, { cause: err });
}

const SYNC_NAMES = ["OFF", "NORMAL", "FULL", "EXTRA"] as const;

export class SqliteSessionStore implements SessionStore {
  private closed = false;
  private readonly now: () => number;
  private readonly stmt;
  private readonly tx;
  /** `synchronous` switched for one bookkeeping commit (when the store runs FULL), then back. */
  private readonly light: { on: Database.Statement; off: Database.Statement } | undefined;

  private constructor(
    private readonly db: DB,
    readonly path: string,
    opts: SqliteSessionStoreOptions,
  ) {
    this.now = opts.now ?? Date.now;
    const s = {
      get: db.prepare<[string], SessionRow>("SELECT * FROM sessions WHERE key = ?"),
      sessionId: db.prepare<[string], { backend_session_id: string }>(
        "SELECT backend_session_id FROM sessions WHERE key = ?",
      ),
      upsert: db.prepare(`
        INSERT INTO sessions (key, backend, backend_session_id, cwd, turns, created_at, updated_at, last_error, model)
        VALUES (@key, @backend, @backendSessionId, @cwd, @turns, @createdAt, @updatedAt, @lastError, @model)
        ON CONFLICT(key) DO UPDATE SET
          backend = excluded.backend, backend_session_id = excluded.backend_session_id, cwd = excluded.cwd,
          turns = excluded.turns, created_at = excluded.created_at, updated_at = excluded.updated_at,
          last_error = excluded.last_error, model = excluded.model`),
      turn: db.prepare<[string, number, string]>(
        "UPDATE sessions SET turns = turns + 1, backend_session_id = ?, updated_at = ?, last_error = NULL WHERE key = ?",
      ),
      begin: db.prepare<[string, number, string]>("UPDATE sessions SET last_error = ?, updated_at = ? WHERE key = ?"),
      error: db.prepare<[string, number, string]>("UPDATE sessions SET last_error = ?, updated_at = ? WHERE key = ?"),
      delete: db.prepare<[string]>("DELETE FROM sessions WHERE key = ?"),
      listAll: db.prepare<[number], SessionRow>("SELECT * FROM sessions ORDER BY updated_at DESC, key LIMIT ?"),
      listBackend: db.prepare<[string, number], SessionRow>(
        "SELECT * FROM sessions WHERE backend = ? ORDER BY updated_at DESC, key LIMIT ?",
      ),
      addEvent: db.prepare<[string, number, string, string | null]>(
        "INSERT INTO events (key, at, kind, reason) VALUES (?, ?, ?, ?)",
      ),
      pruneEvents: db.prepare<[string, string, number]>(
        "DELETE FROM events WHERE key = ? AND id NOT IN (SELECT id FROM events WHERE key = ? ORDER BY id DESC LIMIT ?)",
      ),
      events: db.prepare<[string, number], EventRow>(
        "SELECT id, key, at, kind, reason FROM events WHERE key = ? ORDER BY id DESC LIMIT ?",
      ),
    };
    this.stmt = s;
    this.light =
      Number(db.pragma("synchronous", { simple: true })) === 2
        ? { on: db.prepare("PRAGMA synchronous = NORMAL"), off: db.prepare("PRAGMA synchronous = FULL") }
        : undefined;

    const event = (key: string, kind: string, reason: string | null): void => {
      s.addEvent.run(key, this.now(), kind, reason === null ? null : clip(reason));
      s.pruneEvents.run(key, key, MAX_EVENTS_PER_KEY);
    };
    this.tx = {
      event: db.transaction(event),
      put: db.transaction((b: SessionBinding) => {
        const prev = s.sessionId.get(b.key);
        s.upsert.run(b);
        if (!prev) event(b.key, "bound", `session ${b.backendSessionId} on ${b.backend}`);
        else if (prev.backend_session_id !== b.backendSessionId) {
          event(b.key, "rebound", `session ${prev.backend_session_id} -> ${b.backendSessionId} on ${b.backend}`);
        }
      }),
      turn: db.transaction((key: string, sessionId: string) => {
        const prev = s.sessionId.get(key);
        if (!prev) return;
        s.turn.run(sessionId, this.now(), key);
        if (prev.backend_session_id !== sessionId) {
          event(key, "rebound", `backend reported session ${sessionId} (was ${prev.backend_session_id})`);
        }
      }),
      error: db.transaction((key: string, message: string) => {
        const msg = clip(message);
        if (s.error.run(msg, this.now(), key).changes > 0) event(key, "error", msg);
      }),
      delete: db.transaction((key: string): boolean => {
        const removed = s.delete.run(key).changes > 0;
        if (removed) event(key, "deleted", null);
        return removed;
      }),
    };
  }

  /** Opens (creating directory 0700 and file 0600 when missing) and migrates the database. */
  static open(file: string, opts: SqliteSessionStoreOptions = {}): SqliteSessionStore {
    const memory = file === ":memory:";
    const target = memory ? file : path.resolve(file);
    const busyTimeoutMs = opts.busyTimeoutMs ?? DEFAULT_BUSY_TIMEOUT_MS;
    requireCount(busyTimeoutMs, "busyTimeoutMs");
    const synchronous = opts.synchronous ?? "FULL";
    if (synchronous !== "FULL" && synchronous !== "NORMAL") {
      throw new SessionStoreError(`synchronous must be "FULL" or "NORMAL", got "${String(synchronous)}"`);
    }
    if (!memory) {
      mkdirSync(path.dirname(target), { recursive: true, mode: 0o700 });
      // Create the file ourselves so it is 0600; SQLite gives -wal/-shm the same permissions.
      closeSync(openSync(target, "a", 0o600));
    }
    // Several processes opening a NEW file at once race to switch it to WAL: SQLite answers that
    // race with SQLITE_BUSY at once, without waiting in the busy handler (it would deadlock).
    // The loser opens again after a short, growing pause, within the busy timeout.
    const deadline = Date.now() + busyTimeoutMs;
    for (let attempt = 0; ; attempt++) {
      let db: DB | undefined;
      try {
        db = new Database(target, { timeout: busyTimeoutMs });
        db.pragma(`busy_timeout = ${busyTimeoutMs}`);
        if (!memory) {
          const mode = String(db.pragma("journal_mode = WAL", { simple: true }));
          if (mode.toLowerCase() !== "wal")
            throw new SessionStoreError(`could not switch ${target} to WAL (journal_mode=${mode})`);
        }
        db.pragma(`synchronous = ${synchronous}`);
        db.pragma("trusted_schema = OFF");
        migrate(db, target);
        return new SqliteSessionStore(db, target, opts);
      } catch (err) {
        db?.close();
        if (isBusy(err) && Date.now() < deadline) {
          sleepSync(Math.min(100, 5 * 2 ** attempt) * (0.5 + Math.random()));
          continue;
        }
        throw openError(err, target);
      }
    }
  }

  private live(): void {
    if (this.closed) throw new SessionStoreError("session store is closed");
  }

  async get(key: string): Promise<SessionBinding | undefined> {
    this.live();
    const row = this.stmt.get.get(requireText(key, "key"));
    return row ? rowToBinding(row) : undefined;
  }

  async put(binding: SessionBinding): Promise<void> {
    this.live();
    this.tx.put.immediate(validateBinding(binding));
  }

  async beginTurn(key: string, marker: string): Promise<void> {
    this.live();
    const k = requireText(key, "key");
    if (typeof marker !== "string") throw new SessionStoreError("marker must be a string");
    this.bookkeeping(() => this.stmt.begin.run(clip(marker), this.now(), k));
  }

  async recordTurn(key: string, backendSessionId: string): Promise<void> {
    this.live();
    const k = requireText(key, "key");
    const id = requireText(backendSessionId, "backendSessionId");
    // The same session: bookkeeping. Another one (a rebinding): as durable as every binding.
    if (this.stmt.sessionId.get(k)?.backend_session_id === id) this.bookkeeping(() => this.tx.turn.immediate(k, id));
    else this.tx.turn.immediate(k, id);
  }

  /** One commit of turn bookkeeping, without waiting for the disk (see the top of this file). */
  private bookkeeping(write: () => unknown): void {
    if (!this.light) {
      write();
      return;
    }
    this.light.on.run();
    try {
      write();
    } finally {
      this.light.off.run();
    }
  }

  async recordError(key: string, message: string): Promise<void> {
    this.live();
    if (typeof message !== "string") throw new SessionStoreError("message must be a string");
    this.tx.error.immediate(requireText(key, "key"), message);
  }

  async delete(key: string): Promise<boolean> {
    this.live();
    return this.tx.delete.immediate(requireText(key, "key"));
  }

  async list(opts: ListOptions = {}): Promise<SessionBinding[]> {
    this.live();
    const limit = limitArg(opts.limit);
    const rows =
      opts.backend === undefined
        ? this.stmt.listAll.all(limit)
        : this.stmt.listBackend.all(requireText(opts.backend, "backend"), limit);
    return rows.map(rowToBinding);
  }

  async appendEvent(key: string, kind: SessionEventKind, reason?: string | null): Promise<void> {
    this.live();
    this.tx.event.immediate(requireText(key, "key"), requireText(kind, "kind", 64), optionalText(reason, "reason"));
  }

  async listEvents(key: string, opts: { limit?: number } = {}): Promise<SessionEvent[]> {
    this.live();
    return this.stmt.events.all(requireText(key, "key"), limitArg(opts.limit));
  }

  /** `["ok"]` when the file is sound; otherwise SQLite's list of problems. */
  async integrityCheck(): Promise<string[]> {
    this.live();
    return (this.db.pragma("integrity_check") as Array<{ integrity_check: string }>).map((r) => r.integrity_check);
  }

  /** Effective settings (for health output and tests). */
  async info(): Promise<SqliteStoreInfo> {
    this.live();
    const sync = Number(this.db.pragma("synchronous", { simple: true }));
    return {
      path: this.path,
      schemaVersion: readSchemaVersion(this.db),
      journalMode: String(this.db.pragma("journal_mode", { simple: true })),
      synchronous: SYNC_NAMES[sync] ?? "FULL",
      busyTimeoutMs: Number(this.db.pragma("busy_timeout", { simple: true })),
    };
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.db.close();
  }
}
