/** The JSON the bridge answers with (src/request/http/admin-routes.ts, systems-routes.ts, builder-routes.ts). */

export interface List<T> {
  object: "list";
  data: T[];
}

export interface QueueStats {
  running: number;
  waiting: number;
  conversations: number;
  maxConcurrent: number;
  maxQueue: number;
  processes: number;
}

export interface TurnRow {
  id: string;
  conversation: string;
  model: string;
  backend: string;
  mode: string | null;
  status: "running" | "completed" | "failed" | "aborted";
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

export interface Turns {
  running: TurnRow[];
  recent: TurnRow[];
  queue: QueueStats;
  live: boolean;
}

export interface ProcessRow {
  pid: number | null;
  command: string;
  label: string | null;
  cwd: string | null;
  started_at: number;
  /** A warm CLI process, kept between turns (with its backend, state, turns and memory). */
  warm?: boolean;
  backend?: string;
  busy?: boolean;
  turns?: number;
  rss_bytes?: number | null;
}

export interface SessionRow {
  key: string;
  backend: string;
  model: string | null;
  backend_session_id: string;
  cwd: string;
  turns: number;
  created_at: number;
  updated_at: number;
  last_error: string | null;
  events: Array<{ at: number; kind: string; reason: string | null }>;
}

export interface BackendRow {
  name: string;
  type: string;
  usable: boolean;
  detail: string;
  version: string | null;
  models: string[];
}

export interface CliRow {
  name: string;
  backend_type: string;
  package: string;
  installed: boolean;
  path: string | null;
  usable: boolean;
  version: string | null;
  detail: string | null;
  used_by: string[];
}

export interface Finding {
  id: string;
  status: "ok" | "warn" | "fail" | "info";
  title: string;
  detail?: string;
  fix?: string;
}

export interface Doctor {
  ok: boolean;
  summary: { ok: number; warn: number; fail: number; info: number };
  findings: Finding[];
  checked_at: number;
}

export interface SystemRow {
  id: string;
  name: string;
  description: string;
  kind: string;
  examples: string[];
  inputs: { type: "object"; properties: Record<string, Record<string, unknown>>; required?: string[] };
  side_effects: boolean;
  confirm: string;
  source: string;
}

export interface CanvasSummary {
  id: string;
  name: string;
  description: string;
  status: "draft" | "deployed";
  version: number;
  nodes: number;
  edges: number;
  updated_at: number;
}

export interface CanvasNode {
  id: string;
  type: string;
  label: string;
  properties: Record<string, unknown>;
  position: { x: number; y: number };
  parent?: string;
}

export interface CanvasEdge {
  id: string;
  from: string;
  to: string;
}

export interface Canvas {
  id: string;
  system: string;
  name: string;
  description: string;
  status: "draft" | "deployed";
  version: number;
  nodes: CanvasNode[];
  edges: CanvasEdge[];
  settings: Record<string, unknown>;
  updatedAt: number;
}

export interface StepRow {
  id: string;
  status: string;
  attempts: number;
  started_at: number | null;
  ended_at: number | null;
  output: unknown;
  error: string | null;
}

export interface RunRow {
  id: string;
  system: string;
  status: string;
  inputs: Record<string, unknown>;
  output: unknown;
  error: string | null;
  failed_step: string | null;
  conversation: string | null;
  origin: string;
  created_at: number;
  started_at: number | null;
  ended_at: number | null;
  steps: StepRow[];
}

export interface PendingRow {
  conversation: string;
  kind: "gathering" | "confirm";
  system: string;
  state: string;
  values: Record<string, unknown>;
  collected: string[];
  missing: string[];
  rounds: number | null;
  resume_run: string | null;
  since: number;
  updated_at: number;
}

export interface DecisionRow {
  at: number;
  conversation: string;
  action: string;
  system: string | null;
  confidence: number | null;
  source: string;
  reason: string | null;
}

export interface RouterInfo {
  enabled: boolean;
  gatherings: PendingRow[];
  confirmations: PendingRow[];
  decisions: DecisionRow[];
}
