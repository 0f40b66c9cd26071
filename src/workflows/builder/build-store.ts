/**
 * The builder's records, in the systems database next to runs and canvases: every build (its plan,
 * each step's status, attempts and result, the results later steps use). Written as they change,
 * so a paused build resumes after a restart. (Each conversation's state is src/workflows/conversation/.)
 */
import type Database from "better-sqlite3";
import type { BuildStatus, BuildStepStatus, ExecutionPlan, Intent } from "./types.js";

export interface BuildStepRecord {
  status: BuildStepStatus;
  attempts: number;
  output?: string;
  error?: string;
  ms?: number;
}

export interface BuildRecord {
  id: string;
  conversation?: string;
  system: string;
  intent: Extract<Intent, "BUILD" | "EDIT">;
  status: BuildStatus;
  plan: ExecutionPlan;
  steps: Record<string, BuildStepRecord>;
  /** Step id → its result, for `${steps.ID.output}` of later steps (node ids, edge ids, paths). */
  vars: Record<string, string>;
  failedStep?: string;
  error?: string;
  createdAt: number;
  updatedAt: number;
}

const SCHEMA = `
CREATE TABLE IF NOT EXISTS builds (
  id TEXT PRIMARY KEY,
  conversation TEXT,
  system TEXT NOT NULL,
  intent TEXT NOT NULL,
  status TEXT NOT NULL,
  plan TEXT NOT NULL,
  steps TEXT NOT NULL,
  vars TEXT NOT NULL,
  failed_step TEXT,
  error TEXT,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS builds_conversation ON builds(conversation, created_at);
`;

interface BuildRow {
  id: string;
  conversation: string | null;
  system: string;
  intent: string;
  status: string;
  plan: string;
  steps: string;
  vars: string;
  failed_step: string | null;
  error: string | null;
  created_at: number;
  updated_at: number;
}

const fromRow = (r: BuildRow): BuildRecord => ({
  id: r.id,
  ...(r.conversation ? { conversation: r.conversation } : {}),
  system: r.system,
  intent: r.intent as BuildRecord["intent"],
  status: r.status as BuildStatus,
  plan: JSON.parse(r.plan) as ExecutionPlan,
  steps: JSON.parse(r.steps) as BuildRecord["steps"],
  vars: JSON.parse(r.vars) as BuildRecord["vars"],
  ...(r.failed_step ? { failedStep: r.failed_step } : {}),
  ...(r.error ? { error: r.error } : {}),
  createdAt: r.created_at,
  updatedAt: r.updated_at,
});

export class BuildStore {
  private readonly put: Database.Statement;
  private readonly one: Database.Statement;

  constructor(private readonly db: Database.Database) {
    db.exec(SCHEMA);
    this.put = db.prepare(
      `INSERT INTO builds (id, conversation, system, intent, status, plan, steps, vars, failed_step, error, created_at, updated_at)
       VALUES (@id, @conversation, @system, @intent, @status, @plan, @steps, @vars, @failed_step, @error, @created_at, @updated_at)
       ON CONFLICT(id) DO UPDATE SET status = excluded.status, steps = excluded.steps, vars = excluded.vars,
         failed_step = excluded.failed_step, error = excluded.error, updated_at = excluded.updated_at`,
    );
    this.one = db.prepare("SELECT * FROM builds WHERE id = ?");
  }

  save(b: BuildRecord): void {
    b.updatedAt = Date.now();
    this.put.run({
      id: b.id,
      conversation: b.conversation ?? null,
      system: b.system,
      intent: b.intent,
      status: b.status,
      plan: JSON.stringify(b.plan),
      steps: JSON.stringify(b.steps),
      vars: JSON.stringify(b.vars),
      failed_step: b.failedStep ?? null,
      error: b.error ?? null,
      created_at: b.createdAt,
      updated_at: b.updatedAt,
    });
  }

  get(id: string): BuildRecord | undefined {
    const r = this.one.get(id) as BuildRow | undefined;
    return r ? fromRow(r) : undefined;
  }

  /** The conversation's latest build, or the latest with one of these statuses. */
  latest(conversation: string, statuses?: BuildStatus[]): BuildRecord | undefined {
    const rows = this.db
      .prepare("SELECT * FROM builds WHERE conversation = ? ORDER BY created_at DESC, rowid DESC LIMIT 50")
      .all(conversation) as BuildRow[];
    const r = rows.find((x) => !statuses || statuses.includes(x.status as BuildStatus));
    return r ? fromRow(r) : undefined;
  }

  /** Builds of a system, newest first. */
  forSystem(system: string, limit = 10): BuildRecord[] {
    return (
      this.db
        .prepare("SELECT * FROM builds WHERE system = ? ORDER BY created_at DESC, rowid DESC LIMIT ?")
        .all(system, limit) as BuildRow[]
    ).map(fromRow);
  }

  /** Builds left `running` by a bridge that stopped: paused (they resume from their first unfinished step). */
  pauseInterrupted(): number {
    return this.db
      .prepare("UPDATE builds SET status = 'paused', updated_at = ? WHERE status = 'running'")
      .run(Date.now()).changes;
  }
}
