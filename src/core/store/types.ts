/**
 * The durable session store contract, and the validation every implementation applies. In "resume"
 * mode a CLI agent keeps its own conversation; the bridge maps each conversation key to the
 * backend's session id (and the cwd that session lives in) and forwards only what is new each turn.
 *
 * Every method is async: the embedded SQLite store (sqlite.ts) and the PostgreSQL one that several
 * bridges share (postgres-sessions.ts) keep the same contract (test/unit/store.test.ts runs on both).
 */
import path from "node:path";
import type { PostgresDb } from "../db/postgres.js";

export interface SessionBinding {
  /** Conversation key. */
  key: string;
  /** Backend name from the configuration. */
  backend: string;
  /** Session id confirmed by the backend. */
  backendSessionId: string;
  /** Working directory of this conversation (resume is tied to cwd). */
  cwd: string;
  /** Completed turns on this binding. */
  turns: number;
  /** Epoch milliseconds. */
  createdAt: number;
  /** Epoch milliseconds. */
  updatedAt: number;
  lastError?: string | null;
  model?: string | null;
}

/**
 * Kinds written by the store itself: "bound" (first put for a key), "rebound" (put or recordTurn
 * with a different backend session id), "error" (recordError), "deleted" (delete), "imported"
 * (JSON import). The pipeline adds its own, e.g. "healed" or "reset".
 */
export type SessionEventKind =
  | "bound"
  | "rebound"
  | "error"
  | "deleted"
  | "imported"
  | "healed"
  | "reset"
  | (string & {});

export interface SessionEvent {
  /** Increasing per store; orders events of one key. */
  id: number;
  key: string;
  /** Epoch milliseconds. */
  at: number;
  kind: SessionEventKind;
  reason: string | null;
}

export interface ListOptions {
  /** Most this many (non-negative integer); omitted = all. */
  limit?: number;
  /** Only bindings of this backend. */
  backend?: string;
}

export interface SessionStore {
  get(key: string): Promise<SessionBinding | undefined>;
  /** Write/replace a binding; only called after the backend confirmed the session id. */
  put(binding: SessionBinding): Promise<void>;
  /**
   * A turn of the bound conversation starts: lastError = `marker` (the pipeline's `in-progress
   * <hash of the message>`), updatedAt = now. No-op when the key is not bound. Turn bookkeeping
   * (with `recordTurn`): it must be on disk before the backend is given the message, but it holds
   * nothing the person made, so an implementation may make it survive a crash of the bridge only
   * (not of the machine) — see sqlite.ts.
   */
  beginTurn(key: string, marker: string): Promise<void>;
  /**
   * Record a finished turn: turns+1, updatedAt=now, lastError cleared, backendSessionId set to the
   * one given (a "rebound" event is recorded when it changed). No-op when the key is not bound.
   */
  recordTurn(key: string, backendSessionId: string): Promise<void>;
  /** Set lastError (and updatedAt); records an "error" event. No-op when the key is not bound. */
  recordError(key: string, message: string): Promise<void>;
  /** True when a binding was removed. Its events are kept. */
  delete(key: string): Promise<boolean>;
  /** Most recently updated first. */
  list(opts?: ListOptions): Promise<SessionBinding[]>;
  /** Append to the key's bounded event history (newest kept, see MAX_EVENTS_PER_KEY). */
  appendEvent(key: string, kind: SessionEventKind, reason?: string | null): Promise<void>;
  /** Newest first. */
  listEvents(key: string, opts?: { limit?: number }): Promise<SessionEvent[]>;
  /** Idempotent. Every other method rejects after close. */
  close(): Promise<void>;
}

/** Events kept per key; older ones are pruned on append. */
export const MAX_EVENTS_PER_KEY = 50;
/** Longest lastError / event reason stored (longer ones are cut, marked with "…"). */
export const MAX_MESSAGE_CHARS = 2000;

export type SqliteSynchronous = "NORMAL" | "FULL";

export type SessionStoreConfig =
  | {
      kind: "sqlite";
      /** Database file, normally `<dataDir>/sessions.db`. Its directory is created with mode 0700. */
      path: string;
      /** Default "FULL" (see src/core/store/sqlite.ts for why). */
      synchronous?: SqliteSynchronous;
      /** How long a write waits for another process's lock before failing; default 5000. */
      busyTimeoutMs?: number;
      /** Clock (epoch ms) for updatedAt/event times; default Date.now. */
      now?: () => number;
    }
  | {
      kind: "memory";
      now?: () => number;
    }
  | {
      /** The tables `sessions` / `session_events` of the store backing's database (src/core/store/postgres-sessions.ts). */
      kind: "postgres";
      /** Owned by the backing: closing the store leaves it open. */
      db: PostgresDb;
      now?: () => number;
    };

const MAX_KEY_CHARS = 4096;

/** Thrown for invalid bindings and arguments. */
export class SessionStoreError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "SessionStoreError";
  }
}

/** Cuts a message to MAX_MESSAGE_CHARS. */
export function clip(s: string): string {
  return s.length > MAX_MESSAGE_CHARS ? `${s.slice(0, MAX_MESSAGE_CHARS - 1)}…` : s;
}

/** A non-empty string without NUL, at most `max` characters. */
export function requireText(value: unknown, field: string, max = MAX_KEY_CHARS): string {
  if (typeof value !== "string" || value.length === 0) {
    throw new SessionStoreError(`${field} must be a non-empty string`);
  }
  if (value.length > max) throw new SessionStoreError(`${field} is longer than ${max} characters`);
  if (value.includes("\0")) throw new SessionStoreError(`${field} contains a NUL character`);
  return value;
}

/** A non-negative safe integer. */
export function requireCount(value: unknown, field: string): number {
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < 0) {
    throw new SessionStoreError(`${field} must be a non-negative integer`);
  }
  return value;
}

/** A string, or null/undefined (returned as null). */
export function optionalText(value: unknown, field: string): string | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== "string") throw new SessionStoreError(`${field} must be a string or null`);
  return value;
}

/** Checks a binding before it is written; returns a normalised copy. */
export function validateBinding(b: SessionBinding): SessionBinding {
  if (typeof b !== "object" || b === null) throw new SessionStoreError("binding must be an object");
  const cwd = requireText(b.cwd, "cwd");
  if (!path.isAbsolute(cwd)) throw new SessionStoreError(`cwd must be an absolute path, got "${cwd}"`);
  const lastError = optionalText(b.lastError, "lastError");
  return {
    key: requireText(b.key, "key"),
    backend: requireText(b.backend, "backend"),
    backendSessionId: requireText(b.backendSessionId, "backendSessionId"),
    cwd,
    turns: requireCount(b.turns, "turns"),
    createdAt: requireCount(b.createdAt, "createdAt"),
    updatedAt: requireCount(b.updatedAt, "updatedAt"),
    lastError: lastError === null ? null : clip(lastError),
    model: optionalText(b.model, "model"),
  };
}

/** A `sessions` row as both engines store it (src/core/store/sqlite.ts, postgres-sessions.ts). */
export interface SessionRow {
  key: string;
  backend: string;
  backend_session_id: string;
  cwd: string;
  turns: number;
  created_at: number;
  updated_at: number;
  last_error: string | null;
  model: string | null;
}

/** A `sessions` row as a binding. */
export function rowToBinding(r: SessionRow): SessionBinding {
  return {
    key: r.key,
    backend: r.backend,
    backendSessionId: r.backend_session_id,
    cwd: r.cwd,
    turns: r.turns,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
    lastError: r.last_error,
    model: r.model,
  };
}
