/**
 * The checks an ExecutionPlan must pass before the Builder runs it: known actions and node types,
 * unique step ids, known `dependsOn`, no cycle (src/workflows/engine/graph.ts), every
 * `${steps.ID.output}` of a plan step used only by a step that depends on it (directly or through
 * others), no such reference that could also mean the system's step of that id (in a node's
 * properties), node id params that are node ids or such references, the params each action needs,
 * literal node ids that exist on the edited canvas or are created by a step it depends on, safe file
 * paths and capability names, known models and systems when given. Every problem names its step and
 * says what to fix.
 */
import type { BuildStep, ExecutionPlan } from "./types.js";
import type { Canvas } from "../../wire/canvas.js";
import { NODE_TYPES, PLAN_ACTIONS } from "./types.js";
import { isObject } from "../../core/util/model-reply.js";
import { checkGraph, useProblem } from "../engine/graph.js";
// Node ids are compiled step ids (src/workflows/systems/schema.ts `id`).
import { isValidId } from "./canvas-ops.js";
import { parseTemplate, refsIn } from "../engine/template.js";

const CAPABILITY_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;
const CAPABILITY_KINDS = ["skill", "command", "instructions"] as const;
const q = (s: string): string => JSON.stringify(s);

/** What `validatePlan` may check against; every field is optional. */
export interface ValidateContext {
  /** The canvas being edited: literal node ids must exist on it (or be created by the plan). */
  canvas?: Canvas;
  /** Known model ids: an agent node's literal `model` must be one of them. */
  models?: readonly string[];
  /** Known system ids: a `system` node's literal `system` must be one of them. */
  systems?: readonly string[];
}

/** The plan's own steps a value refers to (`${steps.ID.output…}`, ID a step of `own`), each once. */
function ownRefs(v: unknown, own: ReadonlySet<string>): string[] {
  return [...new Set(refsIn(v, true).flatMap((r) => (r.kind === "step" && own.has(r.step) ? [r.step] : [])))];
}

/** A literal string (no reference to a plan step), or undefined when it holds one or is not a string. */
function literal(v: unknown, own: ReadonlySet<string>): string | undefined {
  return typeof v === "string" && ownRefs(v, own).length === 0 ? v : undefined;
}

/** A string left with a `${` after the build resolves its own steps (a system's template, an old `${name}`). */
const leftTemplate = (v: unknown, own: ReadonlySet<string>): boolean =>
  typeof v === "string" &&
  parseTemplate(v, true).some((p) =>
    "ref" in p ? !(p.ref.kind === "step" && own.has(p.ref.step)) : p.text.includes("${"),
  );

/** The params of a step that name a node (they must be node ids, or a plan step's result). */
function nodeParams(s: BuildStep): Array<[string, unknown]> {
  const p = s.params;
  if (s.action === "UPDATE_NODE" || s.action === "DELETE_NODE") return [["node", p.node]];
  if (s.action === "CONNECT_NODES")
    return [
      ["from", p.from],
      ["to", p.to],
    ];
  return s.action === "CREATE_NODE" && p.parent !== undefined ? [["parent", p.parent]] : [];
}

const nonEmpty = (v: unknown): boolean => typeof v === "string" && v.trim() !== "";

/** Problems with one step's params for its action (the action is known). */
function paramProblems(s: BuildStep, ctx: ValidateContext, own: ReadonlySet<string>): string[] {
  const p = s.params;
  const at = `step ${q(s.id)} (${s.action})`;
  const out: string[] = [];
  const checkNodeProps = (type: unknown, props: unknown): void => {
    if (!isObject(props)) return;
    if (type === "agent" && ctx.models && "model" in props) {
      const m = literal(props.model, own);
      if (m !== undefined && !ctx.models.includes(m))
        out.push(`${at}: model ${q(m)} is not a configured model; use one of ${ctx.models.join(", ") || "(none)"}`);
    }
    if (type === "approval" && "onTimeout" in props && !["reject", "approve"].includes(String(props.onTimeout)))
      out.push(`${at}: properties.onTimeout must be "reject" or "approve"`);
    if (type === "system" && ctx.systems && "system" in props) {
      const sys = literal(props.system, own);
      if (sys !== undefined && !ctx.systems.includes(sys))
        out.push(`${at}: system ${q(sys)} is not a deployed system; use one of ${ctx.systems.join(", ") || "(none)"}`);
    }
  };
  switch (s.action) {
    case "CREATE_NODE": {
      if (typeof p.type !== "string" || !(NODE_TYPES as readonly string[]).includes(p.type)) {
        out.push(
          `${at}: params.type ${p.type === undefined ? "is missing" : `${q(String(p.type))} is not a node type`}; use one of ${NODE_TYPES.join(", ")}`,
        );
      }
      if (!nonEmpty(p.label)) out.push(`${at}: params.label is missing; give the node a short label`);
      if (p.id !== undefined) {
        const id = literal(p.id, own);
        if (typeof p.id !== "string") out.push(`${at}: params.id must be a string`);
        else if (id !== undefined && !isValidId(id))
          out.push(
            `${at}: params.id ${q(id)} is not a node id; use lower-case letters, digits, - and _ (at most 64, starting with a letter or digit)`,
          );
      }
      if (p.properties !== undefined && !isObject(p.properties)) out.push(`${at}: params.properties must be an object`);
      if (p.type === "approval" && !(isObject(p.properties) && nonEmpty(p.properties.question)))
        out.push(`${at}: an approval node needs properties.question, what the person is asked before the run goes on`);
      if (p.parent !== undefined && !nonEmpty(p.parent)) out.push(`${at}: params.parent must be a node id`);
      if (
        p.position !== undefined &&
        !(isObject(p.position) && typeof p.position.x === "number" && typeof p.position.y === "number")
      ) {
        out.push(`${at}: params.position must be {"x": number, "y": number}`);
      }
      checkNodeProps(p.type, p.properties);
      break;
    }
    case "CONNECT_NODES": {
      if (!nonEmpty(p.from)) out.push(`${at}: params.from is missing; name the node the data comes from`);
      if (!nonEmpty(p.to)) out.push(`${at}: params.to is missing; name the node the data goes to`);
      if (nonEmpty(p.from) && p.from === p.to)
        out.push(`${at}: connects ${q(String(p.from))} to itself; an edge joins two different nodes`);
      break;
    }
    case "UPDATE_NODE": {
      if (!nonEmpty(p.node)) out.push(`${at}: params.node is missing; name the node to change`);
      if (!isObject(p.properties)) out.push(`${at}: params.properties must be an object of the property keys to set`);
      // An agent's model can be checked only when the node's type is known (on the canvas).
      const node = literal(p.node, own);
      const onCanvas = node !== undefined ? ctx.canvas?.nodes.find((n) => n.id === node) : undefined;
      if (onCanvas) checkNodeProps(onCanvas.type, p.properties);
      break;
    }
    case "DELETE_NODE": {
      if (!nonEmpty(p.node)) out.push(`${at}: params.node is missing; name the node to delete`);
      break;
    }
    case "CREATE_FILE": {
      if (!nonEmpty(p.path)) out.push(`${at}: params.path is missing; give a relative path in the sandbox`);
      else {
        const path = String(p.path);
        if (/^([\\/]|[A-Za-z]:)/.test(path) || path.split(/[\\/]/).includes("..")) {
          out.push(`${at}: params.path ${q(path)} must be a relative path inside the sandbox (no leading / and no ..)`);
        }
      }
      if (typeof p.content !== "string") out.push(`${at}: params.content must be the file's text (a string)`);
      break;
    }
    case "REGISTER_CAPABILITY": {
      const kind = typeof p.kind === "string" ? p.kind.trim().toLowerCase() : undefined;
      if (kind === "hook" || kind === "hooks") {
        out.push(
          `${at}: hooks are refused: a hook runs shell commands. To run a program, add a command node with an explicit argv instead.`,
        );
      } else if (!kind || !(CAPABILITY_KINDS as readonly string[]).includes(kind)) {
        out.push(
          `${at}: params.kind ${kind ? `${q(String(p.kind))} is not allowed` : "is missing"}; use one of ${CAPABILITY_KINDS.join(", ")}`,
        );
      }
      if (!nonEmpty(p.name)) out.push(`${at}: params.name is missing`);
      else if (!CAPABILITY_NAME.test(String(p.name)) || String(p.name).includes("..")) {
        out.push(`${at}: params.name ${q(String(p.name))} must be a file name: letters, digits, ., - and _`);
      }
      if (typeof p.content !== "string") out.push(`${at}: params.content must be a string`);
      break;
    }
  }
  return out;
}

/**
 * Every problem of a plan, each naming the step and saying what to fix; [] when it can run.
 * Checked: no steps; metadata.system against the canvas being edited; unknown actions; duplicate
 * step ids; dependsOn naming no step; cycles (the steps on each); `${steps.ID.output}` of a plan
 * step that is the step itself or one it does not depend on (directly or through others), or, in a
 * node's properties, whose ID is also a node's (ambiguous); a node param (from, to, node, parent)
 * left with a `${`; params each action needs; hooks; node ids for CREATE_NODE. With `ctx.canvas` (EDIT), a literal node id in UPDATE_NODE /
 * DELETE_NODE / CONNECT_NODES / CREATE_NODE.parent must be on the canvas or be the explicit
 * `params.id` of a CREATE_NODE the step depends on (directly or not — steps without a dependency
 * may run in parallel); a CREATE_NODE must not reuse an id on the canvas unless a step it depends
 * on deletes that node. With `ctx.models` / `ctx.systems`, literal agent models and system ids are
 * checked too.
 */
export function validatePlan(plan: ExecutionPlan, ctx: ValidateContext = {}): string[] {
  const problems: string[] = [];
  const steps = plan.steps;
  if (steps.length === 0) problems.push("the plan has no steps: add the steps that build the system");
  if (ctx.canvas && plan.metadata.system !== ctx.canvas.system) {
    problems.push(
      `metadata.system is ${q(plan.metadata.system)} but the canvas being edited is ${q(ctx.canvas.system)}: set metadata.system to ${q(ctx.canvas.system)}`,
    );
  }

  const own = new Set(steps.map((s) => s.id));
  const graph = checkGraph(steps);
  const ancestors = graph.ancestors;
  for (const p of graph.problems)
    problems.push(p.index === undefined ? p.message : `step ${q(steps[p.index]!.id)}: ${p.message}`);
  for (const s of steps) {
    if (!(PLAN_ACTIONS as readonly string[]).includes(s.action)) {
      problems.push(`step ${q(s.id)}: unknown action ${q(String(s.action))}; use one of ${PLAN_ACTIONS.join(", ")}`);
    } else problems.push(...paramProblems(s, ctx, own));
  }

  // explicit node ids created by the plan
  const creators = new Map<string, string[]>();
  for (const s of steps) {
    if (s.action !== "CREATE_NODE") continue;
    const id = literal(s.params.id, own);
    if (id !== undefined) creators.set(id, [...(creators.get(id) ?? []), s.id]);
  }
  for (const [id, by] of creators) {
    if (by.length > 1)
      problems.push(`steps ${by.map(q).join(", ")} all create a node with id ${q(id)}; node ids must be unique`);
  }

  // results of the plan's own steps
  const nodeIds = new Set([...(ctx.canvas?.nodes.map((n) => n.id) ?? []), ...creators.keys()]);
  for (const s of steps) {
    const at = `step ${q(s.id)}`;
    for (const step of ownRefs(s.params, own)) {
      const why = useProblem(graph, s.id, step);
      if (why) problems.push(`${at}: \${steps.${step}.output}: ${why}`);
    }
    const props = s.action === "CREATE_NODE" || s.action === "UPDATE_NODE" ? s.params.properties : undefined;
    for (const step of ownRefs(props, own).filter((id) => nodeIds.has(id))) {
      problems.push(
        `${at}: \${steps.${step}.output} in params.properties is ambiguous: "${step}" is a step of this plan and a node of the system. To use the plan step's result, give the plan step another id (e.g. "add_${step}"); to leave it to the system, write $\${steps.${step}.output}`,
      );
    }
    for (const [field, value] of nodeParams(s)) {
      if (leftTemplate(value, own))
        problems.push(
          `${at}: params.${field} ${q(String(value))} is not a node id: write the node's id, or \${steps.<step id>.output} for the node a step of this plan creates (steps: ${[...own].join(", ")})`,
        );
    }
  }

  if (ctx.canvas) {
    const onCanvas = new Set(ctx.canvas.nodes.map((n) => n.id));
    const existing = [...onCanvas];
    const known =
      existing.length > 0
        ? `nodes on the canvas: ${existing.slice(0, 30).join(", ")}${existing.length > 30 ? ", …" : ""}`
        : "the canvas has no nodes";
    const deletedBefore = (s: BuildStep, id: string): boolean =>
      steps.some(
        (d) =>
          d.action === "DELETE_NODE" && literal(d.params.node, own) === id && (ancestors.get(s.id)?.has(d.id) ?? false),
      );
    for (const s of steps) {
      const mine = ancestors.get(s.id) ?? new Set<string>();
      for (const [field, value] of nodeParams(s)) {
        const id = literal(value, own);
        // A plan step's result, missing, or not a node id: checked above.
        if (id === undefined || id.trim() === "" || leftTemplate(id, own)) continue;
        if (onCanvas.has(id)) continue;
        const by = creators.get(id);
        if (by?.some((c) => mine.has(c))) continue;
        if (by) {
          problems.push(
            `step ${q(s.id)}: params.${field} ${q(id)} is created by step ${q(by[0]!)}, which it does not depend on; add ${q(by[0]!)} to its dependsOn`,
          );
        } else {
          problems.push(
            `step ${q(s.id)}: params.${field} ${q(id)} is not a node on the canvas and no step creates it; use an existing node id or \${steps.<step id>.output} of the CREATE_NODE step (${known})`,
          );
        }
      }
      if (s.action === "CREATE_NODE") {
        const id = literal(s.params.id, own);
        if (id !== undefined && onCanvas.has(id) && !deletedBefore(s, id)) {
          problems.push(
            `step ${q(s.id)}: a node with id ${q(id)} is already on the canvas; change it with UPDATE_NODE or choose another id`,
          );
        }
      }
    }
  }
  return problems;
}
