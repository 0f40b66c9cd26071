/**
 * Session store factory. The real default is SQLite at `<dataDir>/sessions.db`; "memory" is an
 * in-memory SQLite database (same code, same semantics, nothing on disk) for tests of other parts;
 * "postgres" is the tables of the store backing's PostgreSQL, shared by every bridge on it.
 */
import path from "node:path";
import type { StoreBacking } from "../db/backing.js";
import { PgSessionStore } from "./postgres-sessions.js";
import { SESSION_DB_FILENAME, SqliteSessionStore } from "./sqlite.js";
import type { SessionStore, SessionStoreConfig } from "./types.js";

export * from "./types.js";
export { PgSessionStore, type PgSessionStoreOptions } from "./postgres-sessions.js";
export {
  MIGRATIONS,
  SCHEMA_VERSION,
  SESSION_DB_FILENAME,
  SqliteSessionStore,
  type Migration,
  type SqliteSessionStoreOptions,
  type SqliteStoreInfo,
} from "./sqlite.js";
export {
  EXPORT_FORMAT,
  exportSessionsJson,
  importSessionsJson,
  parseSessionsJson,
  SessionImportError,
  writeFileAtomic,
  type ImportOptions,
  type ImportResult,
  type ImportSkip,
  type ParsedSessions,
  type SessionImportErrorCode,
} from "./json-import.js";

/** `<dataDir>/sessions.db` */
export function defaultSessionStorePath(dataDir: string): string {
  return path.join(dataDir, SESSION_DB_FILENAME);
}

/** The session store of a store backing: `<dataDir>/sessions.db`, or the backing's PostgreSQL. */
export function sessionStoreOn(backing: StoreBacking): SessionStoreConfig {
  return backing.kind === "postgres"
    ? { kind: "postgres", db: backing.db }
    : { kind: "sqlite", path: defaultSessionStorePath(backing.dataDir) };
}

export async function openSessionStore(cfg: SessionStoreConfig): Promise<SessionStore> {
  switch (cfg.kind) {
    case "sqlite":
      return SqliteSessionStore.open(cfg.path, {
        synchronous: cfg.synchronous,
        busyTimeoutMs: cfg.busyTimeoutMs,
        now: cfg.now,
      });
    case "memory":
      return SqliteSessionStore.open(":memory:", { now: cfg.now });
    case "postgres":
      return new PgSessionStore(cfg.db, { now: cfg.now });
    default: {
      const kind: never = cfg;
      throw new Error(`unknown session store kind: ${JSON.stringify((kind as { kind?: unknown }).kind)}`);
    }
  }
}
