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
  {
    version: 2,
    name: "the event log: every instance's events under one sequence of ids (src/ops/cluster-events)",
    // events_log_append takes a batch of one instance's events (arrays of the same length, in order)
    // under a table lock, so ids are committed in id order: whoever reads the rows after an id it
    // has seen and finds a newer one has all those before it (a rolled-back append leaves a hole
    // that never fills). At commit NOTIFY clawbridge_events says `after` (the newest id before the
    // batch) and the batch's rows `[id, at, type, conversation, run_id, system, body]`, or only its
    // `last` id when that would pass NOTIFY's 8000 bytes (then listeners read the rows).
    sql: `
      CREATE TABLE events_log (
        id           BIGSERIAL PRIMARY KEY,
        at           BIGINT NOT NULL,
        instance     TEXT NOT NULL,
        type         TEXT NOT NULL,
        conversation TEXT,
        run_id       TEXT,
        system       TEXT,
        body         TEXT NOT NULL
      );
      CREATE FUNCTION events_log_append(
        p_instance TEXT, p_at BIGINT[], p_type TEXT[], p_conversation TEXT[], p_run_id TEXT[],
        p_system TEXT[], p_body TEXT[]
      ) RETURNS BIGINT LANGUAGE plpgsql AS $$
      DECLARE
        prev BIGINT;
        last_id BIGINT;
        rows_json TEXT := '';
        head TEXT;
      BEGIN
        LOCK TABLE events_log IN EXCLUSIVE MODE;
        SELECT coalesce(max(id), 0) INTO prev FROM events_log;
        FOR i IN 1 .. coalesce(array_length(p_type, 1), 0) LOOP
          INSERT INTO events_log (at, instance, type, conversation, run_id, system, body)
          VALUES (p_at[i], p_instance, p_type[i], p_conversation[i], p_run_id[i], p_system[i], p_body[i])
          RETURNING id INTO last_id;
          IF octet_length(rows_json) < 8000 THEN
            rows_json := rows_json || CASE WHEN i > 1 THEN ',' ELSE '' END || json_build_array(
              last_id, p_at[i], p_type[i], p_conversation[i], p_run_id[i], p_system[i], p_body[i])::text;
          END IF;
        END LOOP;
        IF last_id IS NOT NULL THEN
          head := '{"after":' || prev || ',"last":' || last_id;
          IF octet_length(head) + octet_length(rows_json) + 12 < 8000 THEN
            PERFORM pg_notify('clawbridge_events', head || ',"rows":[' || rows_json || ']}');
          ELSE
            PERFORM pg_notify('clawbridge_events', head || '}');
          END IF;
        END IF;
        RETURN last_id;
      END
      $$;
    `,
  },
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
  {
    version: 4,
    name: "system versions, schedules' state (a due time is claimed by moving since), hook replay guard",
    sql: `
      CREATE TABLE system_versions (
        system     TEXT NOT NULL,
        number     BIGINT NOT NULL,
        created_at BIGINT NOT NULL,
        source     TEXT NOT NULL,
        made_by    TEXT NOT NULL,
        note       TEXT NOT NULL DEFAULT '',
        hash       TEXT NOT NULL,
        definition TEXT NOT NULL,
        compiled   TEXT NOT NULL,
        canvas     TEXT,
        files      TEXT NOT NULL,
        PRIMARY KEY (system, number)
      );
      CREATE TABLE trigger_state (
        system      TEXT NOT NULL,
        idx         BIGINT NOT NULL,
        spec        TEXT NOT NULL,
        since       BIGINT NOT NULL,
        last_run_at BIGINT,
        last_run_id TEXT,
        PRIMARY KEY (system, idx)
      );
      CREATE TABLE hook_seen (
        system    TEXT NOT NULL,
        signature TEXT NOT NULL,
        at        BIGINT NOT NULL,
        PRIMARY KEY (system, signature)
      );
      CREATE INDEX hook_seen_at ON hook_seen (at);
    `,
  },
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
