/**
 * The builder's vocabulary: a system built by chat is a **canvas** (nodes and edges) that compiles
 * to the `plan` system format the router runs, and the Architect's **ExecutionPlan** is the list of
 * canvas and sandbox operations that builds or edits one. These are the types every part of
 * src/workflows/builder shares (the store, the MCP tools, the Supervisor, the Architect, the
 * Builder); the canvas itself (`Canvas`, `CanvasNode`, `CanvasEdge`, `NodeType`…) is declared in
 * src/wire/canvas.ts, since the bridge sends it as it is.
 */
import type { NodeType } from "../../wire/canvas.js";

/** Every node type (the canvas types themselves are in src/wire/canvas.ts: the dashboard reads them too). */
export const NODE_TYPES: readonly NodeType[] = [
  "input",
  "output",
  "agent",
  "webhook",
  "command",
  "mcp",
  "approval",
  "system",
];
/** Node types that become a step of the compiled plan. */
export const STEP_NODE_TYPES: readonly NodeType[] = ["agent", "webhook", "command", "mcp", "approval", "system"];

/** The Architect's actions. Each is carried out by calling one MCP tool. */
export type PlanAction =
  | "CREATE_NODE"
  | "CONNECT_NODES"
  | "UPDATE_NODE"
  | "DELETE_NODE"
  | "CREATE_FILE"
  | "REGISTER_CAPABILITY";
export const PLAN_ACTIONS: readonly PlanAction[] = [
  "CREATE_NODE",
  "CONNECT_NODES",
  "UPDATE_NODE",
  "DELETE_NODE",
  "CREATE_FILE",
  "REGISTER_CAPABILITY",
];

/**
 * One step of an ExecutionPlan. `params` by action, and the step's result (its output):
 * - CREATE_NODE `{type, label, id?, properties?, parent?, position?}` → the node id;
 * - CONNECT_NODES `{from, to}` → the edge id;
 * - UPDATE_NODE `{node, properties: {key: value}}` → the node id;
 * - DELETE_NODE `{node}` → the node id;
 * - CREATE_FILE `{path, content}` → the file's path in the sandbox;
 * - REGISTER_CAPABILITY `{kind: "skill"|"command"|"instructions", name, description?, content}` → the file's path
 *   (a Claude Code skill `.claude/skills/<name>/SKILL.md`, a slash command `.claude/commands/<name>.md`,
 *   or `AGENTS.md`; hooks are refused: they run shell commands).
 * Strings in `params` may hold `${steps.ID.output}`: the result of step ID of this plan, which this
 * step depends on (directly or not). `$${` is a literal `${`; every other `${…}` (the templates of
 * the system being built) is left as written (src/workflows/engine/template.ts).
 */
export interface BuildStep {
  id: string;
  name: string;
  action: PlanAction;
  params: Record<string, unknown>;
  dependsOn: string[];
  /** Retries after the first attempt, for errors that can pass (at most 3; default 3). */
  retryCount: number;
  /** Between attempts (default 1000). */
  retryDelayMs: number;
}

export interface PlanMetadata {
  /** The system (canvas) it builds or edits. */
  system: string;
  name: string;
  description: string;
  /** One or two sentences shown to the person. */
  summary: string;
  /** Messages a person would type to run it (a BUILD puts them in the canvas settings; the keyword fallback and the classifier read them). */
  examples?: string[];
  /** Words or short phrases that point at it (the keyword fallback matches them on word boundaries). */
  keywords?: string[];
}

export interface ExecutionPlan {
  metadata: PlanMetadata;
  steps: BuildStep[];
}

/** The Supervisor's classes. */
export type Intent = "BUILD" | "EDIT" | "QUERY" | "EXPORT" | "CONFIGURE" | "UNKNOWN";
export const INTENTS: readonly Intent[] = ["BUILD", "EDIT", "QUERY", "EXPORT", "CONFIGURE", "UNKNOWN"];

export interface IntentVerdict {
  intent: Intent;
  confidence: number;
  source: "model" | "keywords";
}

/** A step's status in a build. */
export type BuildStepStatus = "pending" | "running" | "completed" | "failed" | "skipped";
