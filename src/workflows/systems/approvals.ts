/**
 * Where a run's approvals are kept: the `approvals` table of systems.db (created by `openSystemsDb`),
 * one row per approval step of a run (`<step>/<its step>` inside a system used by a step): the
 * question and the data shown, its deadline and what happens then, and the decision — taken once
 * (`decide` changes only an undecided row, so a second decision, or a timeout racing a person,
 * finds nothing). The run manager (runner.ts) writes it; the run store reads a run's open one.
 * Like every write of the run store, the question and the data shown are written with secrets' values
 * replaced (`[secret NAME]`). `ApprovalDeadlines` keeps the timers of their `timeoutSeconds`.
 */
import type Database from "better-sqlite3";
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
  private readonly stmts;

  constructor(db: Database.Database) {
    this.stmts = {
      insert: db.prepare(
        `INSERT OR IGNORE INTO approvals (run_id, step, question, shown, created_at, deadline, on_timeout)
         VALUES (@runId, @step, @question, @shown, @createdAt, @deadline, @onTimeout)`,
      ),
      get: db.prepare(`SELECT * FROM approvals WHERE run_id = ? AND step = ?`),
      decide: db.prepare(
        `UPDATE approvals SET decision = @decision, decided_by = @by, decided_at = @at, note = @note
         WHERE run_id = @runId AND step = @step AND decision IS NULL`,
      ),
      open: db.prepare(
        `SELECT a.* FROM approvals a JOIN runs r ON r.id = a.run_id
         WHERE a.decision IS NULL AND r.status = 'waiting' AND (@run IS NULL OR a.run_id = @run) ORDER BY a.created_at`,
      ),
    };
  }

  /** Write the question of a step (kept as first written when the step asks again). */
  request(a: Omit<ApprovalRecord, "decided">): ApprovalRecord {
    // Secrets' values never written (the data shown is what the run's steps returned).
    this.stmts.insert.run({
      ...a,
      question: secretRedactor.text(a.question),
      shown: a.shown === undefined ? null : JSON.stringify(secretRedactor.value(a.shown)),
      deadline: a.deadline ?? null,
    });
    return this.get(a.runId, a.step)!;
  }

  get(runId: string, step: string): ApprovalRecord | undefined {
    return approvalOf(this.stmts.get.get(runId, step));
  }

  /** Record the decision; false when it was already decided. */
  decide(runId: string, step: string, d: Decision): boolean {
    return this.stmts.decide.run({ runId, step, ...d, note: d.note ?? null }).changes === 1;
  }

  /** Undecided approvals of `waiting` runs (of one run, or all: their deadlines are watched from start-up). */
  open(runId?: string): ApprovalRecord[] {
    return this.stmts.open.all({ run: runId ?? null }).map((r) => approvalOf(r)!);
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
