/**
 * Where runs are kept (and each conversation's state, src/workflows/conversation/): one SQLite file,
 * `<dataDir>/systems.db` (WAL, FULL sync, like the session store), so a run and a half-gathered
 * request survive a restart. `:memory:` for tests. The runs table is written before a run starts;
 * every step's status, output and timings are written as they change. Every value written (inputs,
 * outputs, errors) passes the secrets redactor first (src/core/secrets/redactor.ts): a secret's
 * value is never on disk here, even when a step echoed it back.
 */
import { mkdirSync } from "node:fs";
import path from "node:path";
import Database from "better-sqlite3";
import type { RunOrigin, RunStatus, StepStatus } from "../../wire/runs.js";
import { APPROVALS_SCHEMA, approvalOf, type ApprovalRecord } from "./approvals.js";
import { secretRedactor } from "../../core/secrets/redactor.js";

export const SYSTEMS_DB_FILENAME = "systems.db";

export interface StepRecord {
  id: string;
  status: StepStatus;
  attempts: number;
  startedAt?: number;
  endedAt?: number;
  output?: unknown;
  error?: string;
}

export interface RunRecord {
  id: string;
  system: string;
  conversation?: string;
  status: RunStatus;
  inputs: Record<string, unknown>;
  output?: unknown;
  error?: string;
  failedStep?: string;
  /** Where it was started: a chat turn, the HTTP API, the command line, a schedule or an inbound hook. */
  origin: RunOrigin;
  /** The chat message that started it (a client's retry of the same message finds this run). */
  messageKey?: string;
  createdAt: number;
  startedAt?: number;
  endedAt?: number;
  updatedAt: number;
  /** The chat turn that started it ended before the run did (the run went on in the background). */
  detached: boolean;
  /** Its outcome was told to the conversation after it ended in the background. */
  reported: boolean;
  /** A test run (dry run): steps with side effects were not carried out, their output says what would have been sent. */
  test: boolean;
  /** What started it without a person: `schedule:<index>` (the system's `triggers[index]`) or `hook`. */
  trigger?: string;
  /** The system version it runs (src/workflows/systems/versions.ts); undefined for a build, or a run of before versions. */
  version?: number;
  steps: StepRecord[];
  /** The approval it waits on (the first asked), while it is `waiting` (src/workflows/systems/approvals.ts). */
  approval?: ApprovalRecord;
}

const SCHEMA = `
CREATE TABLE IF NOT EXISTS runs (
  id TEXT PRIMARY KEY,
  system TEXT NOT NULL,
  conversation TEXT,
  status TEXT NOT NULL,
  inputs TEXT NOT NULL,
  output TEXT,
  error TEXT,
  failed_step TEXT,
  origin TEXT NOT NULL,
  message_key TEXT,
  created_at INTEGER NOT NULL,
  started_at INTEGER,
  ended_at INTEGER,
  updated_at INTEGER NOT NULL,
  detached INTEGER NOT NULL DEFAULT 0,
  reported INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS runs_conversation ON runs(conversation, created_at);
CREATE INDEX IF NOT EXISTS runs_status ON runs(status);
CREATE TABLE IF NOT EXISTS run_steps (
  run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  step_id TEXT NOT NULL,
  position INTEGER NOT NULL,
  status TEXT NOT NULL,
  attempts INTEGER NOT NULL DEFAULT 0,
  started_at INTEGER,
  ended_at INTEGER,
  output TEXT,
  error TEXT,
  PRIMARY KEY (run_id, step_id)
);
`;

export function systemsDbPath(dataDir: string): string {
  return path.join(dataDir, SYSTEMS_DB_FILENAME);
}

/** Open (and create) the database. `:memory:` gives a private in-memory one. */
export function openSystemsDb(file: string): Database.Database {
  if (file !== ":memory:") mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  const db = new Database(file);
  if (file !== ":memory:") {
    db.pragma("journal_mode = WAL");
    db.pragma("synchronous = FULL");
  }
  db.pragma("busy_timeout = 5000");
  db.pragma("foreign_keys = ON");
  db.exec(SCHEMA);
  db.exec(APPROVALS_SCHEMA);
  addTestColumn(db);
  addTriggerColumn(db);
  addVersionColumn(db);
  return db;
}

/** `runs.test` (a test run), added to a database made before it existed. */
function addTestColumn(db: Database.Database): void {
  const columns = db.prepare(`PRAGMA table_info(runs)`).all() as Array<{ name: string }>;
  if (!columns.some((c) => c.name === "test")) db.exec(`ALTER TABLE runs ADD COLUMN test INTEGER NOT NULL DEFAULT 0`);
}

/** `runs.trigger` (issue 35, triggers): added to a database made before it. */
function addTriggerColumn(db: Database.Database): void {
  const cols = db.prepare(`PRAGMA table_info(runs)`).all() as Array<{ name: string }>;
  if (!cols.some((c) => c.name === "trigger")) db.exec(`ALTER TABLE runs ADD COLUMN trigger TEXT`);
}

/** `runs.version` (the system version a run runs), added to a database made before versions. */
function addVersionColumn(db: Database.Database): void {
  const cols = db.prepare(`PRAGMA table_info(runs)`).all() as Array<{ name: string }>;
  if (!cols.some((c) => c.name === "version")) db.exec(`ALTER TABLE runs ADD COLUMN version INTEGER`);
}

/** What is written: JSON or text, secrets' values replaced. */
const json = (v: unknown) => (v === undefined ? null : JSON.stringify(secretRedactor.value(v)));
const text = (v: string | undefined) => (v === undefined ? null : secretRedactor.text(v));
const parse = (s: unknown) => (typeof s === "string" ? (JSON.parse(s) as unknown) : undefined);
const num = (v: unknown) => (typeof v === "number" ? v : undefined);
const str = (v: unknown) => (typeof v === "string" ? v : undefined);

/** Reads and writes runs. Synchronous (better-sqlite3): every write is on disk when it returns. */
export class RunStore {
  private readonly stmts;

  constructor(readonly db: Database.Database) {
    this.stmts = {
      insertRun: db.prepare(
        `INSERT INTO runs (id, system, conversation, status, inputs, origin, message_key, created_at, updated_at, test)
         VALUES (@id, @system, @conversation, @status, @inputs, @origin, @messageKey, @now, @now, @test)`,
      ),
      triggered: db.prepare(`UPDATE runs SET trigger = ?, detached = ? WHERE id = ?`),
      insertStep: db.prepare(`INSERT INTO run_steps (run_id, step_id, position, status) VALUES (?, ?, ?, 'pending')`),
      run: db.prepare(`SELECT * FROM runs WHERE id = ?`),
      steps: db.prepare(`SELECT * FROM run_steps WHERE run_id = ? ORDER BY position`),
      byMessage: db.prepare(
        `SELECT id FROM runs WHERE conversation = ? AND message_key = ? AND origin != 'builder' ORDER BY created_at DESC LIMIT 1`,
      ),
      unreported: db.prepare(
        `SELECT id FROM runs WHERE conversation = ? AND origin != 'builder' AND detached = 1 AND reported = 0 AND status IN ('completed','failed','rejected','cancelled','interrupted','waiting') ORDER BY updated_at`,
      ),
      active: db.prepare(
        `SELECT id FROM runs WHERE conversation = ? AND origin != 'builder' AND status IN ('pending','running','paused','waiting') ORDER BY created_at DESC`,
      ),
      latest: db.prepare(
        `SELECT id FROM runs WHERE conversation = ? AND origin != 'builder' ORDER BY created_at DESC LIMIT 1`,
      ),
      setStatus: db.prepare(`UPDATE runs SET status = ?, updated_at = ? WHERE id = ?`),
      setVersion: db.prepare(`UPDATE runs SET version = ? WHERE id = ?`),
      start: db.prepare(
        `UPDATE runs SET status = 'running', started_at = COALESCE(started_at, @now), ended_at = NULL, error = NULL, failed_step = NULL, updated_at = @now WHERE id = @id`,
      ),
      finish: db.prepare(
        `UPDATE runs SET status = @status, output = @output, error = @error, failed_step = @failedStep, ended_at = @now, updated_at = @now WHERE id = @id`,
      ),
      detach: db.prepare(`UPDATE runs SET detached = 1, reported = 0, updated_at = ? WHERE id = ?`),
      attach: db.prepare(`UPDATE runs SET detached = 0, reported = 0, updated_at = ? WHERE id = ?`),
      reported: db.prepare(`UPDATE runs SET reported = 1, updated_at = ? WHERE id = ?`),
      stepStart: db.prepare(
        `UPDATE run_steps SET status = 'running', attempts = @attempts, started_at = COALESCE(started_at, @now), ended_at = NULL, error = NULL WHERE run_id = @run AND step_id = @step`,
      ),
      stepEnd: db.prepare(
        `UPDATE run_steps SET status = @status, ended_at = @now, output = @output, error = @error WHERE run_id = @run AND step_id = @step`,
      ),
      stepReset: db.prepare(
        `UPDATE run_steps SET status = 'pending', started_at = NULL, ended_at = NULL, error = NULL WHERE run_id = ? AND status NOT IN ('completed')`,
      ),
      interrupt: db.prepare(`SELECT id FROM runs WHERE status IN ('running', 'pending')`),
      approval: db.prepare(
        `SELECT * FROM approvals WHERE run_id = ? AND decision IS NULL AND ? = 'waiting' ORDER BY created_at LIMIT 1`,
      ),
    };
  }

  /** Write a new run (status `pending`) and its steps, before anything runs. */
  create(run: {
    id: string;
    system: string;
    conversation?: string;
    inputs: Record<string, unknown>;
    origin: RunRecord["origin"];
    messageKey?: string;
    version?: number;
    steps: string[];
    test?: boolean;
    /** What started it (a schedule, a hook); `detached`: told to its conversation on its next turn. */
    trigger?: string;
    detached?: boolean;
  }): void {
    const now = Date.now();
    this.db.transaction(() => {
      this.stmts.insertRun.run({
        id: run.id,
        system: run.system,
        conversation: run.conversation ?? null,
        status: "pending",
        inputs: json(run.inputs),
        origin: run.origin,
        messageKey: run.messageKey ?? null,
        now,
        test: run.test ? 1 : 0,
      });
      if (run.version !== undefined) this.stmts.setVersion.run(run.version, run.id);
      run.steps.forEach((s, i) => this.stmts.insertStep.run(run.id, s, i));
      if (run.trigger) this.stmts.triggered.run(run.trigger, run.detached ? 1 : 0, run.id);
    })();
  }

  get(id: string): RunRecord | undefined {
    const row = this.stmts.run.get(id) as Record<string, unknown> | undefined;
    if (!row) return undefined;
    const steps = (this.stmts.steps.all(id) as Record<string, unknown>[]).map(
      (s): StepRecord => ({
        id: String(s.step_id),
        status: s.status as StepStatus,
        attempts: Number(s.attempts),
        startedAt: num(s.started_at),
        endedAt: num(s.ended_at),
        output: parse(s.output),
        error: str(s.error),
      }),
    );
    return {
      id: String(row.id),
      system: String(row.system),
      conversation: str(row.conversation),
      status: row.status as RunStatus,
      inputs: (parse(row.inputs) as Record<string, unknown>) ?? {},
      output: parse(row.output),
      error: str(row.error),
      failedStep: str(row.failed_step),
      origin: row.origin as RunRecord["origin"],
      messageKey: str(row.message_key),
      createdAt: Number(row.created_at),
      startedAt: num(row.started_at),
      endedAt: num(row.ended_at),
      updatedAt: Number(row.updated_at),
      detached: row.detached === 1,
      reported: row.reported === 1,
      test: row.test === 1,
      trigger: str(row.trigger),
      version: num(row.version),
      steps,
      approval: approvalOf(this.stmts.approval.get(id, row.status)),
    };
  }

  list(
    filter: { conversation?: string; status?: RunStatus; system?: string; origin?: RunOrigin; limit?: number } = {},
  ): RunRecord[] {
    const where: string[] = [];
    const args: unknown[] = [];
    if (filter.conversation) where.push("conversation = ?"), args.push(filter.conversation);
    if (filter.status) where.push("status = ?"), args.push(filter.status);
    if (filter.system) where.push("system = ?"), args.push(filter.system);
    if (filter.origin) where.push("origin = ?"), args.push(filter.origin);
    const limit = Math.min(Math.max(filter.limit ?? 50, 1), 1000);
    const rows = this.db
      .prepare(
        `SELECT id FROM runs ${where.length ? `WHERE ${where.join(" AND ")}` : ""} ORDER BY created_at DESC, rowid DESC LIMIT ${limit}`,
      )
      .all(...args);
    return this.runs(rows);
  }

  /** The runs of rows of ids (a query's answer), in their order. */
  private runs(rows: unknown[]): RunRecord[] {
    return (rows as Array<{ id: string }>).map((r) => this.get(r.id)!);
  }

  /** The run a chat message started, if any (a client's retry of the message finds it). */
  byMessage(conversation: string, messageKey: string): RunRecord | undefined {
    return this.runs(this.stmts.byMessage.all(conversation, messageKey))[0];
  }

  /** Runs of a conversation that ended in the background and were not told yet (builds are told by the builder). */
  unreported(conversation: string): RunRecord[] {
    return this.runs(this.stmts.unreported.all(conversation));
  }

  /** Runs of a conversation that have not ended (newest first). */
  active(conversation: string): RunRecord[] {
    return this.runs(this.stmts.active.all(conversation));
  }

  latest(conversation: string): RunRecord | undefined {
    return this.runs(this.stmts.latest.all(conversation))[0];
  }

  setStatus(id: string, status: RunStatus): void {
    this.stmts.setStatus.run(status, Date.now(), id);
  }

  markStarted(id: string): void {
    this.stmts.start.run({ id, now: Date.now() });
  }

  finish(id: string, end: { status: RunStatus; output?: unknown; error?: string; failedStep?: string }): void {
    this.stmts.finish.run({
      id,
      status: end.status,
      output: json(end.output),
      error: text(end.error),
      failedStep: end.failedStep ?? null,
      now: Date.now(),
    });
  }

  /** The chat turn no longer follows the run: its end (or its wait for an approval) is told on the conversation's next turn. */
  markDetached(id: string): void {
    this.stmts.detach.run(Date.now(), id);
  }

  /** A chat turn follows the run again (it was resumed from chat): its outcome is shown there. */
  markAttached(id: string): void {
    this.stmts.attach.run(Date.now(), id);
  }

  markReported(id: string): void {
    this.stmts.reported.run(Date.now(), id);
  }

  stepStarted(run: string, step: string, attempts: number): void {
    this.stmts.stepStart.run({ run, step, attempts, now: Date.now() });
  }

  stepEnded(run: string, step: string, status: StepStatus, out: { output?: unknown; error?: string } = {}): void {
    this.stmts.stepEnd.run({ run, step, status, output: json(out.output), error: text(out.error), now: Date.now() });
  }

  /** Every unfinished step back to `pending` (a resumed run starts from its first unfinished step). */
  resetUnfinished(run: string): void {
    this.stmts.stepReset.run(run);
  }

  /** Runs that were `running` or `pending` when the bridge stopped: now `interrupted`. Returns their ids. */
  interruptLeftovers(): string[] {
    const ids = (this.stmts.interrupt.all() as Array<{ id: string }>).map((r) => r.id);
    for (const id of ids) {
      this.db.transaction(() => {
        this.finish(id, { status: "interrupted", error: "the bridge stopped while this run was going" });
        this.db.prepare(`UPDATE run_steps SET status = 'pending' WHERE run_id = ? AND status = 'running'`).run(id);
        this.markDetached(id);
      })();
    }
    return ids;
  }
}
