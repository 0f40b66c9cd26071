/**
 * The PostgreSQL schema, as plain numbered SQL: each migration runs once, in order, inside the one
 * transaction `migratePostgres` (src/core/db/postgres.ts) opens at start. Never edit a shipped
 * one; add the next number. No `?` in this SQL (the engine numbers `?` placeholders).
 *
 * Types: times are BIGINT epoch milliseconds, JSON is TEXT (as in the SQLite files), so every store
 * writes one SQL for both engines.
 */
export interface PgMigration {
  version: number;
  name: string;
  sql: string;
}

export const PG_MIGRATIONS: readonly PgMigration[] = [
  {
    version: 1,
    name: "sessions: conversation bindings and their history",
    sql: `
      CREATE TABLE sessions (
        key                TEXT PRIMARY KEY NOT NULL,
        backend            TEXT NOT NULL,
        backend_session_id TEXT NOT NULL,
        cwd                TEXT NOT NULL,
        turns              BIGINT NOT NULL DEFAULT 0,
        created_at         BIGINT NOT NULL,
        updated_at         BIGINT NOT NULL,
        last_error         TEXT,
        model              TEXT
      );
      CREATE INDEX sessions_updated ON sessions (updated_at DESC, key);
      CREATE INDEX sessions_backend_updated ON sessions (backend, updated_at DESC, key);
      CREATE TABLE session_events (
        id     BIGSERIAL PRIMARY KEY,
        key    TEXT NOT NULL,
        at     BIGINT NOT NULL,
        kind   TEXT NOT NULL,
        reason TEXT
      );
      CREATE INDEX session_events_key ON session_events (key, id);
    `,
  },
  // 2: the event log (cross-instance events, Last-Event-ID replay)
  // 3: runs, steps, approvals, run leases
  // 4: system versions, trigger state, hook replay guard
  {
    version: 5,
    name: "canvases and their versions, conversation states",
    sql: `
      CREATE TABLE canvases (
        system     TEXT PRIMARY KEY NOT NULL,
        state      TEXT NOT NULL,
        status     TEXT NOT NULL DEFAULT 'draft',
        version    BIGINT NOT NULL DEFAULT 0,
        updated_at BIGINT NOT NULL
      );
      CREATE TABLE canvas_versions (
        system     TEXT NOT NULL,
        version    BIGINT NOT NULL,
        state      TEXT NOT NULL,
        reason     TEXT NOT NULL DEFAULT '',
        created_at BIGINT NOT NULL,
        PRIMARY KEY (system, version)
      );
      CREATE TABLE conversation_state (
        conversation TEXT PRIMARY KEY NOT NULL,
        state        TEXT NOT NULL,
        engine       TEXT NOT NULL,
        question     TEXT,
        canvas       TEXT,
        updated_at   BIGINT NOT NULL
      );
      CREATE INDEX conversation_state_open ON conversation_state (updated_at DESC) WHERE question IS NOT NULL;
    `,
  },
  {
    version: 6,
    name: "the limit book, usage per backend per day, the Responses API's stored responses",
    sql: `
      CREATE TABLE backend_limits (
        backend  TEXT PRIMARY KEY NOT NULL,
        until    BIGINT NOT NULL,
        reset_at BIGINT,
        message  TEXT NOT NULL,
        since    BIGINT NOT NULL
      );
      CREATE TABLE usage (
        day                TEXT NOT NULL,
        backend            TEXT NOT NULL,
        turns              BIGINT NOT NULL DEFAULT 0,
        failed             BIGINT NOT NULL DEFAULT 0,
        tokens_in          BIGINT NOT NULL DEFAULT 0,
        tokens_out         BIGINT NOT NULL DEFAULT 0,
        limit_hits         BIGINT NOT NULL DEFAULT 0,
        fallbacks          BIGINT NOT NULL DEFAULT 0,
        last_limit_message TEXT,
        last_limit_at      BIGINT,
        reset_at           BIGINT,
        PRIMARY KEY (day, backend)
      );
      CREATE TABLE responses (
        seq          BIGSERIAL PRIMARY KEY,
        id           TEXT NOT NULL UNIQUE,
        previous_id  TEXT,
        root         TEXT NOT NULL,
        conversation TEXT NOT NULL,
        created_at   BIGINT NOT NULL,
        used_at      BIGINT NOT NULL,
        messages     TEXT NOT NULL,
        input        TEXT NOT NULL,
        body         TEXT NOT NULL
      );
      CREATE INDEX responses_root ON responses (root);
      CREATE INDEX responses_used ON responses (used_at, seq);
    `,
  },
  {
    version: 7,
    name: "instances: the bridges on this database, their heartbeat and clock",
    sql: `
      CREATE TABLE clawbridge_instances (
        id         TEXT PRIMARY KEY NOT NULL,
        host       TEXT NOT NULL,
        pid        BIGINT NOT NULL,
        version    TEXT NOT NULL,
        started_at BIGINT NOT NULL,
        seen_at    BIGINT NOT NULL,
        skew_ms    BIGINT NOT NULL
      );
    `,
  },
];
