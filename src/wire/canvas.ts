/**
 * A system built by chat, as the bridge keeps it and sends it: a **canvas** of nodes and edges
 * (src/workflows/builder), in `GET /v1/canvases[/:id]` and in the `node.*` / `edge.*` events.
 * Plain types only, and no imports from outside src/wire: the dashboard (packages/dashboard)
 * type-checks against these same declarations.
 */

/** What a node does when the system runs. `input`/`output` carry data in and out; the rest are steps. */
export type NodeType = "input" | "output" | "agent" | "webhook" | "command" | "mcp" | "approval" | "system";

export interface Position {
  x: number;
  y: number;
}

/**
 * One node. `id` is also the compiled step id (lower-case letters, digits, - and _), so a run's
 * steps carry the names the person saw on the canvas.
 * `properties` by type:
 * - input: `{name?, type?: "string"|"number"|"integer"|"boolean", description?, required?: boolean, enum?, default?}`
 *   (`name` defaults to the node id);
 * - output: none (its one incoming edge names the step whose output is the system's output);
 * - agent: `{model, prompt?, system?, timeoutSeconds?}` — a clawbridge model id and a prompt
 *   template (`{{topic}}` names an input or an upstream node; `${inputs.x}` and
 *   `${steps.a.output}` work as in any system);
 * - webhook / command / mcp: that run kind's settings (src/workflows/systems/schema.ts) without `kind`;
 * - approval: `{question, show?, timeoutSeconds?, onTimeout?: "reject"|"approve"}` — the run waits
 *   for a person's yes (`{{name}}` in `question` as in a prompt; it shows the values of the nodes
 *   connected to it unless `show` says what);
 * - system: `{system: "<id>", with?: {...}}`.
 */
export interface CanvasNode {
  id: string;
  type: NodeType;
  label: string;
  properties: Record<string, unknown>;
  position: Position;
  /** A node it belongs to (deleting a node deletes its children). */
  parent?: string;
}

/** Data flow from one node to another, so also a dependency. */
export interface CanvasEdge {
  id: string;
  from: string;
  to: string;
}

export type CanvasStatus = "draft" | "deployed";

/** Settings a CONFIGURE request changes (they go into the compiled system). */
export interface CanvasSettings {
  confirm?: "auto" | "always" | "never";
  /** false: deployed but not offered by the router. */
  enabled?: boolean;
  /** Default values of inputs, by input name. */
  defaults?: Record<string, unknown>;
  examples?: string[];
  keywords?: string[];
  /** Schedules (a system's `triggers:`), set by chat ("run it every weekday at 8"). */
  triggers?: CanvasTrigger[];
}

/** A schedule on a canvas: the system's `triggers[]` entry it compiles to. */
export interface CanvasTrigger {
  cron: string;
  /** IANA time zone (the bridge's when it was set by chat). */
  timezone?: string;
  inputs?: Record<string, unknown>;
  catchUp?: boolean;
  /** The conversation that set it: told of each of its runs on its next turn. */
  conversation?: string;
}

export interface Canvas {
  /** The system id it deploys as. */
  system: string;
  name: string;
  description: string;
  status: CanvasStatus;
  /** Applied-plan version: 0 when created, +1 per applied plan (undo goes back one). */
  version: number;
  nodes: CanvasNode[];
  edges: CanvasEdge[];
  settings: CanvasSettings;
  updatedAt: number;
}

/** A snapshot of a canvas (one per applied plan). */
export interface CanvasVersionInfo {
  version: number;
  reason: string;
  createdAt: number;
}

/** One row of `GET /v1/canvases`: a canvas without its nodes and edges (their counts instead). */
export interface CanvasSummary {
  /** The system id. */
  id: string;
  object: "canvas";
  name: string;
  description: string;
  status: CanvasStatus;
  version: number;
  nodes: number;
  edges: number;
  updated_at: number;
  /** The system version the deployed canvas runs as (null: a draft). */
  deployed_version: number | null;
  /** The canvas was changed since that version was deployed. */
  changed_since_deploy: boolean;
}

/** `GET /v1/canvases/:id`: the whole canvas, under its system id, with its snapshots. */
export type CanvasDetail = Canvas & {
  id: string;
  object: "canvas";
  versions: CanvasVersionInfo[];
  /** The system version the deployed canvas runs as (null: a draft). */
  deployedVersion: number | null;
  /** The canvas was changed since that version was deployed (an edit or undo not deployed yet). */
  changedSinceDeploy: boolean;
};
