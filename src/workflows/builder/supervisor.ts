/**
 * The builder's Supervisor: what ONE chat message in the builder wants — build a new system, edit
 * an existing canvas, ask about canvases/systems/runs, export a system, change a system's settings,
 * or none of these. Pure: the caller makes the model call with `supervisorPrompt`, reads the reply
 * with `parseSupervisorReply`, and falls back to `keywordIntent` when the model fails or its reply
 * cannot be read.
 *
 * The keyword fallback replaces the original's substring matching (docs SEED003 "Supervisor"):
 * words are matched whole, on word boundaries ("show" is not "how", "address" is not "add",
 * "news" is not "new"), "set" is a CONFIGURE word (but "set up" is building), "configure" counts
 * only for CONFIGURE, and deploying / enabling is a setting change, not a build.
 */
import type { Intent, IntentVerdict } from "./types.js";
import { INTENTS } from "./types.js";
import {
  cleanReply as cleanModelReply,
  clip,
  clipMiddle,
  jsonObjects,
  readConfidence,
} from "../../core/util/model-reply.js";
import { words } from "../router/keyword-fallback.js";

export interface SupervisorTurn {
  role: "user" | "assistant";
  text: string;
}

export interface SupervisorPromptArgs {
  text: string;
  recent?: SupervisorTurn[];
  canvases: Array<{ system: string; name: string; status: string }>;
}

/** Recent turns kept in the prompt, and their length. */
export const RECENT_TURNS = 6;
export const RECENT_CHARS = 400;
/** The message itself: head and tail kept when longer. */
export const MESSAGE_HEAD_CHARS = 3000;
export const MESSAGE_TAIL_CHARS = 1000;
/** Canvases listed (the most relevant are the caller's to put first). */
export const CANVASES_LISTED = 50;

/** Confidence when the model's JSON has no usable confidence (as the original did). */
export const DEFAULT_MODEL_CONFIDENCE = 0.8;

const REPLY_SHAPE = '{"intent":"BUILD|EDIT|QUERY|EXPORT|CONFIGURE|UNKNOWN","confidence":0..1}';

/** The Supervisor's system and user text for one message. */
export function supervisorPrompt(args: SupervisorPromptArgs): { system: string; user: string } {
  const canvases = args.canvases.slice(0, CANVASES_LISTED).map((c) => {
    const name = c.name && c.name !== c.system ? ` "${clip(c.name, 80)}"` : "";
    return `- ${c.system}${name} (${c.status})`;
  });
  if (args.canvases.length > CANVASES_LISTED) canvases.push(`- … and ${args.canvases.length - CANVASES_LISTED} more`);
  const system = [
    "You classify ONE chat message sent to a builder that turns plain words into systems (automations drawn as a canvas of nodes and edges).",
    "Intents:",
    "- BUILD: make a new system.",
    "- EDIT: change the nodes, steps, connections or files of an existing system, including adding to it or deleting from it.",
    "- QUERY: a question about the canvas, the systems or recent runs; nothing is changed.",
    "- EXPORT: bundle, download or export a system.",
    "- CONFIGURE: change a system's settings: its name (renaming the system itself), input defaults, confirmation policy, which model a step uses, enabled or not, deploy or undeploy.",
    "- UNKNOWN: anything else.",
    "A message that names an existing canvas and asks to add something to it is EDIT, not BUILD.",
    `Reply with ONLY a JSON object: ${REPLY_SHAPE}`,
    "",
    "Existing canvases:",
    ...(canvases.length > 0 ? canvases : ["(none)"]),
  ].join("\n");
  const recent = (args.recent ?? []).slice(-RECENT_TURNS).map((t) => `${t.role}: ${clip(t.text, RECENT_CHARS)}`);
  const user = [
    ...(recent.length > 0 ? ["Recent turns:", ...recent, ""] : []),
    "Message:",
    clipMiddle(String(args.text ?? ""), MESSAGE_HEAD_CHARS, MESSAGE_TAIL_CHARS),
  ].join("\n");
  return { system, user };
}

// ---------------------------------------------------------------------------------------------
// reading a model's JSON reply (also used by the Architect)

/** Bounds on reading a reply: characters looked at, and `{` tried as the start of an object. */
export const MAX_REPLY_CHARS = 200_000;
/** A reply without `<think>…</think>` blocks, cut to MAX_REPLY_CHARS. */
export const cleanReply = (text: string): string => cleanModelReply(text, MAX_REPLY_CHARS);

/**
 * The intent from the model's reply, or `{error}` when the reply holds no JSON object with an
 * `intent` (a `type` field, as the original asked for, is read too) or names an unknown intent.
 * Tolerates code fences, prose and `<think>` blocks around the object; the intent is read
 * case-insensitively. Confidence: clamped to [0, 1] (a number above 1 and up to 100 is a
 * percentage, "85%" too); missing or unreadable → DEFAULT_MODEL_CONFIDENCE (0.8, as the original) —
 * a model that named a valid intent but no number is trusted about as much as an ordinary answer,
 * and above the keyword fallback's best (0.9 is only reached with many keywords).
 */
export function parseSupervisorReply(text: string): IntentVerdict | { error: string } {
  const objects = [...jsonObjects(cleanReply(text))];
  const obj = objects.find((o) => "intent" in o || "type" in o);
  if (!obj) return { error: objects.length ? "the JSON object has no intent" : "no JSON object in the reply" };
  const raw = "intent" in obj ? obj.intent : obj.type;
  const wanted = typeof raw === "string" ? raw.trim().toUpperCase() : "";
  const intent = INTENTS.find((i) => i === wanted);
  if (!intent) return { error: `unknown intent ${JSON.stringify(raw)} (expected ${INTENTS.join(", ")})` };
  return { intent, confidence: readConfidence(obj.confidence) ?? DEFAULT_MODEL_CONFIDENCE, source: "model" };
}

// ---------------------------------------------------------------------------------------------
// keyword fallback

type Scored = Exclude<Intent, "UNKNOWN">;

/**
 * Words and phrases per intent, matched whole (a phrase: consecutive words).
 * - BUILD "add" is a keyword, but a weak one: see the tie rule in `keywordIntent`.
 * - EXPORT: "save" alone is NOT a keyword — in a builder "save" mostly means keeping changes
 *   ("save it", "save the new prompt"), which is not a download; "save as" is. "output" is not
 *   one either (the original had it): it is a node type ("connect the writer to the output").
 * - CONFIGURE: "set" (not in "set up", which is building), the setting nouns (with "model": which
 *   model a step uses is a setting), and deploying / enabling, which change how an existing system
 *   is offered, not what it is. A build request that mentions a model ("make a system that uses
 *   the fast model") stays BUILD through the tie rule (its verb comes first).
 */
const KEYWORDS: Record<Scored, readonly string[]> = {
  BUILD: ["create", "build", "add", "make", "new", "generate", "setup", "set up", "design", "construct", "implement"],
  EDIT: [
    "change",
    "modify",
    "update",
    "edit",
    "rename",
    "move",
    "delete",
    "remove",
    "adjust",
    "fix",
    "connect",
    "disconnect",
    "link",
  ],
  QUERY: [
    "what",
    "how",
    "why",
    "which",
    "where",
    "when",
    "who",
    "show",
    "list",
    "display",
    "explain",
    "describe",
    "tell me",
  ],
  EXPORT: ["export", "download", "bundle", "save as", "generate file", "get json", "get yaml"],
  CONFIGURE: [
    "set",
    "configure",
    "config",
    "configuration",
    "setting",
    "settings",
    "preference",
    "preferences",
    "option",
    "options",
    "default",
    "defaults",
    "confirmation",
    "model",
    "deploy",
    "undeploy",
    "redeploy",
    "enable",
    "disable",
  ],
};

/** Order of the scored intents when nothing else separates a tie (see `keywordIntent`). */
const TIE_ORDER: readonly Scored[] = ["EDIT", "CONFIGURE", "EXPORT", "BUILD", "QUERY"];

const PHRASES: Array<{ intent: Scored; keyword: string; words: string[] }> = (
  Object.keys(KEYWORDS) as Scored[]
).flatMap((intent) => KEYWORDS[intent].map((keyword) => ({ intent, keyword, words: keyword.split(" ") })));

export interface KeywordMatch {
  intent: Scored;
  keyword: string;
  /** Word index of the first occurrence ("?" counts as after the last word). */
  at: number;
}

/** Every distinct keyword of the message, with where it first appears. */
export function keywordMatches(text: string): KeywordMatch[] {
  const msg = words(String(text ?? ""));
  const out: KeywordMatch[] = [];
  for (const p of PHRASES) {
    for (let i = 0; i + p.words.length <= msg.length; i++) {
      if (!p.words.every((w, j) => msg[i + j] === w)) continue;
      if (p.keyword === "set" && msg[i + 1] === "up") continue; // "set up" is BUILD's phrase
      out.push({ intent: p.intent, keyword: p.keyword, at: i });
      break;
    }
  }
  if (/\?\s*$/.test(String(text ?? ""))) out.push({ intent: "QUERY", keyword: "?", at: msg.length });
  return out;
}

/**
 * The intent by keywords alone (no model; no knowledge of the canvases). Score = the number of
 * distinct keywords of an intent in the message; the highest score wins. Ties, in this order:
 *  1. EDIT and CONFIGURE tied → CONFIGURE: a setting word says what the change verb changes
 *     ("change the tone default", "update the settings").
 *  2. BUILD and EDIT tied and BUILD's only keyword is "add" → EDIT: "add" usually adds to what
 *     exists ("add a reviewer and connect it to the writer").
 *  3. Otherwise the intent whose first keyword comes first in the message wins — people lead with
 *     what they want: "make a system to update my blog" is BUILD, "delete the writer and make a new
 *     one" is EDIT, and a trailing "?" (placed after the last word) never outranks a verb
 *     ("can you delete the writer node?" is EDIT).
 *  4. (Two keywords cannot share a position, so this is only a guard) TIE_ORDER: EDIT, CONFIGURE,
 *     EXPORT, BUILD, QUERY.
 * Purely lexical: "add a step to X" stays BUILD here; a caller that knows X is an existing canvas
 * may treat it as EDIT. Confidence: min(0.6 + 0.1·score, 0.9); no keyword → UNKNOWN 0.3.
 */
export function keywordIntent(text: string): IntentVerdict {
  const matches = keywordMatches(text);
  if (matches.length === 0) return { intent: "UNKNOWN", confidence: 0.3, source: "keywords" };
  const score = new Map<Scored, number>();
  const first = new Map<Scored, number>();
  for (const m of matches) {
    score.set(m.intent, (score.get(m.intent) ?? 0) + 1);
    first.set(m.intent, Math.min(first.get(m.intent) ?? Infinity, m.at));
  }
  const best = Math.max(...score.values());
  let tied = TIE_ORDER.filter((i) => score.get(i) === best);
  if (tied.includes("EDIT") && tied.includes("CONFIGURE")) tied = tied.filter((i) => i !== "EDIT");
  const buildOnlyAdd = matches.filter((m) => m.intent === "BUILD").every((m) => m.keyword === "add");
  if (tied.includes("BUILD") && tied.includes("EDIT") && buildOnlyAdd) tied = tied.filter((i) => i !== "BUILD");
  // Stable sort: equal positions keep TIE_ORDER.
  tied.sort((a, b) => first.get(a)! - first.get(b)!);
  const intent = tied[0]!;
  return { intent, confidence: Math.min(Math.round((0.6 + 0.1 * best) * 10) / 10, 0.9), source: "keywords" };
}
