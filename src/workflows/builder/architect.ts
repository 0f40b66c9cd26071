/**
 * The builder's Architect: the prompt that asks a model for an ExecutionPlan (the canvas and
 * sandbox operations that build or edit one system), the reader of its JSON reply, and the one
 * repair message sent back with the problems that src/workflows/builder/plan-check.ts found. Pure: the
 * caller makes the model calls. The plan's metadata also carries 2-4 `examples` and a few `keywords`
 * for the system, which a BUILD puts in the canvas settings: the router's keyword fallback finds a
 * chat-built system by them when its classifier is down.
 *
 * Differences from the original (docs SEED003 "Architect"/"Builder"): problems are errors, not
 * warnings, and say what to fix; cycles are found; a step's result is used as `${steps.ID.output}`
 * (the one template language, src/workflows/engine/template.ts; no `output` variable names) only by
 * a step that depends on it (directly or through others) — not by one that merely sits later in the
 * list; the templates of the system being built (`${inputs.x}`) are left as written; hooks are
 * refused; the Builder runs steps in dependency order, not array order
 * (src/workflows/builder/plan-executor.ts).
 */
import type { BuildStep, ExecutionPlan, PlanAction } from "./types.js";
import type { Canvas } from "../../wire/canvas.js";
import { PLAN_ACTIONS } from "./types.js";
import { cleanReply } from "./supervisor.js";
import { clip, clipMiddle, isObject, jsonObjects } from "../../core/util/model-reply.js";

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

export const MAX_RETRY_COUNT = 3;
export const DEFAULT_RETRY_COUNT = 3;
export const DEFAULT_RETRY_DELAY_MS = 1000;
export const MAX_RETRY_DELAY_MS = 60_000;

/** The request: head and tail kept when longer. */
const REQUEST_HEAD_CHARS = 6000;
const REQUEST_TAIL_CHARS = 2000;
const DESCRIPTION_CHARS = 200;
const LISTED = 100;
/** The examples and keywords a plan's metadata carries (more are dropped; the prompt asks for 2-4 examples). */
const MIN_EXAMPLES = 2;
const MAX_EXAMPLES = 4;
const MAX_KEYWORDS = 6;
const PHRASE_CHARS = 200;
/** Problems listed in a repair message. */
const REPAIR_PROBLEMS = 40;

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
  const step = (id: string, action: PlanAction, params: Record<string, unknown>, dependsOn: string[]): BuildStep => ({
    id,
    name: id.replace(/_/g, " "),
    action,
    params,
    dependsOn,
    retryCount: 3,
    retryDelayMs: 1000,
  });
  return {
    metadata: {
      system,
      name: "Topic summary",
      description: "Summarises a topic in five bullet points.",
      summary: "A topic input feeds one agent whose summary is the system's output.",
      examples: ["summarise the history of jazz", "give me the key points about carbon capture"],
      keywords: ["summary", "summarise", "key points"],
    },
    steps: [
      step(
        "add_topic",
        "CREATE_NODE",
        {
          type: "input",
          id: "topic",
          label: "Topic",
          properties: { type: "string", required: true, description: "What to summarise" },
        },
        [],
      ),
      step(
        "add_summarizer",
        "CREATE_NODE",
        {
          type: "agent",
          id: "summarizer",
          label: "Summarizer",
          properties: { model, prompt: "Summarise {{topic}} in five bullet points." },
        },
        [],
      ),
      step("add_result", "CREATE_NODE", { type: "output", id: "result", label: "Result" }, []),
      step("link_topic", "CONNECT_NODES", { from: "${steps.add_topic.output}", to: "${steps.add_summarizer.output}" }, [
        "add_topic",
        "add_summarizer",
      ]),
      step(
        "link_result",
        "CONNECT_NODES",
        { from: "${steps.add_summarizer.output}", to: "${steps.add_result.output}" },
        ["add_summarizer", "add_result"],
      ),
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
      nodes: c.nodes.map((n) => ({
        id: n.id,
        type: n.type,
        label: n.label,
        properties: n.properties,
        ...(n.parent ? { parent: n.parent } : {}),
      })),
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
  const systems = ctx.systems
    .filter((s) => s.id !== ctx.system)
    .map((s) => (s.description ? `- ${s.id}: ${clip(s.description, DESCRIPTION_CHARS)}` : `- ${s.id}`));
  const commands = ctx.executors.commands;
  const system = [
    "You are the Architect of a builder that turns plain words into systems (automations). A system is a canvas of nodes and edges that compiles to a runnable plan.",
    "You build nothing yourself: you reply with an ExecutionPlan, a list of canvas and sandbox operations that another program carries out in dependency order.",
    "",
    "# Canvas",
    "A node has an id (lower-case letters, digits, - and _; also its step name in runs), a type, a label and properties. Types and their properties:",
    '- input: a value the system is run with. {name?, type?: "string"|"number"|"integer"|"boolean", description?, required?: boolean, enum?: [..], default?}; name defaults to the node id.',
    "- output: no properties. Its one incoming edge names the node whose result is the system's output.",
    "- agent: asks a model. {model, prompt?, system?, timeoutSeconds?}: model is one of the model ids below; in prompt, {{name}} is an input (by its name) or an upstream node (by its id); ${inputs.x} and ${steps.<node id>.output} work too.",
    '- webhook: sends the run to a URL. {url, method?: "POST"|"PUT"|"PATCH", headers?, body?, secretEnv?, timeoutSeconds?}',
    '- command: runs a program directly, never through a shell. {argv: ["program", "arg", ..], env?: [variable names], setEnv?, cwd?, timeoutSeconds?, retryExitCodes?, stdin?}',
    '- mcp: calls one tool of an MCP server. {server: {transport: "stdio", command, args?, env?} | {transport: "http", url, headers?}, tool, arguments?, timeoutSeconds?}',
    '- approval: the run waits until a person approves it (a "yes" in chat, the API or the dashboard); rejected, the run ends there. {question, show?, timeoutSeconds?, onTimeout?: "reject"|"approve"}: in question, {{name}} works as in a prompt; it shows the results of the nodes connected to it unless show says what. Put it before the step that must not happen without a yes (a webhook that publishes, a command that deletes).',
    '- system: runs another deployed system. {system: "<id>", with?: {input name: value}}',
    "An edge {from, to} is data flow AND a dependency: `to` runs after `from` and may use its result. Connect each input to the nodes that use it, chain the steps, and connect the final step to one output node. Nodes with no path between them run in parallel.",
    "",
    "# ExecutionPlan",
    '{"metadata": {"system": "<id>", "name": "..", "description": "..", "summary": "one or two sentences for the person", "examples": [".."], "keywords": [".."]},',
    `examples: ${MIN_EXAMPLES}-${MAX_EXAMPLES} messages a person would type to run the system, with real values ("write a blog post about solar power"). keywords: up to ${MAX_KEYWORDS} words or short phrases naming its subject or product ("blog post", "research"), not common words like "write" or "make". When the chat's router has no model, these are how it finds the system.`,
    ' "steps": [{"id": "..", "name": "..", "action": "..", "params": {..}, "dependsOn": ["<step id>", ..], "retryCount": 3, "retryDelayMs": 1000}]}',
    "Step ids are unique and are not node ids (add_writer, link_writer). dependsOn: the steps that must finish first (steps with no path between them run in parallel; no cycles). retryCount 0..3 (default 3), retryDelayMs default 1000.",
    "",
    "# Actions (params → the step's result)",
    '- CREATE_NODE {type, label, id?, properties?, parent?, position?: {x, y}} → the node id. Give an explicit short id ("researcher").',
    "- CONNECT_NODES {from, to} (node ids) → the edge id.",
    "- UPDATE_NODE {node, properties: {key: value}} → the node id. Sets the given property keys.",
    "- DELETE_NODE {node} → the node id. Its edges and child nodes go with it.",
    "- CREATE_FILE {path, content} → the file's path in the sandbox (a relative path).",
    '- REGISTER_CAPABILITY {kind: "skill"|"command"|"instructions", name, description?, content} → the file\'s path (a Claude Code skill .claude/skills/<name>/SKILL.md, a slash command .claude/commands/<name>.md, or AGENTS.md).',
    "  No hooks: hooks run shell commands. To run a program, use a command node with explicit argv.",
    "",
    "# Using a step's result",
    '- ${steps.<step id>.output} in params is the result of that step of this plan (a node id, an edge id, a path), e.g. CONNECT_NODES {from: "${steps.add_writer.output}"}. A step may use it only if it depends, directly or through other steps, on that step.',
    "- Everything else is kept as written: the system's own templates in node properties (${inputs.topic}, ${steps.<node id>.output}) and a file's ${HOME}. $${ is a literal ${.",
    "",
    "# Available",
    "Models (an agent's model must be one of these ids):",
    ...listed(models, "(none: do not create agent nodes)"),
    "Deployed systems a system node may run:",
    ...listed(systems, "(none)"),
    `Webhook nodes: ${ctx.executors.webhook ? "allowed" : "NOT allowed (deploy would refuse them)"}.`,
    `Command nodes: ${commands.length > 0 ? `only these programs as argv[0]: ${commands.join(", ")}` : "NOT allowed (no program is allowed)"}.`,
    `MCP nodes: ${ctx.executors.mcp ? "allowed" : "NOT allowed (deploy would refuse them)"}.`,
    ...(ctx.sandboxFiles && ctx.sandboxFiles.length > 0
      ? [
          "Files already in the sandbox:",
          ...listed(
            ctx.sandboxFiles.map((f) => `- ${f}`),
            "",
          ),
        ]
      : []),
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
      : [
          `Build a new system with id ${q(ctx.system)} (metadata.system: ${q(ctx.system)}); its canvas is empty.`,
          "",
          "Request:",
          request,
        ].join("\n");
  return { system, user };
}

// ---------------------------------------------------------------------------------------------
// reading the reply

function normalizeAction(raw: string): string {
  return raw
    .trim()
    .toUpperCase()
    .replace(/[\s-]+/g, "_");
}

const str = (v: unknown): string => (typeof v === "string" ? v : "");

function clampInt(v: unknown, min: number, max: number, dflt: number): number {
  const n = typeof v === "number" ? v : typeof v === "string" && v.trim() !== "" ? Number(v) : NaN;
  if (!Number.isFinite(n)) return dflt;
  return Math.min(max, Math.max(min, Math.round(n)));
}

/** A list of short texts: strings only, trimmed, clipped, repeats (in any case) and empties dropped, at most `max`. */
function phrases(v: unknown, max: number): string[] {
  if (!Array.isArray(v)) return [];
  const seen = new Set<string>();
  const out: string[] = [];
  for (const x of v) {
    const t = clip(str(x).trim(), PHRASE_CHARS);
    if (!t || seen.has(t.toLowerCase())) continue;
    seen.add(t.toLowerCase());
    out.push(t);
  }
  return out.slice(0, max);
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
  if (sawJson) return { error: 'the JSON object has no steps: reply with {"metadata": {..}, "steps": [..]}' };
  return { error: "no JSON object in the reply" };
}

/**
 * The plan in a model's reply, defaults filled, or every shape problem found. Tolerates code
 * fences, prose and `<think>` blocks around the object (the outermost balanced object; braces in
 * strings do not count). Defaults: name = id, dependsOn [] (a single string is read as a list of
 * one; repeats dropped), retryCount 3 (capped to 0..3), retryDelayMs 1000 (clamped to 0..60000),
 * params {} when absent, metadata.system = `defaults.system`, metadata name/description/summary "",
 * metadata examples (at most 4) and keywords (at most 6) [] (non-strings, blanks and repeats dropped).
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
    examples: phrases(meta.examples, MAX_EXAMPLES),
    keywords: phrases(meta.keywords, MAX_KEYWORDS),
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
    const params = isObject(raw.params) ? raw.params : {};
    if (raw.params != null && !isObject(raw.params))
      errors.push(
        `${named}.params: expected an object, got ${Array.isArray(raw.params) ? "an array" : typeof raw.params}`,
      );
    let dependsOn: string[] = [];
    const deps = raw.dependsOn;
    if (typeof deps === "string") dependsOn = deps.trim() ? [deps.trim()] : [];
    else if (
      Array.isArray(deps) &&
      deps.every((d) => typeof d === "string" || (typeof d === "number" && Number.isFinite(d)))
    ) {
      dependsOn = [...new Set(deps.map((d) => String(d).trim()).filter((d) => d !== ""))];
    } else if (deps != null) errors.push(`${named}.dependsOn: expected a list of step ids`);
    const name = str(raw.name).trim() || id;
    steps.push({
      id,
      name,
      action: action as PlanAction,
      params,
      dependsOn,
      retryCount: clampInt(raw.retryCount, 0, MAX_RETRY_COUNT, DEFAULT_RETRY_COUNT),
      retryDelayMs: clampInt(raw.retryDelayMs, 0, MAX_RETRY_DELAY_MS, DEFAULT_RETRY_DELAY_MS),
    });
  });
  if (errors.length > 0) return { errors };
  return { plan: { metadata, steps } };
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
