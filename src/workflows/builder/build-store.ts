/**
 * The builder's records, in the systems database next to runs and canvases. A build is a run
 * (origin `builder`, in the `runs` and `run_steps` tables of src/workflows/systems/db.ts): its
 * inputs are the intent and the ExecutionPlan, each step's output is the text its tool call made
 * (a node id, an edge id, a path), and `vars` are those outputs by step id, for the
 * `${steps.ID.output}` of later steps. `BuildRecord` is that run as the builder reads it. The
 * `builds` table of release 0.1.0 is moved into runs on first open (`migrateBuilds`, one
 * transaction, its plans' `output` names and `${name}` references rewritten) and dropped. (Each
 * conversation's state is src/workflows/conversation/.)
 */
import type Database from "better-sqlite3";
import type { Sql } from "../../core/db/sql.js";
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
  /** Step id → its result, for `${steps.ID.output}` of later steps (node ids, edge ids, paths). */
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
  for (const s of run.steps) {
    const output = typeof s.output === "string" ? s.output : undefined;
    steps[s.id] = {
      status: s.status === "cancelled" || s.status === "waiting" ? "pending" : s.status,
      attempts: s.attempts,
      ...(output !== undefined ? { output } : {}),
      ...(s.error ? { error: s.error } : {}),
      ...(s.startedAt && s.endedAt ? { ms: s.endedAt - s.startedAt } : {}),
    };
    if (s.status === "completed" && output !== undefined) vars[s.id] = output;
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
      const plan = currentPlan(JSON.parse(String(r.plan)) as ExecutionPlan);
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

/** `${name}` of release 0.1.0's plans (a step's `output` name), not after a `$`. */
const OLD_VAR = /(?<!\$)\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g;

/**
 * A 0.1.0 plan in today's form: a later step used an earlier one's result as `${name}`, the name
 * its `output` gave; now it is `${steps.<id>.output}`. Other templates are left as they were.
 */
function currentPlan(plan: ExecutionPlan): ExecutionPlan {
  const idOf = new Map<string, string>();
  for (const s of plan.steps as Array<{ id: string; output?: unknown }>)
    if (typeof s.output === "string") idOf.set(s.output, s.id);
  if (!idOf.size) return plan;
  const rewrite = (v: unknown): unknown =>
    typeof v === "string"
      ? v.replace(OLD_VAR, (all, name: string) => (idOf.has(name) ? `\${steps.${idOf.get(name)}.output}` : all))
      : Array.isArray(v)
        ? v.map(rewrite)
        : v && typeof v === "object"
          ? Object.fromEntries(Object.entries(v).map(([k, x]) => [k, rewrite(x)]))
          : v;
  return {
    ...plan,
    steps: plan.steps.map((step) => {
      const { output: _old, ...s } = step as typeof step & { output?: unknown };
      return { ...s, params: rewrite(s.params) as typeof s.params };
    }),
  };
}

export class BuildStore {
  private readonly runs: RunStore;

  constructor(sql: Sql) {
    this.runs = new RunStore(sql);
  }

  async get(id: string): Promise<BuildRecord | undefined> {
    const r = await this.runs.get(id);
    return r?.origin === "builder" ? buildOf(r) : undefined;
  }

  /** The conversation's latest build, or the latest with one of these statuses. */
  async latest(conversation: string, statuses?: RunStatus[]): Promise<BuildRecord | undefined> {
    const r = (await this.runs.list({ conversation, origin: "builder", limit: 50 })).find(
      (x) => !statuses || statuses.includes(x.status),
    );
    return r ? buildOf(r) : undefined;
  }
}
