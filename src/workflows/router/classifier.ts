/**
 * The router's classifier: the prompt that asks a model what ONE chat message wants (an ordinary
 * answer, running one of the user's systems, cancelling, or the status of a run; with a builder,
 * building or changing a system, or a question about the user's systems), and the reader of
 * its JSON reply. Pure: the engine makes the model call.
 *
 * The prompt is sent on every routed message, so it is compact: one short block per system
 * (id, name, description, up to three examples, inputs with type, allowed values and whether they
 * are required), long texts clipped. Measured: the fixed part is about 640 characters (150 tokens);
 * each system with a 100-character description, three examples and three inputs adds about 390
 * characters (95 tokens), so 10 such systems make about 4,500 characters (1,100 tokens, counted with
 * gpt-tokenizer). The test suite measures it and keeps it under 6,000 characters.
 * The system text depends only on the systems (plus the gathering block at its end), so a server
 * with prefix caching can reuse it.
 *
 * The reply reader never trusts the model beyond its JSON: the action is checked, the confidence
 * clamped, the system looked up among the known ids (an invented id becomes an ordinary answer),
 * and the inputs it claims are only candidates — src/workflows/systems/inputs.ts `checkInputs` decides.
 */
import type { LoadedSystem } from "../systems/types.js";
import { fieldsOf } from "../systems/inputs.js";
import { plain } from "./messages.js";
import {
  cleanReply,
  clip,
  clipMiddle,
  isObject,
  jsonObjects,
  oneLine,
  readConfidence,
} from "../../core/util/model-reply.js";

export interface ClassifierReply {
  /** `build`, `ask`: only when the router has a builder (make, change, deploy or export a system; a question about the person's systems). */
  action: "answer" | "run" | "cancel" | "status" | "build" | "ask";
  /** A known system id (exactly as known), for `run`; for `cancel`/`status` only when one was named. */
  system?: string;
  /** 0..1. */
  confidence: number;
  /** Values the person stated, as the model read them (unchecked). */
  inputs: Record<string, unknown>;
}

export interface ClassifierTurn {
  role: "user" | "assistant";
  text: string;
}

export interface ClassifierPromptArgs {
  systems: LoadedSystem[];
  userText: string;
  recent: ClassifierTurn[];
  /** Set while the router is asking for a system's missing inputs. */
  gathering?: { system: LoadedSystem; collected: Record<string, unknown>; missing: string[] };
  /** The router hands building and changing systems to a builder: offer the `build` action. */
  builder?: boolean;
}

/** Recent turns kept in the prompt, and their length. */
export const RECENT_TURNS = 6;
export const RECENT_CHARS = 400;
/** The message itself: head and tail kept when longer. */
export const MESSAGE_HEAD_CHARS = 3000;
export const MESSAGE_TAIL_CHARS = 1000;

const DESCRIPTION_CHARS = 240;
const EXAMPLES_PER_SYSTEM = 3;
const EXAMPLE_CHARS = 100;
const INPUT_DESCRIPTION_CHARS = 100;
const ALLOWED_VALUES = 12;
const COLLECTED_CHARS = 600;

function systemBlock(s: LoadedSystem): string {
  const head = s.name && s.name !== s.id ? `- ${s.id} "${oneLine(s.name)}"` : `- ${s.id}`;
  const lines = [s.description ? `${head}: ${clip(s.description, DESCRIPTION_CHARS)}` : head];
  const examples = s.examples.slice(0, EXAMPLES_PER_SYSTEM).map((e) => JSON.stringify(clip(e, EXAMPLE_CHARS)));
  if (examples.length > 0) lines.push(`  e.g. ${examples.join("; ")}`);
  const fields = fieldsOf(s.inputs).map((f) => {
    const allowed = f.enum
      ? `: ${f.enum.slice(0, ALLOWED_VALUES).map(plain).join("|")}${f.enum.length > ALLOWED_VALUES ? "|…" : ""}`
      : "";
    const desc = f.description ? ` ${clip(f.description, INPUT_DESCRIPTION_CHARS)}` : "";
    return `${f.name} (${f.type}${allowed}${f.required ? ", required" : ""})${desc}`;
  });
  lines.push(fields.length > 0 ? `  inputs: ${fields.join("; ")}` : "  inputs: none");
  return lines.join("\n");
}

/** The classifier's system and user text for one message. */
export function classifierPrompt(args: ClassifierPromptArgs): { system: string; user: string } {
  const parts = [
    "You classify ONE chat message for a router that can run the user's systems (automations).",
    "Actions:",
    "- answer: ordinary chat or a question; nothing to run.",
    "- run: the person asks to run or do what a system does.",
    "- cancel: they want to stop what is being gathered or running.",
    "- status: they ask how a run is going.",
    ...(args.builder
      ? [
          "- build: they ask to make a new system, or to change, deploy, export or configure one (not to run it).",
          "- ask: a question about their own systems, canvases or runs (what one does, which runs failed, how a run went).",
        ]
      : []),
    "Inputs: only values the person actually stated (in the message or the recent turns), under the input names listed. Never invent, guess or fill in defaults; leave out what they did not give.",
    `Reply with ONLY a JSON object: {"action":"answer|run|cancel|status${args.builder ? "|build|ask" : ""}","system":"<id>|null","confidence":0..1,"inputs":{}}`,
    "",
    "Systems:",
    ...(args.systems.length > 0 ? args.systems.map(systemBlock) : ["(none)"]),
  ];
  const g = args.gathering;
  if (g) {
    const collected = clip(JSON.stringify(g.collected), COLLECTED_CHARS);
    parts.push(
      "",
      `Now collecting inputs for ${g.system.id}. Collected: ${collected}. Missing: ${g.missing.join(", ") || "none"}.`,
      `The message most likely supplies missing inputs: then action run, system ${g.system.id}, with the values it gives. Only if it is clearly an unrelated question, answer; if they want to stop, cancel.`,
    );
  }
  const recent = args.recent.slice(-RECENT_TURNS).map((t) => `${t.role}: ${clip(t.text, RECENT_CHARS)}`);
  const user = [
    ...(recent.length > 0 ? ["Recent turns:", ...recent, ""] : []),
    "Message:",
    clipMiddle(args.userText, MESSAGE_HEAD_CHARS, MESSAGE_TAIL_CHARS),
  ].join("\n");
  return { system: parts.join("\n"), user };
}

// ---------------------------------------------------------------------------------------------
// reading the reply

const ACTIONS: Record<string, ClassifierReply["action"]> = {
  answer: "answer",
  direct: "answer",
  "direct-answer": "answer",
  chat: "answer",
  run: "run",
  trigger: "run",
  execute: "run",
  cancel: "cancel",
  status: "status",
  build: "build",
  ask: "ask",
  query: "ask",
};

/** Characters of a reply looked at. */
const MAX_REPLY_CHARS = 100_000;

/**
 * The classifier's decision from its reply text, or `{error}` when the reply holds no usable JSON
 * object. Tolerates code fences, prose and `<think>` blocks around the object.
 */
export function parseClassifierReply(
  text: string,
  known: ReadonlySet<string>,
  opts: { builder?: boolean } = {},
): ClassifierReply | { error: string } {
  const cleaned = cleanReply(text, MAX_REPLY_CHARS);
  let obj: Record<string, unknown> | undefined;
  let sawJson = false;
  for (const o of jsonObjects(cleaned)) {
    sawJson = true;
    if ("action" in o) {
      obj = o;
      break;
    }
  }
  if (!obj) return { error: sawJson ? "the JSON object has no action" : "no JSON object in the reply" };
  const rawAction =
    typeof obj.action === "string"
      ? obj.action
          .trim()
          .toLowerCase()
          .replace(/[\s_]+/g, "-")
      : "";
  const action = ACTIONS[rawAction];
  if (action === "build" || action === "ask")
    return opts.builder
      ? { action, confidence: readConfidence(obj.confidence) ?? 0.5, inputs: {} }
      : { action: "answer", confidence: 0, inputs: {} };
  if (!action)
    return { error: `unknown action ${JSON.stringify(obj.action)} (expected answer, run, cancel or status)` };

  let system: string | undefined;
  let unknownSystem = false;
  if (typeof obj.system === "string" && obj.system.trim() !== "" && !/^(null|none|n\/a)$/i.test(obj.system.trim())) {
    const wanted = obj.system.trim().toLowerCase();
    system = [...known].find((k) => k.toLowerCase() === wanted);
    unknownSystem = system === undefined;
  }
  const inputs = isObject(obj.inputs) ? obj.inputs : {};
  const confidence = readConfidence(obj.confidence) ?? (action === "run" ? 0.5 : 0);

  if (action === "run") {
    // An invented system, or none: nothing to run.
    if (unknownSystem || system === undefined) return { action: "answer", confidence: 0, inputs: {} };
    return { action, system, confidence, inputs };
  }
  if (action === "answer") return { action, confidence, inputs: {} };
  // cancel / status: an unknown id is dropped, the wish to cancel or to know stays.
  return system !== undefined ? { action, system, confidence, inputs: {} } : { action, confidence, inputs: {} };
}

/** The follow-up user message when a reply could not be read: asks again for the JSON object only. */
export function retryMessage(previous: string): string {
  const said = clip(previous, 160);
  return [
    said
      ? `Your reply could not be read as the JSON object asked for (you wrote: ${JSON.stringify(said)}).`
      : "Your reply was empty.",
    'Reply again with ONLY one JSON object, no prose and no code fences: {"action":"answer|run|cancel|status","system":"<id>|null","confidence":0..1,"inputs":{}}',
  ].join("\n");
}
