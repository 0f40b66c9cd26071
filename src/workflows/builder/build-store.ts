/**
 * The builder's records, in the systems database next to runs and canvases. A build is a run
 * (origin `builder`, in the `runs` and `run_steps` tables of src/workflows/systems/db.ts): its
 * inputs are the intent and the ExecutionPlan, each step's output is the text its tool call made
 * (a node id, an edge id, a path), and the variables are those outputs under the steps' `output`
 * names. `BuildRecord` is that run as the builder reads it. The `builds` table of release 0.1.0 is
 * moved into runs on first open (`migrateBuilds`, one transaction) and dropped.
 * Also each conversation's builder state (where it is — planning, executing, paused, completed,
 * error —, the canvas it is working on, and a question waiting for "yes"), written as it changes so
 * a pending question is still there after a restart.
 */
import type Database from "better-sqlite3";
import type { ConversationState } from "../../wire/events.js";
import type { RunStatus } from "../../wire/runs.js";
import { type RunRecord, RunStore } from "../systems/db.js";
import type { BuildStepStatus, ExecutionPlan, Intent } from "./types.js";

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
  intent: BuildIntent;
  status: RunStatus;
  plan: ExecutionPlan;
  steps: Record<string, BuildStepRecord>;
  /** `output` variable → value (node ids, edge ids, paths). */
  vars: Record<string, string>;
  failedStep?: string;
  error?: string;
  createdAt: number;
  updatedAt: number;
}

export type BuildIntent = Extract<Intent, "BUILD" | "EDIT">;

/** What a build's run holds as its inputs. */
export interface BuildInputs {
  intent: BuildIntent;
  plan: ExecutionPlan;
}

/** A run of origin `builder` as a build. */
export function buildOf(run: RunRecord): BuildRecord {
  const { intent, plan } = run.inputs as Partial<BuildInputs> as BuildInputs;
  const steps: Record<string, BuildStepRecord> = {};
  const vars: Record<string, string> = {};
  const byId = new Map(plan.steps.map((s) => [s.id, s]));
  for (const s of run.steps) {
    const output = typeof s.output === "string" ? s.output : undefined;
    steps[s.id] = {
      status: s.status === "cancelled" ? "pending" : s.status,
      attempts: s.attempts,
      ...(output !== undefined ? { output } : {}),
      ...(s.error ? { error: s.error } : {}),
      ...(s.startedAt && s.endedAt ? { ms: s.endedAt - s.startedAt } : {}),
    };
    const name = byId.get(s.id)?.output;
    if (s.status === "completed" && name && output !== undefined) vars[name] = output;
  }
  return {
    id: run.id,
    ...(run.conversation ? { conversation: run.conversation } : {}),
    system: run.system,
    intent,
    status: run.status,
    plan,
    steps,
    vars,
    ...(run.failedStep ? { failedStep: run.failedStep } : {}),
    ...(run.error ? { error: run.error } : {}),
    createdAt: run.createdAt,
    updatedAt: run.updatedAt,
  };
}

/**
 * Release 0.1.0's `builds` table into runs and run_steps, in one transaction, then dropped. A build
 * left `running` becomes `interrupted` (resumable, like a run a stopped bridge left).
 */
export function migrateBuilds(db: Database.Database): number {
  const exists = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'builds'").get();
  if (!exists) return 0;
  const rows = db.prepare("SELECT * FROM builds ORDER BY created_at, rowid").all() as Array<Record<string, unknown>>;
  const run = db.prepare(
    `INSERT OR IGNORE INTO runs (id, system, conversation, status, inputs, error, failed_step, origin, created_at, started_at, ended_at, updated_at, detached)
     VALUES (@id, @system, @conversation, @status, @inputs, @error, @failed_step, 'builder', @created_at, @created_at, @ended_at, @updated_at, 1)`,
  );
  const step = db.prepare(
    `INSERT OR IGNORE INTO run_steps (run_id, step_id, position, status, attempts, started_at, ended_at, output, error)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  );
  db.transaction(() => {
    for (const r of rows) {
      const plan = JSON.parse(String(r.plan)) as ExecutionPlan;
      const steps = JSON.parse(String(r.steps)) as Record<string, BuildStepRecord>;
      const status = r.status === "running" ? "interrupted" : String(r.status);
      const updated = Number(r.updated_at);
      run.run({
        id: r.id,
        system: r.system,
        conversation: r.conversation ?? null,
        status,
        inputs: JSON.stringify({ intent: r.intent as BuildIntent, plan } satisfies BuildInputs),
        error: r.error ?? null,
        failed_step: r.failed_step ?? null,
        created_at: r.created_at,
        ended_at: status === "paused" ? null : updated,
        updated_at: updated,
      });
      plan.steps.forEach((s, i) => {
        const rec = steps[s.id];
        const st = !rec || rec.status === "running" ? "pending" : rec.status;
        const ended = st === "pending" ? null : updated;
        step.run(
          r.id,
          s.id,
          i,
          st,
          rec?.attempts ?? 0,
          ended !== null && rec?.ms !== undefined ? ended - rec.ms : null,
          ended,
          rec?.output !== undefined ? JSON.stringify(rec.output) : null,
          rec?.error ?? null,
        );
      });
    }
    db.exec("DROP TABLE builds");
  })();
  return rows.length;
}

/** A question waiting for the person's "yes". */
export type BuilderPending =
  /** An EDIT plan that deletes nodes: shown first. */
  | { kind: "plan"; system: string; plan: ExecutionPlan; intent: "EDIT" | "BUILD"; since: number }
  /** Settings changes, shown as a diff. */
  | { kind: "configure"; system: string; changes: ConfigChange[]; since: number }
  | { kind: "deploy"; system: string; since: number }
  | { kind: "undeploy"; system: string; since: number };

/** One settings change of CONFIGURE (src/workflows/builder/configure.ts). */
export interface ConfigChange {
  /** `confirm`, `enabled`, `deployed`, `defaults.<input>`, `model.<node>`, `examples`. */
  path: string;
  value: unknown;
}

export interface BuilderConversation {
  state: ConversationState;
  /** The canvas it works on (the last one built, edited or named). */
  focus?: string;
  pending?: BuilderPending;
  updatedAt: number;
}

const SCHEMA = `
CREATE TABLE IF NOT EXISTS builder_conversations (
  conversation TEXT PRIMARY KEY,
  state TEXT NOT NULL,
  focus TEXT,
  pending TEXT,
  updated_at INTEGER NOT NULL
);
`;

export class BuildStore {
  private readonly runs: RunStore;
  private readonly conv: Database.Statement;
  private readonly putConv: Database.Statement;

  constructor(db: Database.Database) {
    db.exec(SCHEMA);
    this.runs = new RunStore(db);
    migrateBuilds(db);
    this.conv = db.prepare("SELECT * FROM builder_conversations WHERE conversation = ?");
    this.putConv = db.prepare(
      `INSERT INTO builder_conversations (conversation, state, focus, pending, updated_at) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT(conversation) DO UPDATE SET state = excluded.state, focus = excluded.focus, pending = excluded.pending, updated_at = excluded.updated_at`,
    );
  }

  get(id: string): BuildRecord | undefined {
    const r = this.runs.get(id);
    return r?.origin === "builder" ? buildOf(r) : undefined;
  }

  /** The conversation's latest build, or the latest with one of these statuses. */
  latest(conversation: string, statuses?: RunStatus[]): BuildRecord | undefined {
    const r = this.runs
      .list({ conversation, origin: "builder", limit: 50 })
      .find((x) => !statuses || statuses.includes(x.status));
    return r ? buildOf(r) : undefined;
  }

  conversation(conversation: string): BuilderConversation {
    const r = this.conv.get(conversation) as
      | { state: string; focus: string | null; pending: string | null; updated_at: number }
      | undefined;
    if (!r) return { state: "idle", updatedAt: 0 };
    return {
      state: r.state as ConversationState,
      ...(r.focus ? { focus: r.focus } : {}),
      ...(r.pending ? { pending: JSON.parse(r.pending) as BuilderPending } : {}),
      updatedAt: r.updated_at,
    };
  }

  setConversation(conversation: string, c: Omit<BuilderConversation, "updatedAt">): void {
    this.putConv.run(conversation, c.state, c.focus ?? null, c.pending ? JSON.stringify(c.pending) : null, Date.now());
  }
}
