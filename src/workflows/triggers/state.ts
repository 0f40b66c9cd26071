/**
 * What the trigger room keeps in `<dataDir>/systems.db` (its own tables): per schedule
 * (`trigger_state`, keyed by system and index) the expression it counts from (`spec`: cron and time
 * zone; a changed one starts afresh), the time from which its next run is counted (`since`), and
 * its last run; per hook, the signatures seen in the last minutes (`hook_seen`), so a replay is
 * refused after a restart too.
 */
import type Database from "better-sqlite3";

export interface ScheduleState {
  /** `<cron>|<timezone>`: the schedule this state belongs to. */
  spec: string;
  /** The next run is the schedule's first time after this (ms since the epoch). */
  since: number;
  lastRunAt?: number;
  lastRunId?: string;
}

export class TriggerState {
  private readonly stmts;

  constructor(db: Database.Database) {
    db.exec(`CREATE TABLE IF NOT EXISTS trigger_state (
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
);`);
    this.stmts = {
      get: db.prepare(`SELECT * FROM trigger_state WHERE system = ? AND idx = ?`),
      reset: db.prepare(
        `INSERT OR REPLACE INTO trigger_state (system, idx, spec, since, last_run_at, last_run_id) VALUES (?, ?, ?, ?, NULL, NULL)`,
      ),
      advance: db.prepare(`UPDATE trigger_state SET since = ? WHERE system = ? AND idx = ?`),
      fired: db.prepare(
        `UPDATE trigger_state SET since = @at, last_run_at = @at, last_run_id = @run WHERE system = @system AND idx = @idx`,
      ),
      all: db.prepare(`SELECT system, idx FROM trigger_state`),
      drop: db.prepare(`DELETE FROM trigger_state WHERE system = ? AND idx = ?`),
      seen: db.prepare(`INSERT OR IGNORE INTO hook_seen (system, signature, at) VALUES (?, ?, ?)`),
      forget: db.prepare(`DELETE FROM hook_seen WHERE at < ?`),
    };
  }

  get(system: string, idx: number): ScheduleState | undefined {
    const r = this.stmts.get.get(system, idx) as Record<string, unknown> | undefined;
    if (!r) return undefined;
    return {
      spec: String(r.spec),
      since: Number(r.since),
      ...(typeof r.last_run_at === "number" ? { lastRunAt: r.last_run_at } : {}),
      ...(typeof r.last_run_id === "string" ? { lastRunId: r.last_run_id } : {}),
    };
  }

  /** A schedule seen for the first time (or changed): it counts from `since`, with no run yet. */
  reset(system: string, idx: number, spec: string, since: number): void {
    this.stmts.reset.run(system, idx, spec, since);
  }

  /** Counts from `since` on without a run (a missed time skipped). */
  advance(system: string, idx: number, since: number): void {
    this.stmts.advance.run(since, system, idx);
  }

  fired(system: string, idx: number, at: number, run: string): void {
    this.stmts.fired.run({ system, idx, at, run });
  }

  /** Forget the schedules not in `present` (`<system>|<index>`): one added again later starts afresh. */
  prune(present: ReadonlySet<string>): void {
    for (const r of this.stmts.all.all() as Array<{ system: string; idx: number }>)
      if (!present.has(`${r.system}|${r.idx}`)) this.stmts.drop.run(r.system, r.idx);
  }

  /**
   * Note a hook request's signature; false when it was seen already (a replay). Signatures older
   * than `forgetBefore` are dropped first (their timestamps are refused anyway).
   */
  firstSeen(system: string, signature: string, now: number, forgetBefore: number): boolean {
    this.stmts.forget.run(forgetBefore);
    return this.stmts.seen.run(system, signature, now).changes === 1;
  }
}
