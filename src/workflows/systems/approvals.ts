/**
 * Where a run's approvals are kept: the `approvals` table of systems.db (created by `openSystemsDb`),
 * one row per approval step of a run (`<step>/<its step>` inside a system used by a step): the
 * question and the data shown, its deadline and what happens then, and the decision — taken once
 * (`decide` changes only an undecided row, so a second decision, or a timeout racing a person,
 * finds nothing). Written once against the async `Sql` (SQLite or PostgreSQL, migration 3). The run manager (runner.ts) writes it; the run store reads a run's open one.
 * Like every write of the run store, the question and the data shown are written with secrets' values
 * replaced (`[secret NAME]`). `ApprovalDeadlines` keeps the timers of their `timeoutSeconds`.
 */
import type { Sql } from "../../core/db/sql.js";
import { secretRedactor } from "../../core/secrets/redactor.js";

export const APPROVALS_SCHEMA = `
CREATE TABLE IF NOT EXISTS approvals (
  run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  step TEXT NOT NULL,
  question TEXT NOT NULL,
  shown TEXT,
  created_at INTEGER NOT NULL,
  deadline INTEGER,
  on_timeout TEXT NOT NULL,
  decision TEXT,
  decided_by TEXT,
  decided_at INTEGER,
  note TEXT,
  PRIMARY KEY (run_id, step)
);
`;

export type OnTimeout = "approve" | "reject";

export interface Decision {
  decision: "approved" | "rejected";
  /** Who: `http` (the API, the dashboard, the command line), `chat`, or `timeout`. */
  by: string;
  at: number;
  note?: string;
}

export interface ApprovalRecord {
  runId: string;
  step: string;
  question: string;
  /** The data shown with the question. */
  shown: unknown;
  createdAt: number;
  /** When `onTimeout` applies (ms since the epoch); none: it waits for ever. */
  deadline?: number;
  onTimeout: OnTimeout;
  decided?: Decision;
}

/** A row of the table as a record (the run store reads a run's open approval with it). */
export function approvalOf(row: unknown): ApprovalRecord | undefined {
  if (!row) return undefined;
  const r = row as Record<string, unknown>;
  return {
    runId: String(r.run_id),
    step: String(r.step),
    question: String(r.question),
    shown: typeof r.shown === "string" ? (JSON.parse(r.shown) as unknown) : undefined,
    createdAt: Number(r.created_at),
    ...(typeof r.deadline === "number" ? { deadline: r.deadline } : {}),
    onTimeout: r.on_timeout === "approve" ? "approve" : "reject",
    ...(typeof r.decision === "string"
      ? {
          decided: {
            decision: r.decision === "approved" ? "approved" : "rejected",
            by: String(r.decided_by),
            at: Number(r.decided_at),
            ...(typeof r.note === "string" ? { note: r.note } : {}),
          },
        }
      : {}),
  };
}

export class ApprovalStore {
  constructor(private readonly sql: Sql) {}

  /** Write the question of a step (kept as first written when the step asks again). */
  async request(a: Omit<ApprovalRecord, "decided">): Promise<ApprovalRecord> {
    // Secrets' values never written (the data shown is what the run's steps returned).
    await this.sql.run(
      `INSERT INTO approvals (run_id, step, question, shown, created_at, deadline, on_timeout)
       VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (run_id, step) DO NOTHING`,
      [
        a.runId,
        a.step,
        secretRedactor.text(a.question),
        a.shown === undefined ? null : JSON.stringify(secretRedactor.value(a.shown)),
        a.createdAt,
        a.deadline ?? null,
        a.onTimeout,
      ],
    );
    return (await this.get(a.runId, a.step))!;
  }

  async get(runId: string, step: string): Promise<ApprovalRecord | undefined> {
    return approvalOf(await this.sql.get(`SELECT * FROM approvals WHERE run_id = ? AND step = ?`, [runId, step]));
  }

  /** Record the decision; false when it was already decided. */
  async decide(runId: string, step: string, d: Decision): Promise<boolean> {
    const r = await this.sql.run(
      `UPDATE approvals SET decision = ?, decided_by = ?, decided_at = ?, note = ?
       WHERE run_id = ? AND step = ? AND decision IS NULL`,
      [d.decision, d.by, d.at, d.note ?? null, runId, step],
    );
    return r.changes === 1;
  }

  /** Undecided approvals of `waiting` runs (of one run, or all: their deadlines are watched from start-up). */
  async open(runId?: string): Promise<ApprovalRecord[]> {
    const rows = await this.sql.all(
      `SELECT a.* FROM approvals a JOIN runs r ON r.id = a.run_id
       WHERE a.decision IS NULL AND r.status = 'waiting'${runId === undefined ? "" : " AND a.run_id = ?"} ORDER BY a.created_at`,
      runId === undefined ? [] : [runId],
    );
    return rows.map((r) => approvalOf(r)!);
  }
}

/**
 * The deadlines of open approvals, one timer each (by run and step): at a deadline (at once when it
 * already passed, e.g. while the bridge was down) `due` is called, which decides by `onTimeout`.
 * Timers never keep the process up.
 */
export class ApprovalDeadlines {
  private readonly timers = new Map<string, NodeJS.Timeout>();

  constructor(private readonly due: (a: ApprovalRecord) => unknown) {}

  watch(a: ApprovalRecord): void {
    if (a.deadline === undefined) return;
    const key = `${a.runId} ${a.step}`;
    clearTimeout(this.timers.get(key));
    const timer = setTimeout(
      () => {
        this.timers.delete(key);
        this.due(a);
      },
      Math.max(0, a.deadline - Date.now()),
    );
    timer.unref();
    this.timers.set(key, timer);
  }

  /** Stop watching a run's approvals (one step's, or all). */
  unwatch(runId: string, step?: string): void {
    for (const [key, timer] of this.timers)
      if (step ? key === `${runId} ${step}` : key.startsWith(`${runId} `)) {
        clearTimeout(timer);
        this.timers.delete(key);
      }
  }

  clear(): void {
    for (const t of this.timers.values()) clearTimeout(t);
    this.timers.clear();
  }
}
