/**
 * Edits of a canvas as pure functions: each takes a `Canvas` value and returns a new one (the input
 * is never changed), plus what was created or removed. No I/O: src/workflows/builder/canvas-store.ts keeps
 * canvases, src/workflows/builder/canvas-tools.ts runs these inside one store transaction and tells the bus.
 *
 * Rules kept here (so every caller — the MCP tools, the Architect's plans, tests — gets them):
 * - node ids are step ids: `^[a-z0-9][a-z0-9_-]{0,63}$`, unique in the canvas; without an id one is
 *   made from the label (`Fetch news` → `fetch-news`, then `fetch-news-2`, …);
 * - edges are data flow, so dependencies: no self-loop, no duplicate, none into an `input` node or
 *   out of an `output` node, none that closes a cycle;
 * - deleting a node deletes its edges and its children (nodes whose `parent` is it), recursively.
 * Every refusal is a `CanvasOpError` whose message says what to do instead.
 */
import { isObject } from "../../core/util/model-reply.js";
import { checkGraph } from "../engine/graph.js";
import { NODE_TYPES } from "./types.js";
import type { Canvas, CanvasEdge, CanvasNode, NodeType, Position } from "../../wire/canvas.js";

export type CanvasOpErrorCode =
  | "invalid_system"
  | "invalid_id"
  | "duplicate_id"
  | "unknown_type"
  | "invalid_label"
  | "invalid_properties"
  | "invalid_position"
  | "node_not_found"
  | "invalid_parent"
  | "self_loop"
  | "duplicate_edge"
  | "edge_into_input"
  | "edge_from_output"
  | "cycle"
  | "invalid_key"
  | "invalid_value"
  | "invalid_layout"
  | "canvas_not_found"
  | "canvas_exists"
  | "invalid_status";

/** A refused canvas edit. The message says what to fix; `code` is for programs. Never worth retrying as is. */
export class CanvasOpError extends Error {
  constructor(
    readonly code: CanvasOpErrorCode,
    message: string,
  ) {
    super(message);
    this.name = "CanvasOpError";
  }
}

/** Node ids and system ids alike (they become step and system ids). */
export const ID_PATTERN = /^[a-z0-9][a-z0-9_-]{0,63}$/;
const ID_RULE = "lower-case letters, digits, - and _, at most 64, starting with a letter or digit";

/** Grid spacing, shared by the default position of a new node and the layouts. */
export const COLUMN_WIDTH = 280;
export const ROW_HEIGHT = 140;
const GRID_COLUMNS = 4;
const MAX_LABEL = 200;
/** Path segments that would reach an object's prototype. */
const FORBIDDEN_SEGMENTS = new Set(["__proto__", "prototype", "constructor"]);

export function isValidId(id: unknown): id is string {
  return typeof id === "string" && ID_PATTERN.test(id);
}

/** A system id, or a refusal that says what one looks like. */
export function checkSystemId(system: unknown): string {
  if (!isValidId(system))
    throw new CanvasOpError(
      "invalid_system",
      `"${String(system)}" is not a valid system id: use ${ID_RULE} (e.g. "news-digest").`,
    );
  return system;
}

export function emptyCanvas(system: string, name?: string, description?: string): Canvas {
  checkSystemId(system);
  return {
    system,
    name: name?.trim() || system,
    description: description ?? "",
    status: "draft",
    version: 0,
    nodes: [],
    edges: [],
    settings: {},
    updatedAt: Date.now(),
  };
}

const clone = <T>(v: T): T => (v === undefined ? v : (JSON.parse(JSON.stringify(v)) as T));

function findNode(c: Canvas, id: unknown, role = "node"): CanvasNode {
  const n = typeof id === "string" ? c.nodes.find((x) => x.id === id) : undefined;
  if (!n) {
    const known = c.nodes.map((x) => x.id);
    throw new CanvasOpError(
      "node_not_found",
      `No ${role} "${String(id)}" on canvas ${c.system}. ${known.length ? `Its nodes: ${known.join(", ")}.` : "The canvas has no nodes yet."}`,
    );
  }
  return n;
}

function checkPosition(p: unknown, what = "position"): Position {
  if (
    !isObject(p) ||
    typeof p.x !== "number" ||
    typeof p.y !== "number" ||
    !Number.isFinite(p.x) ||
    !Number.isFinite(p.y)
  ) {
    throw new CanvasOpError("invalid_position", `${what} must be {"x": <number>, "y": <number>}.`);
  }
  return { x: p.x, y: p.y };
}

function checkLabel(label: unknown): string {
  if (typeof label !== "string" || !label.trim())
    throw new CanvasOpError("invalid_label", 'A node needs a label: a short name such as "Fetch news".');
  const t = label.trim();
  if (t.length > MAX_LABEL)
    throw new CanvasOpError("invalid_label", `A label is at most ${MAX_LABEL} characters (this one has ${t.length}).`);
  return t;
}

function checkProperties(p: unknown): Record<string, unknown> {
  if (p === undefined || p === null) return {};
  if (!isObject(p))
    throw new CanvasOpError(
      "invalid_properties",
      'properties must be an object, e.g. {"model": "m", "prompt": "..."}.',
    );
  checkKeys(p, "properties");
  return clone(p);
}

/** No `__proto__`-like keys anywhere in a value that will be merged into properties. */
function checkKeys(v: unknown, at: string): void {
  if (Array.isArray(v)) return v.forEach((x, i) => checkKeys(x, `${at}[${i}]`));
  if (!isObject(v)) return;
  for (const [k, x] of Object.entries(v)) {
    if (FORBIDDEN_SEGMENTS.has(k))
      throw new CanvasOpError("invalid_key", `"${k}" (in ${at}) is not allowed as a property name.`);
    checkKeys(x, `${at}.${k}`);
  }
}

/** `Fetch the News!` → `fetch-the-news`; "" when nothing usable is left. */
export function slugify(label: string): string {
  return label
    .normalize("NFKD")
    .replace(/[\u0300-\u036f]/g, "")
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "")
    .slice(0, 64)
    .replace(/-+$/g, "");
}

/** `base`, else `base-2`, `base-3`… (cut so the result stays a valid id). */
function uniqueId(base: string, taken: ReadonlySet<string>): string {
  if (!taken.has(base)) return base;
  for (let n = 2; ; n++) {
    const suffix = `-${n}`;
    const id = `${base.slice(0, 64 - suffix.length).replace(/-+$/g, "")}${suffix}`;
    if (!taken.has(id)) return id;
  }
}

const gridSpot = (i: number): Position => ({
  x: COLUMN_WIDTH * (i % GRID_COLUMNS),
  y: ROW_HEIGHT * Math.floor(i / GRID_COLUMNS),
});

/** The first grid spot, from the node count on, that no node occupies. */
function nextFreeSpot(c: Canvas): Position {
  const used = new Set(c.nodes.map((n) => `${n.position.x},${n.position.y}`));
  for (let i = c.nodes.length; ; i++) {
    const p = gridSpot(i);
    if (!used.has(`${p.x},${p.y}`)) return p;
  }
}

export interface CreateNodeArgs {
  type: NodeType | string;
  label: string;
  id?: string;
  properties?: Record<string, unknown>;
  parent?: string;
  position?: Position;
}

export function createNode(c: Canvas, args: CreateNodeArgs): { canvas: Canvas; node: CanvasNode } {
  if (!NODE_TYPES.includes(args.type as NodeType)) {
    throw new CanvasOpError(
      "unknown_type",
      `Unknown node type "${String(args.type)}". Use one of: ${NODE_TYPES.join(", ")}.`,
    );
  }
  const label = checkLabel(args.label);
  const taken = new Set(c.nodes.map((n) => n.id));
  let id: string;
  if (args.id !== undefined && args.id !== null && args.id !== "") {
    if (!isValidId(args.id))
      throw new CanvasOpError(
        "invalid_id",
        `"${String(args.id)}" is not a valid node id: use ${ID_RULE}, or leave id out to derive it from the label.`,
      );
    if (taken.has(args.id))
      throw new CanvasOpError(
        "duplicate_id",
        `A node "${args.id}" already exists on canvas ${c.system}. Pick another id, leave id out, or change that node with an update.`,
      );
    id = args.id;
  } else {
    id = uniqueId(slugify(label) || args.type, taken);
  }
  let parent: string | undefined;
  if (args.parent !== undefined && args.parent !== null && args.parent !== "")
    parent = findNode(c, args.parent, "parent node").id;
  const position =
    args.position !== undefined && args.position !== null ? checkPosition(args.position) : nextFreeSpot(c);
  const node: CanvasNode = {
    id,
    type: args.type as NodeType,
    label,
    properties: checkProperties(args.properties),
    position,
  };
  if (parent) node.parent = parent;
  return { canvas: { ...c, nodes: [...c.nodes, node] }, node: clone(node) };
}

export function connectNodes(c: Canvas, args: { from: string; to: string }): { canvas: Canvas; edge: CanvasEdge } {
  const from = findNode(c, args.from, "source node");
  const to = findNode(c, args.to, "target node");
  if (from.id === to.id)
    throw new CanvasOpError(
      "self_loop",
      `A node cannot feed itself ("${from.id}" → "${to.id}"). Connect two different nodes.`,
    );
  if (c.edges.some((e) => e.from === from.id && e.to === to.id))
    throw new CanvasOpError("duplicate_edge", `"${from.id}" is already connected to "${to.id}"; nothing to do.`);
  if (to.type === "input")
    throw new CanvasOpError(
      "edge_into_input",
      `"${to.id}" is an input node: data comes into the system there, nothing flows into it. Connect it the other way ("${to.id}" → "${from.id}") or pick another target.`,
    );
  if (from.type === "output")
    throw new CanvasOpError(
      "edge_from_output",
      `"${from.id}" is an output node: it is where the system's result leaves, nothing flows out of it. Connect into it instead.`,
    );
  // The engine's graph checker: `to` already leads to `from` when it is one of `from`'s ancestors.
  const sources = (id: string) => c.edges.filter((e) => e.to === id).map((e) => e.from);
  const graph = checkGraph(c.nodes.map((n) => ({ id: n.id, dependsOn: sources(n.id) })));
  if (graph.ancestors.get(from.id)?.has(to.id)) {
    throw new CanvasOpError(
      "cycle",
      `Connecting "${from.id}" → "${to.id}" would make a cycle ("${to.id}" already leads to "${from.id}"); edges are data flow, so they must not loop. Remove an edge first or connect differently.`,
    );
  }
  const edge: CanvasEdge = { id: `e-${from.id}-${to.id}`, from: from.id, to: to.id };
  return { canvas: { ...c, edges: [...c.edges, edge] }, edge: { ...edge } };
}

/** Descendants of `id` through `parent` (not `id` itself), breadth first. */
function descendants(c: Canvas, id: string): string[] {
  const out: string[] = [];
  const seen = new Set([id]);
  const queue = [id];
  while (queue.length) {
    const p = queue.shift()!;
    for (const n of c.nodes) {
      if (n.parent === p && !seen.has(n.id)) {
        seen.add(n.id);
        out.push(n.id);
        queue.push(n.id);
      }
    }
  }
  return out;
}

function setPath(target: Record<string, unknown>, path: string[], value: unknown, key: string): void {
  let obj = target;
  for (let i = 0; i < path.length - 1; i++) {
    const seg = path[i]!;
    const cur = obj[seg];
    if (cur === undefined) {
      if (value === null) return; // removing under something absent: nothing to do
      obj[seg] = {};
    } else if (!isObject(cur)) {
      throw new CanvasOpError(
        "invalid_key",
        `Cannot set "${key}": properties.${path.slice(0, i + 1).join(".")} is ${Array.isArray(cur) ? "a list" : `a ${typeof cur}`}, not an object. Set properties.${path.slice(0, i + 1).join(".")} as a whole instead.`,
      );
    }
    obj = obj[seg] as Record<string, unknown>;
  }
  const last = path[path.length - 1]!;
  if (value === null) delete obj[last];
  else obj[last] = clone(value);
}

/**
 * Change one thing on a node. `key`: `label`, `position` ({x, y}), `position.x`, `position.y`,
 * `parent` (a node id; null detaches), `properties` (the whole object; null empties it),
 * `properties.<k>` or a bare `<k>` (the property `<k>`; `a.b` sets nested objects). A `null` value
 * removes a property. The id cannot change (delete the node and create it again), nor the node's
 * type (a bare `type` is the property, e.g. an input's data type; a node type as its value is refused).
 */
export function updateProperty(
  c: Canvas,
  nodeId: string,
  key: string,
  value: unknown,
): { canvas: Canvas; node: CanvasNode } {
  const old = findNode(c, nodeId);
  if (typeof key !== "string" || !key.trim())
    throw new CanvasOpError(
      "invalid_key",
      "Name the key to change: label, position, position.x, position.y, parent, properties, or properties.<name> (or just <name>).",
    );
  key = key.trim();
  if (value === undefined)
    throw new CanvasOpError("invalid_value", `Give a value for "${key}" (null removes a property).`);
  const node: CanvasNode = clone(old);
  if (key === "id") {
    throw new CanvasOpError(
      "invalid_key",
      `A node's id cannot change (it is the step id runs are recorded under). Delete "${old.id}" and create the node again with the new id, then reconnect it.`,
    );
  } else if (key === "type" && NODE_TYPES.includes(value as NodeType)) {
    // A bare `type` is the property (an input's data type); a node type as its value means the
    // caller wanted to change the node's kind, which cannot be done in place.
    throw new CanvasOpError(
      "invalid_key",
      `A node's type cannot change. Delete "${old.id}" and create a ${String(value)} node instead; the key "type" (= "properties.type") is an input's data type (string, number, integer, boolean).`,
    );
  } else if (key === "label") {
    if (value === null)
      throw new CanvasOpError("invalid_value", "A node must keep a label; give a new one instead of null.");
    node.label = checkLabel(value);
  } else if (key === "position") {
    if (value === null)
      throw new CanvasOpError("invalid_value", 'A node must keep a position; give {"x": <number>, "y": <number>}.');
    node.position = checkPosition(value);
  } else if (key === "position.x" || key === "position.y") {
    if (typeof value !== "number" || !Number.isFinite(value))
      throw new CanvasOpError("invalid_value", `${key} must be a number.`);
    node.position = { ...node.position, [key.slice(9)]: value };
  } else if (key === "parent") {
    if (value === null || value === "") delete node.parent;
    else {
      const p = findNode(c, value, "parent node");
      if (p.id === old.id) throw new CanvasOpError("invalid_parent", `"${old.id}" cannot be its own parent.`);
      if (descendants(c, old.id).includes(p.id))
        throw new CanvasOpError(
          "invalid_parent",
          `"${p.id}" belongs to "${old.id}" already (it is one of its children), so it cannot be its parent.`,
        );
      node.parent = p.id;
    }
  } else if (key === "properties") {
    node.properties = checkProperties(value);
  } else {
    const rel = key.startsWith("properties.") ? key.slice("properties.".length) : key;
    const path = rel.split(".");
    if (path.some((s) => !s))
      throw new CanvasOpError(
        "invalid_key",
        `"${key}" is not a property path: names separated by single dots, e.g. "properties.model" or "with.topic".`,
      );
    const bad = path.find((s) => FORBIDDEN_SEGMENTS.has(s));
    if (bad) throw new CanvasOpError("invalid_key", `"${bad}" is not allowed as a property name.`);
    checkKeys(value, key);
    setPath(node.properties, path, value, key);
  }
  return { canvas: { ...c, nodes: c.nodes.map((n) => (n.id === old.id ? node : n)) }, node: clone(node) };
}

export function deleteNode(
  c: Canvas,
  nodeId: string,
): { canvas: Canvas; removedNodes: string[]; removedEdges: string[] } {
  const node = findNode(c, nodeId);
  const removedNodes = [node.id, ...descendants(c, node.id)];
  const gone = new Set(removedNodes);
  const removedEdges = c.edges.filter((e) => gone.has(e.from) || gone.has(e.to)).map((e) => e.id);
  return {
    canvas: {
      ...c,
      nodes: c.nodes.filter((n) => !gone.has(n.id)),
      edges: c.edges.filter((e) => !gone.has(e.from) && !gone.has(e.to)),
    },
    removedNodes,
    removedEdges,
  };
}

export type LayoutKind = "layered" | "grid";
export const LAYOUTS: readonly LayoutKind[] = ["layered", "grid"];

/**
 * Place every node. `layered`: a column per depth (the longest path from a node without incoming
 * edges), x = 280·depth, y = 140·row (rows in creation order). `grid`: rows of 4 in creation order.
 */
export function applyLayout(c: Canvas, kind: LayoutKind): Canvas {
  if (!LAYOUTS.includes(kind))
    throw new CanvasOpError("invalid_layout", `Unknown layout "${String(kind)}". Use one of: ${LAYOUTS.join(", ")}.`);
  if (kind === "grid") return { ...c, nodes: c.nodes.map((n, i) => ({ ...n, position: gridSpot(i) })) };
  const depth = new Map<string, number>();
  const incoming = new Map<string, string[]>();
  for (const e of c.edges) incoming.set(e.to, [...(incoming.get(e.to) ?? []), e.from]);
  const visiting = new Set<string>();
  const depthOf = (id: string): number => {
    const known = depth.get(id);
    if (known !== undefined) return known;
    if (visiting.has(id)) return 0; // a cycle cannot be made through connectNodes; stay total anyway
    visiting.add(id);
    const d = Math.max(-1, ...(incoming.get(id) ?? []).map(depthOf)) + 1;
    visiting.delete(id);
    depth.set(id, d);
    return d;
  };
  const rows = new Map<number, number>();
  const nodes = c.nodes.map((n) => {
    const d = depthOf(n.id);
    const row = rows.get(d) ?? 0;
    rows.set(d, row + 1);
    return { ...n, position: { x: COLUMN_WIDTH * d, y: ROW_HEIGHT * row } };
  });
  return { ...c, nodes };
}
