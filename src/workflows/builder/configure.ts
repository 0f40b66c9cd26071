/**
 * CONFIGURE: a system's settings in words. The changes a person can ask for:
 *   name               the display name (renaming a system; its id stays)
 *   confirm            auto | always | never (ask before running)
 *   enabled            true | false (offered by the router, or runnable by id only)
 *   deployed           true | false (deploy, undeploy)
 *   defaults.<input>   the value used when the person gives none (the router then never asks)
 *   model.<node>       which model an agent step uses
 *   examples           messages that should run it
 *   keywords           words or short phrases that point at it (the router's keyword fallback)
 *   triggers           its schedules ("run it every weekday at 8", "every day at 7:30 instead",
 *                      "stop the schedule": src/workflows/triggers/phrases.ts), in the bridge's
 *                      time zone, told back with the cron and the next run
 * Plain phrasings are read without a model ("always ask before running X", "disable X", "set the
 * default tone to casual", "rename it to Research Digest"); anything else is asked of the answer model as JSON
 * `{"changes":[{"path","value"}]}` and every change is checked against the canvas. The person sees
 * the compiled system's diff and says yes; a model change is made through the MCP tools like any
 * canvas edit, the rest are the canvas's settings.
 */
import { createTwoFilesPatch } from "diff";
import { stringify } from "yaml";
import type { ConfigChange } from "../conversation/machine.js";
import type { CanvasStore } from "./canvas-store.js";
import { compileCanvas } from "./compile.js";
import type { ToolCaller } from "./mcp-client.js";
import { jsonObjects } from "../../core/util/model-reply.js";
import type { Canvas, CanvasTrigger } from "../../wire/canvas.js";
import { cronProblem, nextCronRun } from "../systems/cron.js";
import { scheduleFromWords } from "../triggers/phrases.js";

/** The bridge's time zone: a schedule set by chat keeps it, so its times do not move with the machine's. */
const localZone = () => Intl.DateTimeFormat().resolvedOptions().timeZone;

/** A canvas's input names (an input node's `name`, else its id). */
export const inputNames = (c: Canvas): string[] =>
  c.nodes
    .filter((n) => n.type === "input")
    .map((n) => (typeof n.properties.name === "string" && n.properties.name ? n.properties.name : n.id));

/** Changes read straight from common phrasings (none when the words are not one of them). */
export function changesFromWords(text: string, canvas: Canvas): ConfigChange[] {
  const t = text.toLowerCase();
  const out: ConfigChange[] = [];
  // "don't deploy it" asks for nothing.
  const not = (verb: string) => new RegExp(`\\b(?:don'?t|do not|never|not)\\s+(?:\\w+\\s+)?${verb}\\b`).test(t);
  if (/\bundeploy\b/.test(t) && !not("undeploy")) out.push({ path: "deployed", value: false });
  else if (/\bdeploy\b/.test(t) && !not("deploy")) out.push({ path: "deployed", value: true });
  const schedule = scheduleFromWords(text);
  if (schedule) {
    const made: CanvasTrigger[] =
      schedule.kind === "stop"
        ? []
        : [{ cron: schedule.cron, timezone: localZone(), inputs: scheduleInputs(text, canvas) }];
    const also = schedule.kind === "set" && schedule.also;
    out.push({ path: "triggers", value: also ? [...(canvas.settings.triggers ?? []), ...made] : made });
  }
  // "disable the schedule" stops the schedule, not the system.
  if (schedule?.kind !== "stop" && /\bdisable\b/.test(t) && !not("disable"))
    out.push({ path: "enabled", value: false });
  else if (/\benable\b/.test(t) && !not("enable")) out.push({ path: "enabled", value: true });
  // "rename it / the system / <id> to X", "call it X": the display name (an id needs no escaping); a node's rename is an EDIT.
  const named = new RegExp(
    String.raw`\b(?:rename (?:it|this|the system|${canvas.system}) to|call it)\s+["'\`]?([^"'\`]+?)["'\`]?\s*[.!]?$`,
    "i",
  ).exec(text);
  if (named) out.push({ path: "name", value: named[1]! });
  if (/\balways (?:ask|confirm)\b/.test(t)) out.push({ path: "confirm", value: "always" });
  else if (/\b(?:never ask|never confirm|don'?t ask|without asking)\b/.test(t))
    out.push({ path: "confirm", value: "never" });
  for (const name of inputNames(canvas)) {
    const esc = name.toLowerCase().replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
    // The value: a quoted phrase, or one word.
    const value = String.raw`(?:["'\`]([^"'\`]+)["'\`]|([^"'\`\s.,;!?]+))`;
    const m =
      new RegExp(String.raw`\bdefault (?:value of |for )?(?:the )?${esc}\b.*?(?:\bto\b|=|\bis\b)\s*${value}`, "i").exec(
        text,
      ) ?? new RegExp(String.raw`\b${esc}\b (?:default|defaults) (?:to\b|=)\s*${value}`, "i").exec(text);
    if (m) out.push({ path: `defaults.${name}`, value: m[1] ?? m[2]! });
  }
  return out;
}

/** A schedule's inputs from the words: `name=value` (or `name="a phrase"`) for the canvas's inputs. */
function scheduleInputs(text: string, canvas: Canvas): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const name of inputNames(canvas)) {
    const esc = name.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
    const m = new RegExp(String.raw`\b${esc}\s*=\s*(?:["'\`]([^"'\`]+)["'\`]|([^\s,;]+))`, "i").exec(text);
    if (m) out[name] = m[1] ?? m[2]!;
  }
  return out;
}

/** The inputs a schedule of the canvas must give (required, with no default). */
function neededInputs(canvas: Canvas): string[] {
  return canvas.nodes
    .filter((n) => n.type === "input" && n.properties.required !== false && n.properties.default === undefined)
    .map((n) => (typeof n.properties.name === "string" && n.properties.name ? n.properties.name : n.id))
    .filter((name) => canvas.settings.defaults?.[name] === undefined);
}

/** Each schedule told back: its cron, its time zone, its next run and its inputs. */
export function scheduleText(triggers: CanvasTrigger[], now = Date.now()): string {
  if (!triggers.length) return "No schedule: it runs only when asked.";
  return triggers
    .map((t) => {
      const next = nextCronRun(t.cron, t.timezone, now);
      const when = next
        ? new Date(next).toLocaleString("en-GB", {
            timeZone: t.timezone,
            weekday: "short",
            day: "numeric",
            month: "short",
            year: "numeric",
            hour: "2-digit",
            minute: "2-digit",
          })
        : "never";
      const given = Object.entries(t.inputs ?? {}).map(([k, v]) => `${k}=${String(v)}`);
      return `Schedule: cron \`${t.cron}\` (${t.timezone ?? "the bridge's time zone"}), next run ${when}${given.length ? `, with ${given.join(", ")}` : ""}.`;
    })
    .join("\n");
}

export function configurePrompt(text: string, canvas: Canvas): { system: string; user: string } {
  const agents = canvas.nodes
    .filter((n) => n.type === "agent")
    .map((n) => `${n.id} (model ${String(n.properties.model ?? "?")})`);
  const system = [
    "You turn a request to change a system's settings into JSON. Reply with JSON only:",
    '{"changes":[{"path":"...","value":...}]}',
    "Paths:",
    '- "name": the display name (renaming the system; its id stays)',
    '- "confirm": "auto" | "always" | "never" (ask before running)',
    '- "enabled": true | false (offered in chat)',
    '- "deployed": true | false',
    '- "defaults.<input>": a default value for an input',
    '- "model.<node>": the model id an agent node uses',
    '- "examples": an array of example messages that should run it',
    '- "keywords": an array of words or short phrases that point at it',
    '- "triggers": the schedules, an array of {"cron": "<5-field cron>", "inputs"?: {...}} (an empty array removes them)',
    'Use only the inputs and nodes listed. Reply {"changes":[]} when the request changes none of these.',
  ].join("\n");
  const user = [
    `System: ${canvas.system} "${canvas.name}" (${canvas.status})`,
    `Inputs: ${inputNames(canvas).join(", ") || "none"}`,
    `Agent nodes: ${agents.join(", ") || "none"}`,
    `Settings: ${JSON.stringify(canvas.settings)}`,
    "",
    `Request: ${text}`,
  ].join("\n");
  return { system, user };
}

/** The model's changes, each checked against the canvas. */
export function parseChanges(reply: string, canvas: Canvas): { changes: ConfigChange[] } | { errors: string[] } {
  for (const obj of jsonObjects(reply)) {
    if (!Array.isArray(obj.changes)) continue;
    return checkChanges(obj.changes as unknown[], canvas);
  }
  return { errors: ['the reply held no {"changes": [...]} object'] };
}

/** Changes checked against the canvas; a default is coerced to its input's type ("5" → 5) and must be an allowed value. */
export function checkChanges(list: unknown[], canvas: Canvas): { changes: ConfigChange[] } | { errors: string[] } {
  const errors: string[] = [];
  const changes: ConfigChange[] = [];
  for (const [i, c] of list.entries()) {
    const ch = c as { path?: unknown; value?: unknown };
    if (typeof ch?.path !== "string") {
      errors.push(`changes[${i}]: no path`);
      continue;
    }
    const value = ch.path.startsWith("defaults.")
      ? coerceDefault(canvas, ch.path.slice(9), ch.value)
      : { value: ch.value };
    const problem = "error" in value ? value.error : changeProblem(ch.path, value.value, canvas);
    if (problem) errors.push(`changes[${i}]: ${problem}`);
    else changes.push({ path: ch.path, value: (value as { value: unknown }).value });
  }
  return errors.length ? { errors } : { changes };
}

function coerceDefault(canvas: Canvas, name: string, raw: unknown): { value: unknown } | { error: string } {
  const n = canvas.nodes.find((x) => x.type === "input" && (x.properties.name ?? x.id) === name);
  if (!n) return { value: raw };
  const type = typeof n.properties.type === "string" ? n.properties.type : "string";
  let value = raw;
  if (typeof raw === "string" && (type === "number" || type === "integer")) value = Number(raw);
  if (typeof raw === "string" && type === "boolean")
    value = /^(true|yes|on)$/i.test(raw) ? true : /^(false|no|off)$/i.test(raw) ? false : raw;
  const ok =
    type === "string"
      ? typeof value === "string"
      : type === "boolean"
        ? typeof value === "boolean"
        : typeof value === "number" && Number.isFinite(value) && (type === "number" || Number.isInteger(value));
  if (!ok) return { error: `the default of ${name} must be a ${type}, not ${JSON.stringify(raw)}` };
  const allowed = Array.isArray(n.properties.enum) ? (n.properties.enum as unknown[]) : undefined;
  if (allowed && !allowed.includes(value))
    return {
      error: `the default of ${name} must be one of ${allowed.map((a) => JSON.stringify(a)).join(", ")}, not ${JSON.stringify(raw)}`,
    };
  return { value };
}

function changeProblem(path: string, value: unknown, canvas: Canvas): string | undefined {
  if (path === "name")
    return typeof value === "string" && value.trim() && value.length <= 80
      ? undefined
      : "a name is a short text (up to 80 characters)";
  if (path === "confirm")
    return ["auto", "always", "never"].includes(value as string) ? undefined : "confirm is auto, always or never";
  if (path === "enabled" || path === "deployed")
    return typeof value === "boolean" ? undefined : `${path} is true or false`;
  if (path === "examples" || path === "keywords")
    return Array.isArray(value) && value.every((v) => typeof v === "string" && v.trim() !== "")
      ? undefined
      : `${path} is a list of ${path === "examples" ? "messages" : "words or short phrases"}`;
  if (path === "triggers") {
    if (!Array.isArray(value)) return "triggers is a list of schedules";
    for (const t of value as CanvasTrigger[]) {
      if (!t || typeof t.cron !== "string") return 'a schedule is {"cron": "…"}';
      const bad = cronProblem(t.cron, t.timezone);
      if (bad) return `the schedule's ${bad.message}`;
      const missing = neededInputs(canvas).filter((n) => t.inputs?.[n] === undefined);
      if (missing.length)
        return `a schedule must give ${missing.join(", ")} (no default): say, for example, *run it every weekday at 8 with ${missing[0]}=…*`;
    }
    return undefined;
  }
  if (path.startsWith("defaults.")) {
    const name = path.slice(9);
    return inputNames(canvas).includes(name)
      ? undefined
      : `no input "${name}" (inputs: ${inputNames(canvas).join(", ") || "none"})`;
  }
  if (path.startsWith("model.")) {
    const node = canvas.nodes.find((n) => n.id === path.slice(6));
    if (node?.type !== "agent") return `no agent node "${path.slice(6)}"`;
    return typeof value === "string" && value ? undefined : "a model is a model id";
  }
  return `unknown setting "${path}"`;
}

/** The canvas as it would be (settings and agent models; `deployed` is not a canvas change). */
export function withChanges(canvas: Canvas, changes: ConfigChange[]): Canvas {
  const next: Canvas = {
    ...canvas,
    settings: { ...canvas.settings, defaults: { ...canvas.settings.defaults } },
    nodes: canvas.nodes.map((n) => ({ ...n, properties: { ...n.properties } })),
  };
  for (const c of changes) {
    if (c.path === "name") next.name = (c.value as string).trim();
    else if (c.path === "confirm") next.settings.confirm = c.value as "auto";
    else if (c.path === "enabled") next.settings.enabled = c.value as boolean;
    else if (c.path === "examples") next.settings.examples = c.value as string[];
    else if (c.path === "keywords") next.settings.keywords = c.value as string[];
    else if (c.path === "triggers") next.settings.triggers = c.value as CanvasTrigger[];
    else if (c.path.startsWith("defaults.")) next.settings.defaults![c.path.slice(9)] = c.value;
    else if (c.path.startsWith("model.")) next.nodes.find((n) => n.id === c.path.slice(6))!.properties.model = c.value;
  }
  return next;
}

/** The compiled system before and after, as a unified diff (or the changes listed when it does not compile yet). */
export function systemDiff(canvas: Canvas, changes: ConfigChange[]): string {
  const before = compileCanvas(canvas);
  const after = compileCanvas(withChanges(canvas, changes));
  if (!before.ok || !after.ok) return changes.map((c) => `- \`${c.path}\` → \`${JSON.stringify(c.value)}\``).join("\n");
  const patch = createTwoFilesPatch(
    `${canvas.system}.yaml`,
    `${canvas.system}.yaml`,
    stringify(before.system),
    stringify(after.system),
    "now",
    "after",
    { context: 2 },
  );
  return "```diff\n" + patch.split("\n").slice(2).join("\n").trimEnd() + "\n```";
}

/** Apply: an agent's model through the MCP tools, settings on the canvas. */
export async function applyChanges(
  changes: ConfigChange[],
  canvas: Canvas,
  store: CanvasStore,
  connect: () => Promise<ToolCaller>,
): Promise<void> {
  const models = changes.filter((c) => c.path.startsWith("model."));
  if (models.length) {
    const tools = await connect();
    try {
      for (const c of models) {
        const out = await tools.call("canvas_update_property", {
          system: canvas.system,
          node: c.path.slice(6),
          key: "model",
          value: c.value,
        });
        if (!out.ok) throw new Error(out.error);
      }
    } finally {
      await tools.close().catch(() => {});
    }
  }
  const rest = changes.filter((c) => !c.path.startsWith("model.") && c.path !== "deployed");
  if (rest.length)
    await store.mutate(canvas.system, (c) => {
      const next = withChanges(c, rest);
      return { ...c, name: next.name, settings: next.settings };
    });
}
