/**
 * Where runs are kept (and each conversation's state, src/workflows/conversation/): one SQLite file,
 * `<dataDir>/systems.db` (WAL, FULL sync, like the session store), so a run and a half-gathered
 * request survive a restart. `:memory:` for tests. `openSystemsDb` makes its schema; `RunStore` is
 * written once against the async `Sql` (src/core/db/sql.ts): the one `SqliteSql` over systems.db,
 * or the PostgreSQL of `store: { kind: postgres }` (tables of migration 3, src/core/db/pg-migrations.ts).
 * The runs table is written before a run starts; every step's status, output and timings are
 * written as they change. Every value written (inputs, outputs, errors) passes the secrets redactor
 * first (src/core/secrets/redactor.ts): a secret's value is never on disk here, even when a step
 * echoed it back.
 *
 * Leases (PostgreSQL only: several instances on one database): a run that executes (`pending`,
 * `running`) has an `owner` (an instance id) and a `lease_until` (epoch ms of the database's
 * clock) its owner renews; a run whose lease lapsed is claimed by another instance (`claimLapsed`,
 * `FOR UPDATE SKIP LOCKED`), which goes on from its first unfinished step (runner.ts).
 */
import { mkdirSync } from "node:fs";
import path from "node:path";
import Database from "better-sqlite3";
import type { RunOrigin, RunStatus, StepStatus } from "../../wire/runs.js";
import type { Sql, SqlQueries } from "../../core/db/sql.js";
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

/** The statuses of a run that executes (it needs a live owner on PostgreSQL). */
const EXECUTING = "('pending', 'running')";
/** The database's clock in epoch ms (PostgreSQL only: the lease statements). */
const DB_NOW = "(extract(epoch from clock_timestamp()) * 1000)::bigint";

/** A lease: who holds a run and for how long (PostgreSQL). */
export interface Lease {
  owner: string;
  ms: number;
}

/** Reads and writes runs, through `sql`: every write is stored when its promise resolves. */
export class RunStore {
  /** The insertion order of rows, for ties of `created_at` (SQLite's rowid; PostgreSQL's `seq`). */
  private readonly order: string;

  constructor(readonly sql: Sql) {
    this.order = sql.dialect === "sqlite" ? "rowid" : "seq";
  }

  /** Write a new run (status `pending`) and its steps, before anything runs; `lease`: claimed at once by its owner. */
  async create(
    run: {
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
    },
    lease?: Lease,
  ): Promise<void> {
    const now = Date.now();
    await this.sql.tx(async (q) => {
      await q.run(
        `INSERT INTO runs (id, system, conversation, status, inputs, origin, message_key, created_at, updated_at, test, trigger, detached, version)
         VALUES (?, ?, ?, 'pending', ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        [
          run.id,
          run.system,
          run.conversation ?? null,
          json(run.inputs),
          run.origin,
          run.messageKey ?? null,
          now,
          now,
          run.test ? 1 : 0,
          run.trigger ?? null,
          run.trigger && run.detached ? 1 : 0,
          run.version ?? null,
        ],
      );
      for (const [i, s] of run.steps.entries())
        await q.run(`INSERT INTO run_steps (run_id, step_id, position, status) VALUES (?, ?, ?, 'pending')`, [
          run.id,
          s,
          i,
        ]);
      if (lease) await claimOne(q, run.id, lease);
    });
  }

  async get(id: string): Promise<RunRecord | undefined> {
    const row = await this.sql.get(`SELECT * FROM runs WHERE id = ?`, [id]);
    if (!row) return undefined;
    const steps = (await this.sql.all(`SELECT * FROM run_steps WHERE run_id = ? ORDER BY position`, [id])).map(
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
    const approval =
      row.status === "waiting"
        ? await this.sql.get(
            `SELECT * FROM approvals WHERE run_id = ? AND decision IS NULL ORDER BY created_at LIMIT 1`,
            [id],
          )
        : undefined;
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
      approval: approvalOf(approval),
    };
  }

  async list(
    filter: { conversation?: string; status?: RunStatus; system?: string; origin?: RunOrigin; limit?: number } = {},
  ): Promise<RunRecord[]> {
    const where: string[] = [];
    const args: unknown[] = [];
    if (filter.conversation) where.push("conversation = ?"), args.push(filter.conversation);
    if (filter.status) where.push("status = ?"), args.push(filter.status);
    if (filter.system) where.push("system = ?"), args.push(filter.system);
    if (filter.origin) where.push("origin = ?"), args.push(filter.origin);
    const limit = Math.min(Math.max(filter.limit ?? 50, 1), 1000);
    return this.runs(
      `SELECT id FROM runs ${where.length ? `WHERE ${where.join(" AND ")}` : ""} ORDER BY created_at DESC, ${this.order} DESC LIMIT ${limit}`,
      args,
    );
  }

  /** The runs of a query's ids, in their order. */
  private async runs(query: string, args: unknown[]): Promise<RunRecord[]> {
    const out: RunRecord[] = [];
    for (const r of await this.sql.all<{ id: string }>(query, args)) {
      const rec = await this.get(r.id);
      if (rec) out.push(rec);
    }
    return out;
  }

  /** The run a chat message started, if any (a client's retry of the message finds it). */
  async byMessage(conversation: string, messageKey: string): Promise<RunRecord | undefined> {
    const [r] = await this.runs(
      `SELECT id FROM runs WHERE conversation = ? AND message_key = ? AND origin != 'builder' ORDER BY created_at DESC LIMIT 1`,
      [conversation, messageKey],
    );
    return r;
  }

  /** Runs of a conversation that ended in the background and were not told yet (builds are told by the builder). */
  unreported(conversation: string): Promise<RunRecord[]> {
    return this.runs(
      `SELECT id FROM runs WHERE conversation = ? AND origin != 'builder' AND detached = 1 AND reported = 0 AND status IN ('completed','failed','rejected','cancelled','interrupted','waiting') ORDER BY updated_at`,
      [conversation],
    );
  }

  /** Runs of a conversation that have not ended (newest first). */
  active(conversation: string): Promise<RunRecord[]> {
    return this.runs(
      `SELECT id FROM runs WHERE conversation = ? AND origin != 'builder' AND status IN ('pending','running','paused','waiting') ORDER BY created_at DESC`,
      [conversation],
    );
  }

  async latest(conversation: string): Promise<RunRecord | undefined> {
    const [r] = await this.runs(
      `SELECT id FROM runs WHERE conversation = ? AND origin != 'builder' ORDER BY created_at DESC LIMIT 1`,
      [conversation],
    );
    return r;
  }

  async setStatus(id: string, status: RunStatus): Promise<void> {
    await this.sql.run(`UPDATE runs SET status = ?, updated_at = ? WHERE id = ?`, [status, Date.now(), id]);
  }

  async markStarted(id: string): Promise<void> {
    const now = Date.now();
    await this.sql.run(
      `UPDATE runs SET status = 'running', started_at = COALESCE(started_at, ?), ended_at = NULL, error = NULL, failed_step = NULL, updated_at = ? WHERE id = ?`,
      [now, now, id],
    );
  }

  async finish(
    id: string,
    end: { status: RunStatus; output?: unknown; error?: string; failedStep?: string },
  ): Promise<void> {
    await finishRun(this.sql, id, end);
  }

  /** The chat turn no longer follows the run: its end (or its wait for an approval) is told on the conversation's next turn. */
  async markDetached(id: string): Promise<void> {
    await this.sql.run(`UPDATE runs SET detached = 1, reported = 0, updated_at = ? WHERE id = ?`, [Date.now(), id]);
  }

  /** A chat turn follows the run again (it was resumed from chat): its outcome is shown there. */
  async markAttached(id: string): Promise<void> {
    await this.sql.run(`UPDATE runs SET detached = 0, reported = 0, updated_at = ? WHERE id = ?`, [Date.now(), id]);
  }

  async markReported(id: string): Promise<void> {
    await this.sql.run(`UPDATE runs SET reported = 1, updated_at = ? WHERE id = ?`, [Date.now(), id]);
  }

  async stepStarted(run: string, step: string, attempts: number): Promise<void> {
    await this.sql.run(
      `UPDATE run_steps SET status = 'running', attempts = ?, started_at = COALESCE(started_at, ?), ended_at = NULL, error = NULL WHERE run_id = ? AND step_id = ?`,
      [attempts, Date.now(), run, step],
    );
  }

  async stepEnded(
    run: string,
    step: string,
    status: StepStatus,
    out: { output?: unknown; error?: string } = {},
  ): Promise<void> {
    await this.sql.run(
      `UPDATE run_steps SET status = ?, ended_at = ?, output = ?, error = ? WHERE run_id = ? AND step_id = ?`,
      [status, Date.now(), json(out.output), text(out.error), run, step],
    );
  }

  /** Every unfinished step back to `pending` (a resumed run starts from its first unfinished step). */
  async resetUnfinished(run: string): Promise<void> {
    await this.sql.run(
      `UPDATE run_steps SET status = 'pending', started_at = NULL, ended_at = NULL, error = NULL WHERE run_id = ? AND status NOT IN ('completed')`,
      [run],
    );
  }

  /**
   * SQLite (one bridge per file): runs that were `running` or `pending` when the bridge stopped are
   * now `interrupted`. Returns their ids. (On PostgreSQL a run left by an instance is claimed instead.)
   */
  async interruptLeftovers(): Promise<string[]> {
    const ids = (await this.sql.all<{ id: string }>(`SELECT id FROM runs WHERE status IN ${EXECUTING}`)).map(
      (r) => r.id,
    );
    for (const id of ids) {
      await this.sql.tx(async (q) => {
        await finishRun(q, id, { status: "interrupted", error: "the bridge stopped while this run was going" });
        await q.run(`UPDATE run_steps SET status = 'pending' WHERE run_id = ? AND status = 'running'`, [id]);
        await q.run(`UPDATE runs SET detached = 1, reported = 0, updated_at = ? WHERE id = ?`, [Date.now(), id]);
      });
    }
    return ids;
  }

  /** PostgreSQL: `lease.owner` holds the run for `lease.ms` from now (it launches it). */
  async claim(id: string, lease: Lease): Promise<void> {
    await claimOne(this.sql, id, lease);
  }

  /**
   * PostgreSQL: every executing run of `owner` held for `ms` more, in one statement. Returns the ids
   * renewed (a run of its own not among them was taken over, or ended elsewhere).
   */
  async renew(lease: Lease): Promise<string[]> {
    const rows = await this.sql.all<{ id: string }>(
      `UPDATE runs SET lease_until = ${DB_NOW} + ? WHERE owner = ? AND status IN ${EXECUTING} RETURNING id`,
      [lease.ms, lease.owner],
    );
    return rows.map((r) => r.id);
  }

  /**
   * PostgreSQL: up to `limit` executing runs whose lease lapsed (their instance died, or let them go
   * at shutdown) claimed by `lease.owner`, skipping rows another instance is claiming at this very
   * moment. `systems`: only runs of these systems (those this instance can carry out), and builds
   * when `builds`. Returns their ids.
   */
  async claimLapsed(lease: Lease, limit: number, can: { systems: string[]; builds: boolean }): Promise<string[]> {
    const rows = await this.sql.all<{ id: string }>(
      `UPDATE runs SET owner = ?, lease_until = ${DB_NOW} + ?
       WHERE id IN (
         SELECT id FROM runs
         WHERE status IN ${EXECUTING} AND COALESCE(lease_until, 0) < ${DB_NOW}
           AND ((origin = 'builder' AND ?) OR (origin <> 'builder' AND system = ANY(?)))
         ORDER BY created_at
         FOR UPDATE SKIP LOCKED
         LIMIT ?
       )
       RETURNING id`,
      [lease.owner, lease.ms, can.builds, can.systems, limit],
    );
    return rows.map((r) => r.id);
  }

  /** PostgreSQL: the run let go by `owner` (a clean shutdown): its lease lapsed at once, for another instance to claim. */
  async release(id: string, owner: string): Promise<void> {
    await this.sql.run(`UPDATE runs SET owner = NULL, lease_until = 0, updated_at = ? WHERE id = ? AND owner = ?`, [
      Date.now(),
      id,
      owner,
    ]);
  }
}

async function finishRun(
  q: SqlQueries,
  id: string,
  end: { status: RunStatus; output?: unknown; error?: string; failedStep?: string },
): Promise<void> {
  const now = Date.now();
  await q.run(
    `UPDATE runs SET status = ?, output = ?, error = ?, failed_step = ?, ended_at = ?, updated_at = ? WHERE id = ?`,
    [end.status, json(end.output), text(end.error), end.failedStep ?? null, now, now, id],
  );
}

async function claimOne(q: SqlQueries, id: string, lease: Lease): Promise<void> {
  await q.run(`UPDATE runs SET owner = ?, lease_until = ${DB_NOW} + ? WHERE id = ?`, [lease.owner, lease.ms, id]);
}
