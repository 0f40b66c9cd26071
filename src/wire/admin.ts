/**
 * What the `/v1/admin/*` routes answer (src/request/http/admin-routes.ts): turns, processes, the
 * queue, session bindings, backends and CLIs, the doctor's findings, the router's open
 * questions and usage per backend per day — what the dashboard shows that no other route serves — and the list wrapper every
 * list route uses. Plain types only, and no imports from outside src/wire: the dashboard
 * (packages/dashboard) type-checks against these same declarations.
 */
import type { ConversationState, DecisionAction, DecisionSource } from "./events.js";

/** Every list route's answer. */
export interface List<T> {
  object: "list";
  data: T[];
}

/** The turn scheduler now (`GET /v1/admin/queue`, and `queue` of `GET /v1/admin/turns`). */
export interface QueueStats {
  object: "queue";
  running: number;
  waiting: number;
  /** Conversations with a turn running or waiting. */
  conversations: number;
  maxConcurrent: number;
  maxQueue: number;
  /** CLI processes running. */
  processes: number;
}

/** One turn, from its `turn.*` events. */
export interface TurnRow {
  id: string;
  conversation: string;
  model: string;
  backend: string;
  mode: string | null;
  status: "running" | "completed" | "failed" | "aborted";
  /** Epoch ms when the bridge accepted it (before the queue). */
  accepted_at: number;
  queued_ms: number | null;
  first_byte_ms: number | null;
  duration_ms: number | null;
  prompt_tokens: number | null;
  completion_tokens: number | null;
  finish_reason: string | null;
  error: { code: string; message: string } | null;
  ended_at: number | null;
}

/** `GET /v1/admin/turns`: running turns (oldest first) and the last ones that ended (newest first). */
export interface Turns {
  object: "list";
  running: TurnRow[];
  recent: TurnRow[];
  queue: QueueStats;
  /** Whether the bridge has an event bus (without one the lists stay empty). */
  live: boolean;
}

/** A CLI process running now (`GET /v1/admin/processes`). */
export interface ProcessRow {
  pid: number | null;
  command: string;
  label: string | null;
  cwd: string | null;
  started_at: number;
  /** A warm CLI process, kept between turns (with its backend, state, turns and memory). */
  warm: boolean;
  backend?: string;
  busy?: boolean;
  /** A standby: a warm process started for no conversation yet (a new conversation's first turn starts on it). */
  standby?: boolean;
  turns?: number;
  rss_bytes?: number | null;
}

/** `GET /v1/admin/processes`: the processes, and the memory budget of the warm ones (`warm.maxMemoryMB`). */
export interface Processes extends List<ProcessRow> {
  warm_memory: {
    /** Resident memory of every warm process now (their process groups). */
    used_bytes: number;
    max_bytes: number;
    /** Set in the configuration (else the default: 40% of the machine's memory). */
    configured: boolean;
  };
}

/** A resume-mode binding: conversation → backend session, with its recent history. */
export interface SessionRow {
  key: string;
  object: "session";
  backend: string;
  model: string | null;
  backend_session_id: string;
  cwd: string;
  turns: number;
  created_at: number;
  updated_at: number;
  last_error: string | null;
  /** Newest first: `bound`, `rebound`, `error`, `deleted`, `imported`, `healed`, `reset`… */
  events: Array<{ at: number; kind: string; reason: string | null }>;
}

/** `GET /v1/admin/sessions` (`enabled`: whether any model runs in resume mode). */
export interface Sessions {
  object: "list";
  enabled: boolean;
  data: SessionRow[];
}

/** A configured backend's health (`data` of `GET /v1/admin/backends`). */
export interface BackendRow {
  name: string;
  type: string;
  usable: boolean;
  detail: string;
  version: string | null;
  /** The model ids that use it. */
  models: string[];
}

/** A coding-agent CLI the bridge knows, installed or not (`clis` of `GET /v1/admin/backends`). */
export interface CliRow {
  name: string;
  backend_type: string;
  package: string;
  installed: boolean;
  path: string | null;
  usable: boolean;
  version: string | null;
  detail: string | null;
  /** The backends of its type. */
  used_by: string[];
}

/**
 * `GET /v1/admin/backends`: the last background probe (src/backends/health), answered at once;
 * `?refresh=1` waits for a new one.
 */
export interface BackendsInfo {
  object: "list";
  data: BackendRow[];
  clis: CliRow[];
  /** When the probe ended (ms since the epoch). */
  checked_at: number;
  /** Milliseconds since then, as the bridge answered. */
  age_ms: number;
  /** Whether a new probe is running now. */
  probing: boolean;
}

/** Findings of `clawbridge doctor` and `clawbridge openclaw status`: what was checked, the verdict, the fix. */
export type FindingStatus = "ok" | "warn" | "fail" | "info";

export interface Finding {
  /** Stable id, e.g. `port`, `backend:opencode`, `lock:/tmp/clawbridge-x.lock`. */
  id: string;
  status: FindingStatus;
  /** One line: what this is about and the verdict. */
  title: string;
  /** What exactly was checked / seen. */
  detail?: string;
  /** What to do about it (for warn/fail). */
  fix?: string;
}

/** How many findings of each status. */
export interface Summary {
  ok: number;
  warn: number;
  fail: number;
  info: number;
}

/** `GET /v1/admin/doctor`. */
export interface Doctor {
  object: "doctor";
  ok: boolean;
  summary: Summary;
  findings: Finding[];
  checked_at: number;
}

/** A question the router is waiting on: inputs still missing (`gathering`) or a yes/no (`confirm`). */
export interface PendingRow {
  conversation: string;
  kind: "gathering" | "confirm";
  system: string;
  state: ConversationState;
  values: Record<string, unknown>;
  collected: string[];
  missing: string[];
  /** Questions asked so far (gathering only). */
  rounds: number | null;
  /** The paused run a "yes" resumes (confirm only). */
  resume_run: string | null;
  since: number;
  updated_at: number;
}

/** One router decision (newest first in `GET /v1/admin/router`). */
export interface DecisionRow {
  at: number;
  conversation: string;
  action: DecisionAction;
  system: string | null;
  /** The classifier's or the keyword fallback's; 1 for the code's own decisions (slash, reply, state). */
  confidence: number;
  source: DecisionSource;
  reason: string | null;
}

/** `GET /v1/admin/router`. */
export interface RouterInfo {
  object: "router";
  /** Whether systems (so the router) are configured. */
  enabled: boolean;
  gatherings: PendingRow[];
  confirmations: PendingRow[];
  decisions: DecisionRow[];
}

/** Counts of turns, tokens, limits and fallbacks (one backend's day, a backend's period, or all of it). */
export interface UsageTotals {
  /** Turns that ended completed or failed (aborted ones are not counted). */
  turns: number;
  failed: number;
  /** Prompt tokens of completed turns. */
  tokens_in: number;
  /** Completion tokens of completed turns. */
  tokens_out: number;
  /** Times the backend answered with a limit (usage, rate, quota). */
  limit_hits: number;
  /** Turns handed from this backend to the next model of a fallback chain. */
  fallbacks: number;
}

/** One backend on one day (UTC) in `GET /v1/admin/usage`. */
export interface UsageRow extends UsageTotals {
  /** `YYYY-MM-DD`, UTC. */
  day: string;
  backend: string;
  /** The backend's own words the last time it answered with a limit that day. */
  last_limit_message: string | null;
  last_limit_at: number | null;
  /** When it said that limit resets (ms since the epoch). */
  reset_at: number | null;
}

/** A backend's usage today and over the period asked for, and its current limit state. */
export interface UsageBackendState {
  backend: string;
  today: UsageTotals;
  total: UsageTotals;
  /** Its last limit message within the days kept (30), and when it came. */
  last_limit_message: string | null;
  last_limit_at: number | null;
  /** When its limit resets, if that is still to come (ms since the epoch). */
  next_reset_at: number | null;
}

/** A limit or a fallback since the bridge started (`recent` of `GET /v1/admin/usage`, newest first). */
export interface UsageEventRow {
  at: number;
  /** `limited`: a backend answered with a limit (`backend.limited`); `fallback`: a turn handed on (`turn.fallback`). */
  kind: "limited" | "fallback";
  /** The limited backend, or the one the turn was handed from. */
  backend: string;
  /** A fallback's models and the backend that took the turn. */
  from_model: string | null;
  to_model: string | null;
  to_backend: string | null;
  /** A fallback's reason (`limit_reached`, `auth_failed`, `backend_unavailable`, `exhausted`…). */
  reason: string | null;
  /** A limit's message (the backend's own words). */
  message: string | null;
  reset_at: number | null;
}

/** `GET /v1/admin/usage?days=N` (1..30, default 7): per backend per day, oldest day first. */
export interface Usage {
  object: "usage";
  days: number;
  /** The first and last day (UTC, `YYYY-MM-DD`) of the period. */
  from: string;
  to: string;
  /** The bridge's clock when it answered (ms since the epoch). */
  now: number;
  data: UsageRow[];
  totals: UsageTotals;
  /** Each backend configured or seen in the kept days, by name. */
  backends: UsageBackendState[];
  /** The last limits and fallbacks since the bridge started (kept in memory), newest first. */
  recent: UsageEventRow[];
}
