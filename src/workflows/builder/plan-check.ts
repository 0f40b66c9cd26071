/**
 * The checks an ExecutionPlan must pass before the Builder runs it: known actions and node types,
 * unique step ids, known `dependsOn`, no cycle, every `${var}` produced by a step it depends on
 * (directly or through others), the params each action needs, literal node ids that exist on the
 * edited canvas or are created by a step it depends on, safe file paths and capability names, known
 * models and systems when given. Every problem names its step and says what to fix.
 */
import type { BuildStep, ExecutionPlan } from "./types.js";
import type { Canvas } from "../../wire/canvas.js";
import { NODE_TYPES, PLAN_ACTIONS } from "./types.js";
import { variablesIn } from "./plan-vars.js";
import { isObject } from "../../core/util/model-reply.js";

const VAR_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** Node ids are compiled step ids (src/workflows/systems/schema.ts `id`). */
const NODE_ID = /^[a-z0-9][a-z0-9_-]{0,63}$/;
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

/** Steps each step depends on, directly or through others (unknown ids ignored; safe with cycles). */
function ancestorsOf(steps: readonly BuildStep[]): Map<string, Set<string>> {
  const deps = new Map<string, string[]>();
  for (const s of steps) deps.set(s.id, [...(deps.get(s.id) ?? []), ...s.dependsOn]);
  const out = new Map<string, Set<string>>();
  for (const id of deps.keys()) {
    const seen = new Set<string>();
    const stack = [...(deps.get(id) ?? [])];
    while (stack.length > 0) {
      const d = stack.pop()!;
      if (seen.has(d) || !deps.has(d)) continue;
      seen.add(d);
      stack.push(...(deps.get(d) ?? []));
    }
    out.set(id, seen);
  }
  return out;
}

/** Each dependency cycle once, as the step ids along it (first id not repeated). */
function cyclesOf(steps: readonly BuildStep[]): string[][] {
  const deps = new Map<string, string[]>();
  for (const s of steps)
    if (!deps.has(s.id))
      deps.set(
        s.id,
        s.dependsOn.filter((d, i, a) => a.indexOf(d) === i),
      );
  const state = new Map<string, 1 | 2>(); // 1 on the stack, 2 done
  const path: string[] = [];
  const cycles: string[][] = [];
  const seenKeys = new Set<string>();
  const visit = (root: string): void => {
    // Iterative DFS: a plan from a model may be long.
    const frames: Array<{ id: string; next: number }> = [{ id: root, next: 0 }];
    state.set(root, 1);
    path.push(root);
    while (frames.length > 0) {
      const f = frames[frames.length - 1]!;
      const ds = deps.get(f.id) ?? [];
      if (f.next < ds.length) {
        const d = ds[f.next++]!;
        if (!deps.has(d)) continue;
        const st = state.get(d);
        if (st === 1) {
          const cycle = path.slice(path.indexOf(d));
          const key = [...cycle].sort().join("\u0000");
          if (!seenKeys.has(key)) {
            seenKeys.add(key);
            cycles.push(cycle);
          }
        } else if (st === undefined) {
          state.set(d, 1);
          path.push(d);
          frames.push({ id: d, next: 0 });
        }
      } else {
        state.set(f.id, 2);
        path.pop();
        frames.pop();
      }
    }
  };
  for (const id of deps.keys()) if (!state.has(id)) visit(id);
  return cycles;
}

/** A literal string (no `${var}`), or undefined when it holds a variable or is not a string. */
function literal(v: unknown): string | undefined {
  return typeof v === "string" && variablesIn(v).length === 0 ? v : undefined;
}

const nonEmpty = (v: unknown): boolean => typeof v === "string" && v.trim() !== "";

/** Problems with one step's params for its action (the action is known). */
function paramProblems(s: BuildStep, ctx: ValidateContext): string[] {
  const p = s.params;
  const at = `step ${q(s.id)} (${s.action})`;
  const out: string[] = [];
  const checkNodeProps = (type: unknown, props: unknown): void => {
    if (!isObject(props)) return;
    if (type === "agent" && ctx.models && "model" in props) {
      const m = literal(props.model);
      if (m !== undefined && !ctx.models.includes(m))
        out.push(`${at}: model ${q(m)} is not a configured model; use one of ${ctx.models.join(", ") || "(none)"}`);
    }
    if (type === "system" && ctx.systems && "system" in props) {
      const sys = literal(props.system);
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
        const id = literal(p.id);
        if (typeof p.id !== "string") out.push(`${at}: params.id must be a string`);
        else if (id !== undefined && !NODE_ID.test(id))
          out.push(
            `${at}: params.id ${q(id)} is not a node id; use lower-case letters, digits, - and _ (at most 64, starting with a letter or digit)`,
          );
      }
      if (p.properties !== undefined && !isObject(p.properties)) out.push(`${at}: params.properties must be an object`);
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
      const node = literal(p.node);
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
 * step ids; dependsOn naming no step; cycles (the steps on each); output names (duplicates, names
 * that cannot be a `${…}`); variables no step outputs, a step's own output, or one whose producer
 * the step does not depend on (directly or through others); params each action needs; hooks;
 * node ids for CREATE_NODE. With `ctx.canvas` (EDIT), a literal node id in UPDATE_NODE /
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

  const ids = new Map<string, number>();
  for (const s of steps) ids.set(s.id, (ids.get(s.id) ?? 0) + 1);
  for (const [id, n] of ids)
    if (n > 1) problems.push(`step ${q(id)}: ${n} steps have this id; give each step its own id`);

  for (const s of steps) {
    if (!(PLAN_ACTIONS as readonly string[]).includes(s.action)) {
      problems.push(`step ${q(s.id)}: unknown action ${q(String(s.action))}; use one of ${PLAN_ACTIONS.join(", ")}`);
    }
    for (const d of s.dependsOn) {
      if (!ids.has(d))
        problems.push(
          `step ${q(s.id)}: dependsOn names ${q(d)}, which is not a step of this plan; use the id of a step or drop it`,
        );
    }
  }

  for (const cycle of cyclesOf(steps)) {
    problems.push(
      cycle.length === 1
        ? `step ${q(cycle[0]!)} depends on itself: remove it from its own dependsOn`
        : `steps ${cycle.map(q).join(", ")} form a dependency cycle (${cycle.map((id, i) => `${q(id)} depends on ${q(cycle[(i + 1) % cycle.length]!)}`).join(", ")}): remove one of these dependencies`,
    );
  }

  // outputs
  const producers = new Map<string, string[]>();
  for (const s of steps) {
    if (s.output === undefined) continue;
    producers.set(s.output, [...(producers.get(s.output) ?? []), s.id]);
    if (!VAR_NAME.test(s.output)) {
      problems.push(
        `step ${q(s.id)}: output ${q(s.output)} cannot be used as \${…}; use letters, digits and _ (not starting with a digit)`,
      );
    }
  }
  for (const [name, by] of producers) {
    if (by.length > 1)
      problems.push(
        `steps ${by.map(q).join(", ")} all store their output as ${q(name)}; give each output its own name`,
      );
  }

  const ancestors = ancestorsOf(steps);

  // variables
  for (const s of steps) {
    const mine = ancestors.get(s.id) ?? new Set<string>();
    for (const name of variablesIn(s.params)) {
      const by = producers.get(name);
      if (!by) {
        problems.push(
          `step ${q(s.id)}: \${${name}} is not defined: no step has output ${q(name)}. Add "output": ${q(name)} to the step that makes it, or write $\${${name}} for a literal \${${name}}`,
        );
        continue;
      }
      if (by.includes(s.id)) {
        problems.push(
          `step ${q(s.id)}: uses \${${name}}, which is its own output; a step can only use the outputs of steps it depends on`,
        );
        continue;
      }
      if (!by.some((p) => mine.has(p))) {
        problems.push(
          `step ${q(s.id)}: uses \${${name}} (the output of step ${q(by[0]!)}) but does not depend on ${q(by[0]!)}; add ${q(by[0]!)} to its dependsOn`,
        );
      }
    }
  }

  // params
  for (const s of steps)
    if ((PLAN_ACTIONS as readonly string[]).includes(s.action)) problems.push(...paramProblems(s, ctx));

  // explicit node ids created by the plan
  const creators = new Map<string, string[]>();
  for (const s of steps) {
    if (s.action !== "CREATE_NODE") continue;
    const id = literal(s.params.id);
    if (id !== undefined) creators.set(id, [...(creators.get(id) ?? []), s.id]);
  }
  for (const [id, by] of creators) {
    if (by.length > 1)
      problems.push(`steps ${by.map(q).join(", ")} all create a node with id ${q(id)}; node ids must be unique`);
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
        (d) => d.action === "DELETE_NODE" && literal(d.params.node) === id && (ancestors.get(s.id)?.has(d.id) ?? false),
      );
    for (const s of steps) {
      const mine = ancestors.get(s.id) ?? new Set<string>();
      const refs: Array<[string, unknown]> =
        s.action === "UPDATE_NODE" || s.action === "DELETE_NODE"
          ? [["node", s.params.node]]
          : s.action === "CONNECT_NODES"
            ? [
                ["from", s.params.from],
                ["to", s.params.to],
              ]
            : s.action === "CREATE_NODE" && s.params.parent !== undefined
              ? [["parent", s.params.parent]]
              : [];
      for (const [field, value] of refs) {
        const id = literal(value);
        if (id === undefined || id.trim() === "") continue; // a variable, or missing (reported above)
        if (onCanvas.has(id)) continue;
        const by = creators.get(id);
        if (by?.some((c) => mine.has(c))) continue;
        if (by) {
          problems.push(
            `step ${q(s.id)}: params.${field} ${q(id)} is created by step ${q(by[0]!)}, which it does not depend on; add ${q(by[0]!)} to its dependsOn`,
          );
        } else {
          problems.push(
            `step ${q(s.id)}: params.${field} ${q(id)} is not a node on the canvas and no step creates it; use an existing node id or the \${output} of the CREATE_NODE step (${known})`,
          );
        }
      }
      if (s.action === "CREATE_NODE") {
        const id = literal(s.params.id);
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
