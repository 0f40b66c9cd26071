/**
 * The router's own words, as markdown: the question for missing inputs (the seed's clarify
 * format, kept), the confirmation before a run, progress lines while a run goes, and the short
 * replies for listing, cancelling, giving up and declining. Pure text builders; no I/O.
 */
import type { LoadedSystem } from "../systems/types.js";
import { fieldsOf, type FieldInfo, type InputCheck } from "../systems/inputs.js";
import { clip, oneLine } from "../../core/util/model-reply.js";

/** Longest value shown in a confirmation, and in a "you gave …" note. */
export const CONFIRM_VALUE_CHARS = 200;
const GAVE_VALUE_CHARS = 60;
const ENUM_SHOWN = 20;
const ERROR_CHARS = 200;
const DESCRIPTION_CHARS = 160;

export const plain = (v: unknown): string =>
  typeof v === "string"
    ? v
    : typeof v === "number" || typeof v === "boolean"
      ? String(v)
      : (JSON.stringify(v) ?? String(v));

/** "formal, casual, technical" (the first 20, then "…"). */
function allowedList(values: unknown[]): string {
  const shown = values.slice(0, ENUM_SHOWN).map(plain).join(", ");
  return values.length > ENUM_SHOWN ? `${shown}, …` : shown;
}

/** `"lots"` for text, `50` for a number: a value the person gave, one line, clipped. */
function gave(v: unknown): string {
  if (typeof v === "string") return JSON.stringify(clip(v, GAVE_VALUE_CHARS));
  return clip(plain(v), GAVE_VALUE_CHARS);
}

/** `- **tone** (string: formal, casual, technical): Writing tone` */
function fieldLine(f: FieldInfo, note?: string): string {
  const type = f.enum && f.enum.length > 0 ? `${f.type}: ${allowedList(f.enum)}` : f.type;
  const desc = f.description ? `: ${oneLine(f.description)}` : "";
  return `- **${f.name}** (${type})${desc}${note ? ` — ${note}` : ""}`;
}

const capitalise = (s: string): string => s.charAt(0).toUpperCase() + s.slice(1);

/**
 * The question for missing or invalid inputs. A required field given an invalid value (it is in
 * both lists) is listed once, with what was given and why it does not do. `problems` (from
 * `checkInputs`) are rules of the schema no single field explains ("needs one of a, b").
 */
export function clarifyText(
  systemName: string,
  missing: FieldInfo[],
  invalid: InputCheck["invalid"],
  problems: string[] = [],
): string {
  const bad = new Map(invalid.map((i) => [i.field.name, i]));
  const note = (name: string): string | undefined => {
    const i = bad.get(name);
    return i ? `you gave ${gave(i.value)}, which ${i.problem}` : undefined;
  };
  const listed = new Set<string>();
  const lines: string[] = [];
  for (const f of [...missing, ...invalid.map((i) => i.field)]) {
    if (listed.has(f.name)) continue;
    listed.add(f.name);
    lines.push(fieldLine(f, note(f.name)));
  }
  for (const p of problems) lines.push(`- ${capitalise(p)}`);
  return `I can run **${systemName}** for you, but I need a bit more info:\n\n${lines.join("\n")}\n\nPlease provide the missing details.`;
}

const CONFIRM_REASONS = {
  side_effects: "It changes things outside this chat, so I'm checking first.",
  unsure: "I'm not sure this is what you meant, so I'm checking first.",
  always: "This system always asks before it runs.",
} as const;

/** One value as shown before a run: one line, long values clipped with their full length noted. */
function shownValue(v: unknown): string {
  const s = plain(v);
  const t = oneLine(s);
  if (t.length <= CONFIRM_VALUE_CHARS) return t;
  return `${t.slice(0, CONFIRM_VALUE_CHARS - 1).trimEnd()}… (${s.length} characters)`;
}

/** The question before a run: exactly the inputs that will be used, why it asks, then "Run it? (yes / no)". */
export function confirmText(
  systemName: string,
  values: Record<string, unknown>,
  why: "side_effects" | "unsure" | "always",
): string {
  const entries = Object.entries(values);
  const head =
    entries.length > 0
      ? `Ready to run **${systemName}** with:\n\n${entries.map(([k, v]) => `- **${k}**: ${shownValue(v)}`).join("\n")}`
      : `Ready to run **${systemName}** (it takes no inputs).`;
  return `${head}\n\n${CONFIRM_REASONS[why]}\n\nRun it? (yes / no)`;
}

/** The first line of a run's reply. */
export function runningLine(systemName: string): string {
  return `Running **${systemName}**…`;
}

/** The head of a test run's answer. */
export function testingLine(systemName: string): string {
  return `Test run of **${systemName}**: model steps run, nothing with side effects is sent…`;
}

export interface StepLineEvent {
  kind: "completed" | "retry" | "failed" | "skipped";
  step: string;
  /** Time the step took. */
  ms?: number;
  /** The attempt about to start (retry). */
  attempt?: number;
  maxAttempts?: number;
  /** Why it failed; for `skipped`, why it was skipped ("fetch failed"). */
  error?: string;
  /** Wait before the next attempt (retry). */
  delayMs?: number;
}

export const seconds = (ms: number): string => `${(Math.max(0, ms) / 1000).toFixed(1)} s`;

/** "fetch failed" / "fetch was skipped" (the plan runner's reasons) with the step id in code. */
function skipReason(reason: string): string {
  const m = /^([a-z0-9][a-z0-9_-]*) (failed|was skipped)$/.exec(reason.trim());
  return m ? `\`${m[1]}\` ${m[2]}` : clip(reason, ERROR_CHARS);
}

/** One markdown line for a step event of a running plan. */
export function stepLine(e: StepLineEvent): string {
  const step = `\`${e.step}\``;
  const took = e.ms !== undefined ? ` (${seconds(e.ms)})` : "";
  const error = e.error ? `: ${clip(e.error, ERROR_CHARS)}` : "";
  switch (e.kind) {
    case "completed":
      return `- ✓ ${step} done${took}`;
    case "retry": {
      const wait = e.delayMs !== undefined ? ` — retrying in ${seconds(e.delayMs)}` : " — retrying";
      const attempt =
        e.attempt !== undefined
          ? ` (attempt ${e.attempt}${e.maxAttempts !== undefined ? ` of ${e.maxAttempts}` : ""})`
          : "";
      return `- ↻ ${step} failed${error}${wait}${attempt}`;
    }
    case "failed":
      return `- ✗ ${step} failed${error}${took}`;
    case "skipped":
      return `- ⤼ ${step} skipped${e.error ? `: ${skipReason(e.error)}` : ""}`;
  }
}

/** The systems a person can run, with what each needs. */
export function systemsListText(systems: LoadedSystem[]): string {
  if (systems.length === 0) return "No systems are set up yet.";
  const lines = systems.map((s) => {
    const title = s.name && s.name !== s.id ? `**${s.name}** (\`${s.id}\`)` : `**${s.id}**`;
    const desc = s.description ? `: ${clip(s.description, DESCRIPTION_CHARS)}` : "";
    const needs = fieldsOf(s.inputs)
      .filter((f) => f.required)
      .map((f) => f.name);
    return `- ${title}${desc}${needs.length > 0 ? ` — needs ${needs.join(", ")}` : ""}`;
  });
  return `Systems you can run:\n\n${lines.join("\n")}\n\nAsk in your own words, or use \`/run <id> name=value\`.`;
}

/** After the person cancels what the router was asking about. */
export function cancelledText(what: string): string {
  return `OK, cancelled **${what}**.`;
}

/**
 * When the router stops asking for a system's inputs: after too many questions (`rounds`, with
 * their number when known) or because the question was left unanswered too long (`expired`).
 */
export function giveUpText(systemName: string, why: "rounds" | "expired" = "rounds", tries?: number): string {
  const reason =
    why === "expired"
      ? `I was waiting for details to run **${systemName}**, but it has been a while, so I've stopped asking.`
      : `I still don't have everything **${systemName}** needs, so I've stopped asking${tries !== undefined ? ` after ${tries} ${tries === 1 ? "try" : "tries"}` : ""}.`;
  return `${reason} Nothing was run — just ask again whenever you're ready.`;
}

/** After a "no" to the confirmation. */
export function declinedText(systemName: string): string {
  return `OK, I won't run **${systemName}**.`;
}
