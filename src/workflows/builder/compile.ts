/**
 * A canvas compiles to the `plan` system format of src/workflows/systems — one model, not two: what the
 * builder makes, the router runs.
 * - `input` nodes become the system's input schema (required unless they have a default);
 * - every step node (agent, webhook, command, mcp, approval, system) becomes a plan step with the node's id;
 *   an edge between step nodes is a `dependsOn`; an edge from an input is data only;
 * - `agent` → a `model` step (`{model, prompt, system?, timeoutSeconds?}`); its prompt's
 *   `{{name}}` names an input or a node upstream of it (→ `${inputs.name}` /
 *   `${steps.name.output}`); without a prompt, the node's label and its upstream values are sent;
 * - webhook / command / mcp / approval → that kind's step with the node's properties (`{{name}}`
 *   converted; an approval shows the outputs of the steps connected to it unless `show` says);
 * - `system` → a step that uses another system (`properties.with` are its inputs);
 * - the canvas's settings (confirm, enabled, examples, keywords, input defaults, schedules) are the system's;
 * - the `output` node's one incoming edge names the step whose output is the run's output (default:
 *   the last step in dependency order).
 * Problems name the node and the property to fix. Deeper checks (settings of each kind, known
 * models and systems, templates) are the library's own, run by deploy on the compiled system.
 */
import type { Canvas, CanvasNode } from "../../wire/canvas.js";
import { STEP_NODE_TYPES } from "./types.js";
import { checkGraph } from "../engine/graph.js";

export interface CompileProblem {
  /** The node (or `canvas`). */
  node: string;
  message: string;
}

export type CompileResult = { ok: true; system: Record<string, unknown> } | { ok: false; problems: CompileProblem[] };

const INPUT_TYPES = new Set(["string", "number", "integer", "boolean"]);
const MUSTACHE = /\{\{\s*([A-Za-z0-9_-]+)\s*\}\}/g;

export function compileCanvas(canvas: Canvas): CompileResult {
  const problems: CompileProblem[] = [];
  const byId = new Map(canvas.nodes.map((n) => [n.id, n]));
  const inputs = canvas.nodes.filter((n) => n.type === "input");
  const steps = canvas.nodes.filter((n) => STEP_NODE_TYPES.includes(n.type));
  const outputs = canvas.nodes.filter((n) => n.type === "output");
  if (!steps.length)
    problems.push({
      node: "canvas",
      message: "the canvas has no step (an agent, webhook, command, mcp, approval or system node); add one",
    });

  // Inputs.
  const properties: Record<string, Record<string, unknown>> = {};
  const required: string[] = [];
  const inputName = new Map<string, string>();
  for (const n of inputs) {
    const p = n.properties;
    const name = typeof p.name === "string" && p.name ? p.name : n.id;
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name))
      problems.push({
        node: n.id,
        message: `input name "${name}" must be letters, digits and _ (set properties.name)`,
      });
    if (properties[name]) problems.push({ node: n.id, message: `input "${name}" is declared twice` });
    const type = typeof p.type === "string" ? p.type : "string";
    if (!INPUT_TYPES.has(type))
      problems.push({
        node: n.id,
        message: `properties.type "${type}" is not one of string, number, integer, boolean`,
      });
    const def = canvas.settings.defaults?.[name] ?? p.default;
    const prop: Record<string, unknown> = {
      type,
      description: typeof p.description === "string" && p.description ? p.description : n.label,
    };
    if (Array.isArray(p.enum) && p.enum.length) prop.enum = p.enum;
    if (def !== undefined && def !== null) prop.default = def;
    properties[name] = prop;
    inputName.set(n.id, name);
    if (p.required !== false && prop.default === undefined) required.push(name);
  }

  // Edges: dependencies between steps; upstream sets for templates.
  const incoming = new Map<string, string[]>();
  for (const e of canvas.edges) {
    if (!byId.has(e.from) || !byId.has(e.to)) {
      problems.push({ node: e.id, message: `edge ${e.id} joins a node that does not exist` });
      continue;
    }
    incoming.set(e.to, [...(incoming.get(e.to) ?? []), e.from]);
  }
  const upstream = checkGraph(canvas.nodes.map((n) => ({ id: n.id, dependsOn: incoming.get(n.id) ?? [] }))).ancestors;
  const isStep = (id: string) => STEP_NODE_TYPES.includes(byId.get(id)!.type);

  /** `{{name}}` → a system template reference, for the node `at`. */
  const convert = (value: unknown, at: CanvasNode, where: string): unknown => {
    if (typeof value === "string") {
      const up = upstream.get(at.id)!;
      return value.replace(MUSTACHE, (whole, name: string) => {
        const inputNode = inputs.find((n) => inputName.get(n.id) === name || n.id === name);
        if (inputNode) return `\${inputs.${inputName.get(inputNode.id)}}`;
        if (byId.has(name) && isStep(name)) {
          if (up.has(name)) return `\${steps.${name}.output}`;
          problems.push({
            node: at.id,
            message: `${where}: {{${name}}} is a node this one is not connected from; connect ${name} → ${at.id}`,
          });
          return whole;
        }
        problems.push({
          node: at.id,
          message: `${where}: {{${name}}} names no input and no node (inputs: ${[...inputName.values()].join(", ") || "none"})`,
        });
        return whole;
      });
    }
    if (Array.isArray(value)) return value.map((v, i) => convert(v, at, `${where}[${i}]`));
    if (value && typeof value === "object")
      return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, convert(v, at, `${where}.${k}`)]));
    return value;
  };

  /** The label as the instruction, and every value the node is connected from. */
  const defaultPrompt = (n: CanvasNode): string => {
    const lines = [n.label.trim() || n.id];
    if (typeof n.properties.description === "string" && n.properties.description) lines.push(n.properties.description);
    for (const id of incoming.get(n.id) ?? []) {
      const src = byId.get(id)!;
      const name = src.type === "input" ? inputName.get(id)! : id;
      lines.push(`\n${src.label || name}:\n{{${name}}}`);
    }
    return lines.join("\n");
  };

  /** A step node as the plan's `uses` and `with`. */
  const stepOf = (n: CanvasNode): { uses: string; with: Record<string, unknown> } => {
    const p = n.properties;
    switch (n.type) {
      case "agent": {
        if (typeof p.model !== "string" || !p.model)
          problems.push({ node: n.id, message: "set properties.model to a configured model id" });
        let prompt = typeof p.prompt === "string" && p.prompt.trim() ? p.prompt : defaultPrompt(n);
        prompt = convert(prompt, n, "properties.prompt") as string;
        const w: Record<string, unknown> = { model: p.model, prompt };
        if (typeof p.system === "string" && p.system) w.system = convert(p.system, n, "properties.system");
        if (typeof p.timeoutSeconds === "number") w.timeoutSeconds = p.timeoutSeconds;
        return { uses: "model", with: w };
      }
      case "system": {
        if (typeof p.system !== "string" || !p.system)
          problems.push({ node: n.id, message: "set properties.system to the id of the system it runs" });
        return {
          uses: String(p.system ?? ""),
          with: (convert(p.with ?? {}, n, "properties.with") as Record<string, unknown>) ?? {},
        };
      }
      default: {
        const { kind: _k, ...settings } = p;
        return { uses: n.type, with: convert(settings, n, "properties") as Record<string, unknown> };
      }
    }
  };

  // Steps, in dependency order (a canvas's edges have no cycle; checked again here).
  const order = checkGraph(
    steps.map((s) => ({ id: s.id, dependsOn: (incoming.get(s.id) ?? []).filter(isStep) })),
  ).order;
  if (!order) problems.push({ node: "canvas", message: "the steps' connections form a cycle; remove one edge of it" });
  const planSteps = (order ?? []).map((id) => {
    const { uses, with: w } = stepOf(byId.get(id)!);
    return { id, uses, with: w, dependsOn: [...new Set((incoming.get(id) ?? []).filter(isStep))] };
  });

  // Output.
  let output: string | undefined;
  if (outputs.length > 1)
    problems.push({ node: outputs[1]!.id, message: "a canvas has one output node; delete the others" });
  if (outputs[0]) {
    const from = incoming.get(outputs[0].id) ?? [];
    if (from.length !== 1 || !isStep(from[0]!))
      problems.push({ node: outputs[0].id, message: "connect exactly one step to the output node" });
    else output = from[0];
  }

  if (problems.length) return { ok: false, problems };
  const s = canvas.settings;
  const system: Record<string, unknown> = {
    id: canvas.system,
    name: canvas.name || canvas.system,
    description: canvas.description,
    ...(s.examples?.length ? { examples: s.examples } : {}),
    ...(s.keywords?.length ? { keywords: s.keywords } : {}),
    inputs: { type: "object", properties, ...(required.length ? { required } : {}) },
    confirm: s.confirm ?? "auto",
    enabled: s.enabled ?? true,
    ...(s.triggers?.length ? { triggers: s.triggers } : {}),
    run: { kind: "plan", steps: planSteps, ...(output ? { output } : {}) },
  };
  return { ok: true, system };
}
