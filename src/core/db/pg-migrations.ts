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
  // 3: runs, steps, approvals, system versions, trigger state, leases
  // 4: canvases, conversation states, the limit book, usage, responses
];
