/**
 * What the trigger room keeps in the systems' store (its own tables in systems.db, or in the
 * PostgreSQL every instance shares): per schedule (`trigger_state`, keyed by system and index) the
 * expression it counts from (`spec`: cron and time zone; a changed one starts afresh), the time
 * from which its next run is counted (`since`), and its last run; per hook, the signatures seen in
 * the last minutes (`hook_seen`), so a replay is refused after a restart, and by every instance.
 *
 * A due time is taken by `claim`: one conditional UPDATE moves `since` past it, and only the
 * caller whose UPDATE changed the row fires it. Every instance checks the same schedules; each due
 * time starts one run in the whole cluster (and one with two processes on one SQLite file).
 */
import { type Sql, SqliteSql } from "../../core/db/sql.js";

export interface ScheduleState {
  /** `<cron>|<timezone>`: the schedule this state belongs to. */
  spec: string;
  /** The next run is the schedule's first time after this (ms since the epoch). */
  since: number;
  lastRunAt?: number;
  lastRunId?: string;
}

/** SQLite's tables (PostgreSQL's are made by its migrations, src/core/db/pg-migrations.ts). */
const SQLITE_SCHEMA = `CREATE TABLE IF NOT EXISTS trigger_state (
  system TEXT NOT NULL,
  idx INTEGER NOT NULL,
  spec TEXT NOT NULL,
  since INTEGER NOT NULL,
  last_run_at INTEGER,
  last_run_id TEXT,
  PRIMARY KEY (system, idx)
);
CREATE TABLE IF NOT EXISTS hook_seen (
  system TEXT NOT NULL,
  signature TEXT NOT NULL,
  at INTEGER NOT NULL,
  PRIMARY KEY (system, signature)
);`;

export class TriggerState {
  constructor(private readonly sql: Sql) {
    if (sql instanceof SqliteSql) sql.db.exec(SQLITE_SCHEMA);
  }

  async get(system: string, idx: number): Promise<ScheduleState | undefined> {
    const r = await this.sql.get<Record<string, unknown>>("SELECT * FROM trigger_state WHERE system = ? AND idx = ?", [
      system,
      idx,
    ]);
    if (!r) return undefined;
    return {
      spec: String(r.spec),
      since: Number(r.since),
      ...(r.last_run_at !== null && r.last_run_at !== undefined ? { lastRunAt: Number(r.last_run_at) } : {}),
      ...(typeof r.last_run_id === "string" ? { lastRunId: r.last_run_id } : {}),
    };
  }

  /**
   * A schedule seen for the first time (or changed): it counts from `since`, with no run yet. A
   * state of the same `spec` (another instance made it meanwhile) is kept.
   */
  async reset(system: string, idx: number, spec: string, since: number): Promise<void> {
    await this.sql.run(
      `INSERT INTO trigger_state (system, idx, spec, since, last_run_at, last_run_id) VALUES (?, ?, ?, ?, NULL, NULL)
       ON CONFLICT (system, idx) DO UPDATE SET spec = excluded.spec, since = excluded.since, last_run_at = NULL, last_run_id = NULL
       WHERE trigger_state.spec <> excluded.spec`,
      [system, idx, spec, since],
    );
  }

  /**
   * Take the time `due` of the schedule `spec`: it counts from `since` on. True for the one caller
   * that moved it (this one fires, or skips, that time); false when another instance (or check)
   * took it first, or the schedule changed meanwhile.
   */
  async claim(system: string, idx: number, spec: string, due: number, since: number): Promise<boolean> {
    const r = await this.sql.run(
      "UPDATE trigger_state SET since = ? WHERE system = ? AND idx = ? AND spec = ? AND since < ?",
      [since, system, idx, spec, due],
    );
    return r.changes === 1;
  }

  /** The run a claimed time started. */
  async fired(system: string, idx: number, at: number, run: string): Promise<void> {
    await this.sql.run("UPDATE trigger_state SET last_run_at = ?, last_run_id = ? WHERE system = ? AND idx = ?", [
      at,
      run,
      system,
      idx,
    ]);
  }

  /** Forget the schedules not in `present` (`<system>|<index>`): one added again later starts afresh. */
  async prune(present: ReadonlySet<string>): Promise<void> {
    for (const r of await this.sql.all<{ system: string; idx: number }>("SELECT system, idx FROM trigger_state"))
      if (!present.has(`${r.system}|${Number(r.idx)}`))
        await this.sql.run("DELETE FROM trigger_state WHERE system = ? AND idx = ?", [r.system, r.idx]);
  }

  /**
   * Note a hook request's signature; false when it was seen already (a replay, on any instance).
   * Signatures older than `forgetBefore` are dropped first (their timestamps are refused anyway).
   */
  async firstSeen(system: string, signature: string, now: number, forgetBefore: number): Promise<boolean> {
    await this.sql.run("DELETE FROM hook_seen WHERE at < ?", [forgetBefore]);
    const r = await this.sql.run(
      "INSERT INTO hook_seen (system, signature, at) VALUES (?, ?, ?) ON CONFLICT (system, signature) DO NOTHING",
      [system, signature, now],
    );
    return r.changes === 1;
  }
}
