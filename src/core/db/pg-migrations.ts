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
  {
    version: 3,
    name: "runs, their steps and approvals; a run's owner and lease (runs are claimed, not owned)",
    sql: `
      CREATE TABLE runs (
        id          TEXT PRIMARY KEY NOT NULL,
        seq         BIGSERIAL NOT NULL,
        system      TEXT NOT NULL,
        conversation TEXT,
        status      TEXT NOT NULL,
        inputs      TEXT NOT NULL,
        output      TEXT,
        error       TEXT,
        failed_step TEXT,
        origin      TEXT NOT NULL,
        message_key TEXT,
        created_at  BIGINT NOT NULL,
        started_at  BIGINT,
        ended_at    BIGINT,
        updated_at  BIGINT NOT NULL,
        detached    INTEGER NOT NULL DEFAULT 0,
        reported    INTEGER NOT NULL DEFAULT 0,
        test        INTEGER NOT NULL DEFAULT 0,
        trigger     TEXT,
        version     INTEGER,
        owner       TEXT,
        lease_until BIGINT
      );
      CREATE INDEX runs_conversation ON runs (conversation, created_at);
      CREATE INDEX runs_status ON runs (status);
      CREATE INDEX runs_created ON runs (created_at DESC, seq DESC);
      CREATE INDEX runs_owner ON runs (owner) WHERE status IN ('pending', 'running');
      CREATE INDEX runs_lease ON runs (lease_until) WHERE status IN ('pending', 'running');
      CREATE TABLE run_steps (
        run_id     TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        step_id    TEXT NOT NULL,
        position   INTEGER NOT NULL,
        status     TEXT NOT NULL,
        attempts   INTEGER NOT NULL DEFAULT 0,
        started_at BIGINT,
        ended_at   BIGINT,
        output     TEXT,
        error      TEXT,
        PRIMARY KEY (run_id, step_id)
      );
      CREATE TABLE approvals (
        run_id     TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        step       TEXT NOT NULL,
        question   TEXT NOT NULL,
        shown      TEXT,
        created_at BIGINT NOT NULL,
        deadline   BIGINT,
        on_timeout TEXT NOT NULL,
        decision   TEXT,
        decided_by TEXT,
        decided_at BIGINT,
        note       TEXT,
        PRIMARY KEY (run_id, step)
      );
    `,
  },
  // 4: system versions, trigger state, hook replay guard
  // 5: canvases, conversation states
  // 6: the limit book, usage, responses
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
