/**
 * Systems and their runs as the bridge sends them: `GET /v1/systems[/:id]` and `/v1/runs[/:id]`
 * (src/request/http/systems-routes.ts), and the statuses the run store and the `run.*` events use.
 * Plain types only, and no imports from outside src/wire: the dashboard (packages/dashboard)
 * type-checks against these same declarations.
 */

/**
 * A run's life. `interrupted`: found `running` when the bridge started (never re-run silently).
 * `waiting`: stopped at an `approval` step until somebody approves (it goes on) or rejects (it ends `rejected`).
 */
export type RunStatus =
  | "pending"
  | "running"
  | "paused"
  | "waiting"
  | "completed"
  | "failed"
  | "rejected"
  | "cancelled"
  | "interrupted";

/** A step's life within a run (`waiting`: an approval step whose run waits for the decision). */
export type StepStatus = "pending" | "running" | "waiting" | "completed" | "failed" | "skipped" | "cancelled";

/**
 * Where a run was started: a chat turn, the HTTP API, the command line, the builder (a build: its
 * steps call the canvas and sandbox tools), a schedule, or an inbound hook (`POST /v1/hooks/<id>`).
 */
export type RunOrigin = "chat" | "http" | "cli" | "builder" | "schedule" | "hook";

/** JSON Schema of a system's inputs: always an object schema (`{type:"object", properties:{}}` when it takes none). */
export interface InputSchema {
  type: "object";
  properties: Record<string, Record<string, unknown>>;
  required?: string[];
  [key: string]: unknown;
}

/** A system the bridge can run (`GET /v1/systems`, `GET /v1/systems/:id`). */
export interface SystemRow {
  id: string;
  object: "system";
  name: string;
  description: string;
  /** What running it does (src/workflows/systems/schema.ts): `webhook`, `command`, `mcp`, `model` or `plan`. */
  kind: string;
  examples: string[];
  inputs: InputSchema;
  side_effects: boolean;
  confirm: "auto" | "always" | "never";
  /** Where it was declared: `config` or the YAML file's path. */
  source: string;
  /** Its schedules, each with its next and last run. */
  triggers: TriggerRow[];
  /** Its inbound hook (the secret is never sent: `clawbridge systems hook <id>` shows it), or null. */
  hook: { path: string; per_minute: number } | null;
  /** Its current version (`GET /v1/systems/:id/versions`); null before one was recorded. */
  version: number | null;
}

/** A schedule of a system (`triggers[index]`), as `GET /v1/systems/:id` shows it. */
export interface TriggerRow {
  index: number;
  cron: string;
  /** The IANA time zone, or null for the bridge's. */
  timezone: string | null;
  inputs: Record<string, unknown>;
  catch_up: boolean;
  /** Whether each run's outcome is POSTed to a URL (not shown: it may carry a token). */
  notify: boolean;
  /** The chat conversation told of each run, or null. */
  conversation: string | null;
  /** Ms since the epoch; null when the schedule never comes again. */
  next_run_at: number | null;
  last_run_at: number | null;
  last_run_id: string | null;
}

/** A row of `GET /v1/systems/:id/versions`: one immutable version of a system. */
export interface SystemVersionRow {
  object: "system.version";
  system: string;
  number: number;
  created_at: number;
  /** Where the system was declared then: `config` or the file's path. */
  source: string;
  /** Who made it: `builder` (a deploy), `rollback`, `file` or `config` (loaded changed). */
  by: string;
  note: string;
  hash: string;
}

/** `GET /v1/systems/:id/versions/:n`: a version with what it runs. */
export interface SystemVersionDetail extends SystemVersionRow {
  /** The system in the form of a system file. */
  definition: Record<string, unknown>;
  /** Its settings: name, description, inputs, side effects, confirmation, enabled. */
  settings: Record<string, unknown>;
  /** The builder's canvas it was deployed from, or null. */
  canvas: unknown;
  /** Sandbox file → sha256. */
  files: Record<string, string>;
}

/** One difference between two versions (`key`: `run.steps[write].with.prompt`, `files.notes.md`). */
export interface VersionChangeRow {
  key: string;
  change: "added" | "removed" | "changed";
  from?: unknown;
  to?: unknown;
}

/** `GET /v1/systems/:id/versions/diff?from=&to=`. */
export interface VersionDiffRow {
  object: "system.version.diff";
  system: string;
  from: number;
  to: number;
  changes: VersionChangeRow[];
}

/**
 * A file of `<dataDir>/systems/` left out for its problems (the bridge serves the rest): in
 * `GET /v1/systems` as `left_out` and in `/health` under `systems`.
 */
export interface LeftOutRow {
  /** The file's path. */
  file: string;
  /** The system's id, when the file got far enough to have one. */
  id: string | null;
  /** Each problem as `<key>: <message>`. */
  problems: string[];
}

/** `GET /v1/systems`: the systems, and the files left out. */
export interface SystemList {
  object: "list";
  data: SystemRow[];
  left_out: LeftOutRow[];
}

export interface StepRow {
  id: string;
  status: StepStatus;
  attempts: number;
  started_at: number | null;
  ended_at: number | null;
  output: unknown;
  error: string | null;
}

/** The approval a `waiting` run waits on (`approval` of a run). */
export interface ApprovalRow {
  /** The approval step (`<step>/<its step>` inside a system used by a step). */
  step: string;
  question: string;
  /** The data shown with the question. */
  data: unknown;
  created_at: number;
  /** When `on_timeout` applies (ms since the epoch), or null: no deadline. */
  deadline: number | null;
  on_timeout: "approve" | "reject";
}

/** A run (`GET /v1/runs/:id`, a row of `GET /v1/runs`, and the answer of starting, pausing, resuming, cancelling one). */
export interface RunRow {
  id: string;
  object: "run";
  system: string;
  status: RunStatus;
  inputs: Record<string, unknown>;
  output: unknown;
  error: string | null;
  failed_step: string | null;
  conversation: string | null;
  origin: RunOrigin;
  /** What started it without a person: `schedule:<index>` or `hook`; null otherwise. */
  trigger: string | null;
  /** The system version it runs; null for a build or a run of before versions. */
  version: number | null;
  created_at: number;
  started_at: number | null;
  ended_at: number | null;
  /** A test run (dry run): steps with side effects were not carried out; their output is what would have been sent. */
  test: boolean;
  steps: StepRow[];
  /** The approval it waits on, while it is `waiting`. */
  approval: ApprovalRow | null;
}
