/**
 * The builder's Architect: the prompt that asks a model for an ExecutionPlan (the canvas and
 * sandbox operations that build or edit one system), the reader of its JSON reply, the checks a
 * plan must pass before the Builder runs it, the one repair message sent back with the problems,
 * and the order the steps run in. Pure: the caller makes the model calls.
 *
 * Differences from the original (docs SEED003 "Architect"/"Builder"): problems are errors, not
 * warnings, and say what to fix; cycles are found; a variable must come from a step the user
 * depends on (directly or through others) — not from one that merely sits earlier in the list;
 * `$${` escapes a literal `${` (so a shell script's `$${HOME}` is no undefined variable) and dotted
 * system templates (`${inputs.x}`) are left alone; hooks are refused; steps run in dependency
 * waves, not array order.
 */
import type { BuildStep, Canvas, ExecutionPlan, PlanAction } from "./types.js";
import { NODE_TYPES, PLAN_ACTIONS } from "./types.js";
import { variablesIn } from "./plan-vars.js";
import { cleanReply } from "./supervisor.js";
import { clip, clipMiddle, isObject, jsonObjects } from "../util/model-reply.js";

export interface ArchitectContext {
  /** The person's words. */
  request: string;
  intent: "BUILD" | "EDIT";
  /** The target system id (BUILD: a fresh id chosen by the caller; EDIT: the canvas's). */
  system: string;
  /** EDIT: the current canvas (nodes, edges, properties). */
  canvas?: Canvas;
  /** Configured clawbridge models an agent node may use (kind e.g. "claude-code", "openai"). */
  models: Array<{ id: string; kind: string }>;
  /** Deployed systems a `system` node may call. */
  systems: Array<{ id: string; description: string }>;
  /** What deploy will allow (commands: allowed program names). */
  executors: { webhook: boolean; commands: string[]; mcp: boolean };
  sandboxFiles?: string[];
}

/** What `validatePlan` may check against; every field is optional. */
export interface ValidateContext {
  /** The canvas being edited: literal node ids must exist on it (or be created by the plan). */
  canvas?: Canvas;
  /** Known model ids: an agent node's literal `model` must be one of them. */
  models?: readonly string[];
  /** Known system ids: a `system` node's literal `system` must be one of them. */
  systems?: readonly string[];
}

export const MAX_RETRY_COUNT = 3;
export const DEFAULT_RETRY_COUNT = 3;
export const DEFAULT_RETRY_DELAY_MS = 1000;
export const MAX_RETRY_DELAY_MS = 60_000;

/** The request: head and tail kept when longer. */
const REQUEST_HEAD_CHARS = 6000;
const REQUEST_TAIL_CHARS = 2000;
const DESCRIPTION_CHARS = 200;
const LISTED = 100;
/** Problems listed in a repair message. */
const REPAIR_PROBLEMS = 40;

const VAR_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** Node ids are compiled step ids (src/systems/schema.ts `id`). */
const NODE_ID = /^[a-z0-9][a-z0-9_-]{0,63}$/;
const CAPABILITY_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;
const CAPABILITY_KINDS = ["skill", "command", "instructions"] as const;

const q = (s: string): string => JSON.stringify(s);

function listed(items: string[], none: string): string[] {
  if (items.length === 0) return [none];
  const out = items.slice(0, LISTED);
  if (items.length > LISTED) out.push(`- … and ${items.length - LISTED} more`);
  return out;
}

// ---------------------------------------------------------------------------------------------
// the prompt

/** The one example plan shown in the prompt (input → agent → output). Valid by `validatePlan`. */
export function examplePlan(system: string, model: string): ExecutionPlan {
  const step = (id: string, action: PlanAction, params: Record<string, unknown>, dependsOn: string[], output?: string): BuildStep => ({
    id,
    name: id.replace(/_/g, " "),
    action,
    params,
    dependsOn,
    ...(output ? { output } : {}),
    retryCount: 3,
    retryDelayMs: 1000,
  });
  return {
    metadata: {
      system,
      name: "Topic summary",
      description: "Summarises a topic in five bullet points.",
      summary: "A topic input feeds one agent whose summary is the system's output.",
    },
    steps: [
      step("add_topic", "CREATE_NODE", { type: "input", id: "topic", label: "Topic", properties: { type: "string", required: true, description: "What to summarise" } }, [], "topic_node"),
      step("add_summarizer", "CREATE_NODE", { type: "agent", id: "summarizer", label: "Summarizer", properties: { model, prompt: "Summarise {{topic}} in five bullet points." } }, [], "summarizer_node"),
      step("add_result", "CREATE_NODE", { type: "output", id: "result", label: "Result" }, [], "result_node"),
      step("link_topic", "CONNECT_NODES", { from: "${topic_node}", to: "${summarizer_node}" }, ["add_topic", "add_summarizer"]),
      step("link_result", "CONNECT_NODES", { from: "${summarizer_node}", to: "${result_node}" }, ["add_summarizer", "add_result"]),
    ],
  };
}

function compactPlanJson(plan: ExecutionPlan): string {
  const steps = plan.steps.map((s) => {
    const { retryCount: _r, retryDelayMs: _d, name: _n, ...rest } = s;
    return `  ${JSON.stringify(rest)}`;
  });
  return `{"metadata":${JSON.stringify(plan.metadata)},\n "steps":[\n${steps.join(",\n")}\n]}`;
}

/** The canvas as the Architect sees it: ids, types, labels, properties, parents and edges (no positions). */
function canvasJson(c: Canvas): string {
  return JSON.stringify(
    {
      system: c.system,
      name: c.name,
      description: c.description,
      status: c.status,
      nodes: c.nodes.map((n) => ({ id: n.id, type: n.type, label: n.label, properties: n.properties, ...(n.parent ? { parent: n.parent } : {}) })),
      edges: c.edges.map((e) => ({ id: e.id, from: e.from, to: e.to })),
      settings: c.settings,
    },
    null,
    1,
  );
}

/** The Architect's system and user text. */
export function architectPrompt(ctx: ArchitectContext): { system: string; user: string } {
  const exampleModel = ctx.models[0]?.id ?? "<model id>";
  const models = ctx.models.map((m) => `- ${m.id} (${m.kind})`);
  const systems = ctx.systems.filter((s) => s.id !== ctx.system).map((s) => (s.description ? `- ${s.id}: ${clip(s.description, DESCRIPTION_CHARS)}` : `- ${s.id}`));
  const commands = ctx.executors.commands;
  const system = [
    "You are the Architect of a builder that turns plain words into systems (automations). A system is a canvas of nodes and edges that compiles to a runnable plan.",
    "You build nothing yourself: you reply with an ExecutionPlan, a list of canvas and sandbox operations that another program carries out in dependency order.",
    "",
    "# Canvas",
    "A node has an id (lower-case letters, digits, - and _; also its step name in runs), a type, a label and properties. Types and their properties:",
    '- input: a value the system is run with. {name?, type?: "string"|"number"|"integer"|"boolean", description?, required?: boolean, enum?: [..], default?}; name defaults to the node id.',
    "- output: no properties. Its one incoming edge names the node whose result is the system's output.",
    "- agent: asks a model. {model, prompt?, system?, timeoutSeconds?}: model is one of the model ids below; in prompt, {{name}} is an input (by its name) or an upstream node (by its id); ${inputs.x} and ${steps.a.output} work too.",
    '- webhook: sends the run to a URL. {url, method?: "POST"|"PUT"|"PATCH", headers?, body?, secretEnv?, timeoutSeconds?}',
    '- command: runs a program directly, never through a shell. {argv: ["program", "arg", ..], env?: [variable names], setEnv?, cwd?, timeoutSeconds?, retryExitCodes?, stdin?}',
    '- mcp: calls one tool of an MCP server. {server: {transport: "stdio", command, args?, env?} | {transport: "http", url, headers?}, tool, arguments?, timeoutSeconds?}',
    '- system: runs another deployed system. {system: "<id>", with?: {input name: value}}',
    "An edge {from, to} is data flow AND a dependency: `to` runs after `from` and may use its result. Connect each input to the nodes that use it, chain the steps, and connect the final step to one output node. Nodes with no path between them run in parallel.",
    "",
    "# ExecutionPlan",
    '{"metadata": {"system": "<id>", "name": "..", "description": "..", "summary": "one or two sentences for the person"},',
    ' "steps": [{"id": "..", "name": "..", "action": "..", "params": {..}, "dependsOn": ["<step id>", ..], "output": "<variable>", "retryCount": 3, "retryDelayMs": 1000}]}',
    "Step ids are unique. dependsOn: the steps that must finish first (steps with no path between them run in parallel; no cycles). retryCount 0..3 (default 3), retryDelayMs default 1000.",
    "",
    "# Actions (params → what `output` stores)",
    "- CREATE_NODE {type, label, id?, properties?, parent?, position?: {x, y}} → the node id. Give an explicit short id (\"researcher\").",
    "- CONNECT_NODES {from, to} (node ids) → the edge id.",
    "- UPDATE_NODE {node, properties: {key: value}} → the node id. Sets the given property keys.",
    "- DELETE_NODE {node} → the node id. Its edges and child nodes go with it.",
    "- CREATE_FILE {path, content} → the file's path in the sandbox (a relative path).",
    '- REGISTER_CAPABILITY {kind: "skill"|"command"|"instructions", name, description?, content} → the file\'s path (a Claude Code skill .claude/skills/<name>/SKILL.md, a slash command .claude/commands/<name>.md, or AGENTS.md).',
    "  No hooks: hooks run shell commands. To run a program, use a command node with explicit argv.",
    "",
    "# Variables",
    '- "output": "x" stores a step\'s result under x (letters, digits and _; each name once). Another step writes ${x} in its params to use it.',
    "- A step may use ${x} only if it depends, directly or through other steps, on the step whose output is x.",
    "- $${ is a literal ${ (a file's content writes $${HOME}). Dotted forms such as ${inputs.topic} and ${steps.a.output} are the system's own templates and are kept as written.",
    "",
    "# Available",
    "Models (an agent's model must be one of these ids):",
    ...listed(models, "(none: do not create agent nodes)"),
    "Deployed systems a system node may run:",
    ...listed(systems, "(none)"),
    `Webhook nodes: ${ctx.executors.webhook ? "allowed" : "NOT allowed (deploy would refuse them)"}.`,
    `Command nodes: ${commands.length > 0 ? `only these programs as argv[0]: ${commands.join(", ")}` : "NOT allowed (no program is allowed)"}.`,
    `MCP nodes: ${ctx.executors.mcp ? "allowed" : "NOT allowed (deploy would refuse them)"}.`,
    ...(ctx.sandboxFiles && ctx.sandboxFiles.length > 0 ? ["Files already in the sandbox:", ...listed(ctx.sandboxFiles.map((f) => `- ${f}`), "")] : []),
    "",
    "# Example (input → agent → output)",
    compactPlanJson(examplePlan(ctx.system, exampleModel)),
    "",
    "Reply with ONLY the ExecutionPlan JSON object: no prose, no code fences.",
  ].join("\n");

  const request = clipMiddle(String(ctx.request ?? ""), REQUEST_HEAD_CHARS, REQUEST_TAIL_CHARS);
  const user =
    ctx.intent === "EDIT"
      ? [
          `Edit the system ${q(ctx.system)} (metadata.system: ${q(ctx.system)}).`,
          ...(ctx.canvas
            ? [
                "Its current canvas (use these node ids directly in from, to, node and parent; only change what the request asks for):",
                canvasJson(ctx.canvas),
              ]
            : ["(Its canvas could not be loaded.)"]),
          "",
          "Request:",
          request,
        ].join("\n")
      : [`Build a new system with id ${q(ctx.system)} (metadata.system: ${q(ctx.system)}); its canvas is empty.`, "", "Request:", request].join("\n");
  return { system, user };
}

// ---------------------------------------------------------------------------------------------
// reading the reply

function normalizeAction(raw: string): string {
  return raw.trim().toUpperCase().replace(/[\s-]+/g, "_");
}

const str = (v: unknown): string => (typeof v === "string" ? v : "");

function clampInt(v: unknown, min: number, max: number, dflt: number): number {
  const n = typeof v === "number" ? v : typeof v === "string" && v.trim() !== "" ? Number(v) : NaN;
  if (!Number.isFinite(n)) return dflt;
  return Math.min(max, Math.max(min, Math.round(n)));
}

/** The plan object in a reply: the first JSON object with `steps` (or a `plan` holding one). */
function findPlanObject(text: string): { obj: Record<string, unknown> } | { error: string } {
  let parseError: string | undefined;
  let sawJson = false;
  for (const o of jsonObjects(cleanReply(text), (e) => (parseError ??= e))) {
    sawJson = true;
    if ("steps" in o) return { obj: o };
    if (isObject(o.plan) && "steps" in o.plan) return { obj: o.plan };
  }
  // A plan that does not parse still yields its inner objects (the steps): its parse error says more.
  if (parseError) return { error: `the reply's JSON could not be read (${parseError})` };
  if (sawJson) return { error: "the JSON object has no steps: reply with {\"metadata\": {..}, \"steps\": [..]}" };
  return { error: "no JSON object in the reply" };
}

/**
 * The plan in a model's reply, defaults filled, or every shape problem found. Tolerates code
 * fences, prose and `<think>` blocks around the object (the outermost balanced object; braces in
 * strings do not count). Defaults: name = id, dependsOn [] (a single string is read as a list of
 * one; repeats dropped), retryCount 3 (capped to 0..3), retryDelayMs 1000 (clamped to 0..60000),
 * params {} when absent, metadata.system = `defaults.system`, metadata name/description/summary "".
 * An action is read case-insensitively ("create-node" → CREATE_NODE); an unknown one is kept for
 * `validatePlan` to report. Shape problems name the step: `steps[2].action: missing`.
 */
export function parsePlan(text: string, defaults: { system: string }): { plan: ExecutionPlan } | { errors: string[] } {
  const found = findPlanObject(text);
  if ("error" in found) return { errors: [found.error] };
  const obj = found.obj;
  const errors: string[] = [];

  const meta = isObject(obj.metadata) ? obj.metadata : {};
  const metaSystem = str(meta.system).trim();
  const metadata = {
    system: metaSystem || defaults.system,
    name: str(meta.name),
    description: str(meta.description),
    summary: str(meta.summary),
  };

  if (!Array.isArray(obj.steps)) return { errors: ["steps: expected an array of steps"] };
  const steps: BuildStep[] = [];
  obj.steps.forEach((raw: unknown, i: number) => {
    const at = `steps[${i}]`;
    if (!isObject(raw)) {
      errors.push(`${at}: expected an object with id, action and params`);
      return;
    }
    const id = typeof raw.id === "number" && Number.isFinite(raw.id) ? String(raw.id) : str(raw.id).trim();
    const named = id ? `${at} (${q(id)})` : at;
    if (!id) errors.push(`${at}.id: missing; give every step a unique id`);
    const action = str(raw.action).trim() ? normalizeAction(str(raw.action)) : "";
    if (!action) errors.push(`${named}.action: missing; use one of ${PLAN_ACTIONS.join(", ")}`);
    let params: Record<string, unknown> = {};
    if (raw.params === undefined || raw.params === null) params = {};
    else if (isObject(raw.params)) params = raw.params;
    else errors.push(`${named}.params: expected an object, got ${Array.isArray(raw.params) ? "an array" : typeof raw.params}`);
    let dependsOn: string[] = [];
    const deps = raw.dependsOn;
    if (deps === undefined || deps === null) dependsOn = [];
    else if (typeof deps === "string") dependsOn = deps.trim() ? [deps.trim()] : [];
    else if (Array.isArray(deps) && deps.every((d) => typeof d === "string" || (typeof d === "number" && Number.isFinite(d)))) {
      dependsOn = [...new Set(deps.map((d) => String(d).trim()).filter((d) => d !== ""))];
    } else errors.push(`${named}.dependsOn: expected a list of step ids`);
    let output: string | undefined;
    if (typeof raw.output === "string") output = raw.output.trim() || undefined;
    else if (raw.output !== undefined && raw.output !== null) errors.push(`${named}.output: expected a variable name (a string)`);
    const name = str(raw.name).trim() || id;
    steps.push({
      id,
      name,
      action: action as PlanAction,
      params,
      dependsOn,
      ...(output !== undefined ? { output } : {}),
      retryCount: clampInt(raw.retryCount, 0, MAX_RETRY_COUNT, DEFAULT_RETRY_COUNT),
      retryDelayMs: clampInt(raw.retryDelayMs, 0, MAX_RETRY_DELAY_MS, DEFAULT_RETRY_DELAY_MS),
    });
  });
  if (errors.length > 0) return { errors };
  return { plan: { metadata, steps } };
}

// ---------------------------------------------------------------------------------------------
// validation

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
  for (const s of steps) if (!deps.has(s.id)) deps.set(s.id, s.dependsOn.filter((d, i, a) => a.indexOf(d) === i));
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
      if (m !== undefined && !ctx.models.includes(m)) out.push(`${at}: model ${q(m)} is not a configured model; use one of ${ctx.models.join(", ") || "(none)"}`);
    }
    if (type === "system" && ctx.systems && "system" in props) {
      const sys = literal(props.system);
      if (sys !== undefined && !ctx.systems.includes(sys)) out.push(`${at}: system ${q(sys)} is not a deployed system; use one of ${ctx.systems.join(", ") || "(none)"}`);
    }
  };
  switch (s.action) {
    case "CREATE_NODE": {
      if (typeof p.type !== "string" || !(NODE_TYPES as readonly string[]).includes(p.type)) {
        out.push(`${at}: params.type ${p.type === undefined ? "is missing" : `${q(String(p.type))} is not a node type`}; use one of ${NODE_TYPES.join(", ")}`);
      }
      if (!nonEmpty(p.label)) out.push(`${at}: params.label is missing; give the node a short label`);
      if (p.id !== undefined) {
        const id = literal(p.id);
        if (typeof p.id !== "string") out.push(`${at}: params.id must be a string`);
        else if (id !== undefined && !NODE_ID.test(id)) out.push(`${at}: params.id ${q(id)} is not a node id; use lower-case letters, digits, - and _ (at most 64, starting with a letter or digit)`);
      }
      if (p.properties !== undefined && !isObject(p.properties)) out.push(`${at}: params.properties must be an object`);
      if (p.parent !== undefined && !nonEmpty(p.parent)) out.push(`${at}: params.parent must be a node id`);
      if (p.position !== undefined && !(isObject(p.position) && typeof p.position.x === "number" && typeof p.position.y === "number")) {
        out.push(`${at}: params.position must be {"x": number, "y": number}`);
      }
      checkNodeProps(p.type, p.properties);
      break;
    }
    case "CONNECT_NODES": {
      if (!nonEmpty(p.from)) out.push(`${at}: params.from is missing; name the node the data comes from`);
      if (!nonEmpty(p.to)) out.push(`${at}: params.to is missing; name the node the data goes to`);
      if (nonEmpty(p.from) && p.from === p.to) out.push(`${at}: connects ${q(String(p.from))} to itself; an edge joins two different nodes`);
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
        out.push(`${at}: hooks are refused: a hook runs shell commands. To run a program, add a command node with an explicit argv instead.`);
      } else if (!kind || !(CAPABILITY_KINDS as readonly string[]).includes(kind)) {
        out.push(`${at}: params.kind ${kind ? `${q(String(p.kind))} is not allowed` : "is missing"}; use one of ${CAPABILITY_KINDS.join(", ")}`);
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
    problems.push(`metadata.system is ${q(plan.metadata.system)} but the canvas being edited is ${q(ctx.canvas.system)}: set metadata.system to ${q(ctx.canvas.system)}`);
  }

  const ids = new Map<string, number>();
  for (const s of steps) ids.set(s.id, (ids.get(s.id) ?? 0) + 1);
  for (const [id, n] of ids) if (n > 1) problems.push(`step ${q(id)}: ${n} steps have this id; give each step its own id`);

  for (const s of steps) {
    if (!(PLAN_ACTIONS as readonly string[]).includes(s.action)) {
      problems.push(`step ${q(s.id)}: unknown action ${q(String(s.action))}; use one of ${PLAN_ACTIONS.join(", ")}`);
    }
    for (const d of s.dependsOn) {
      if (!ids.has(d)) problems.push(`step ${q(s.id)}: dependsOn names ${q(d)}, which is not a step of this plan; use the id of a step or drop it`);
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
      problems.push(`step ${q(s.id)}: output ${q(s.output)} cannot be used as \${…}; use letters, digits and _ (not starting with a digit)`);
    }
  }
  for (const [name, by] of producers) {
    if (by.length > 1) problems.push(`steps ${by.map(q).join(", ")} all store their output as ${q(name)}; give each output its own name`);
  }

  const ancestors = ancestorsOf(steps);

  // variables
  for (const s of steps) {
    const mine = ancestors.get(s.id) ?? new Set<string>();
    for (const name of variablesIn(s.params)) {
      const by = producers.get(name);
      if (!by) {
        problems.push(`step ${q(s.id)}: \${${name}} is not defined: no step has output ${q(name)}. Add "output": ${q(name)} to the step that makes it, or write $\${${name}} for a literal \${${name}}`);
        continue;
      }
      if (by.includes(s.id)) {
        problems.push(`step ${q(s.id)}: uses \${${name}}, which is its own output; a step can only use the outputs of steps it depends on`);
        continue;
      }
      if (!by.some((p) => mine.has(p))) {
        problems.push(`step ${q(s.id)}: uses \${${name}} (the output of step ${q(by[0]!)}) but does not depend on ${q(by[0]!)}; add ${q(by[0]!)} to its dependsOn`);
      }
    }
  }

  // params
  for (const s of steps) if ((PLAN_ACTIONS as readonly string[]).includes(s.action)) problems.push(...paramProblems(s, ctx));

  // explicit node ids created by the plan
  const creators = new Map<string, string[]>();
  for (const s of steps) {
    if (s.action !== "CREATE_NODE") continue;
    const id = literal(s.params.id);
    if (id !== undefined) creators.set(id, [...(creators.get(id) ?? []), s.id]);
  }
  for (const [id, by] of creators) {
    if (by.length > 1) problems.push(`steps ${by.map(q).join(", ")} all create a node with id ${q(id)}; node ids must be unique`);
  }

  if (ctx.canvas) {
    const onCanvas = new Set(ctx.canvas.nodes.map((n) => n.id));
    const existing = [...onCanvas];
    const known = existing.length > 0 ? `nodes on the canvas: ${existing.slice(0, 30).join(", ")}${existing.length > 30 ? ", …" : ""}` : "the canvas has no nodes";
    const deletedBefore = (s: BuildStep, id: string): boolean =>
      steps.some((d) => d.action === "DELETE_NODE" && literal(d.params.node) === id && (ancestors.get(s.id)?.has(d.id) ?? false));
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
          problems.push(`step ${q(s.id)}: params.${field} ${q(id)} is created by step ${q(by[0]!)}, which it does not depend on; add ${q(by[0]!)} to its dependsOn`);
        } else {
          problems.push(`step ${q(s.id)}: params.${field} ${q(id)} is not a node on the canvas and no step creates it; use an existing node id or the \${output} of the CREATE_NODE step (${known})`);
        }
      }
      if (s.action === "CREATE_NODE") {
        const id = literal(s.params.id);
        if (id !== undefined && onCanvas.has(id) && !deletedBefore(s, id)) {
          problems.push(`step ${q(s.id)}: a node with id ${q(id)} is already on the canvas; change it with UPDATE_NODE or choose another id`);
        }
      }
    }
  }
  return problems;
}

// ---------------------------------------------------------------------------------------------
// repair, order

/** The user message sent back once when a plan could not be read or did not pass `validatePlan`. */
export function repairRequest(previousReply: string, errors: string[]): string {
  const said = clip(String(previousReply ?? ""), 160);
  const shown = errors.slice(0, REPAIR_PROBLEMS).map((e) => `- ${e}`);
  if (errors.length > REPAIR_PROBLEMS) shown.push(`- … and ${errors.length - REPAIR_PROBLEMS} more`);
  return [
    said ? `Your ExecutionPlan cannot be used yet (it began: ${JSON.stringify(said)}).` : "Your reply was empty.",
    "Problems:",
    ...shown,
    "Fix every problem and reply again with the whole corrected ExecutionPlan: ONLY one JSON object, no prose and no code fences.",
  ].join("\n");
}

/**
 * The steps in waves, in dependency order: every step of a wave depends only on steps of earlier
 * waves, so the steps of one wave are independent and may run in parallel; within a wave, plan
 * order. Assumes a validated plan: unknown dependencies are ignored, and steps left on a cycle are
 * put in one last wave rather than lost.
 */
export function planOrder(steps: BuildStep[]): string[][] {
  const ids = new Set(steps.map((s) => s.id));
  const placed = new Set<string>();
  let left = steps.filter((s, i) => steps.findIndex((t) => t.id === s.id) === i);
  const waves: string[][] = [];
  while (left.length > 0) {
    const wave = left.filter((s) => s.dependsOn.every((d) => !ids.has(d) || placed.has(d)));
    if (wave.length === 0) {
      waves.push(left.map((s) => s.id));
      break;
    }
    for (const s of wave) placed.add(s.id);
    waves.push(wave.map((s) => s.id));
    left = left.filter((s) => !placed.has(s.id));
  }
  return waves;
}
