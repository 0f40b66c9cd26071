/**
 * What a routed message asks for, in the router's terms (answer, run, cancel, status, build, ask).
 * First what code can know (`builderRule`, for a router with a builder): a builder command alone,
 * a schedule in words for the canvas in focus, or a question about the person's systems, goes to
 * the builder without a model call. Otherwise one
 * classifier call, asked again once if its reply does not parse; when the classifier still fails or
 * is down, the keyword fallback (`k=v` pairs or a lone missing input while gathering, the build
 * words, the systems' keywords). The classifier only informs: the engine checks what it acts on.
 */
import type { Logger } from "pino";
import type { DispatchInput } from "../../backends/contract/backend.js";
import type { Cancellation } from "../../core/util/cancel.js";
import { checkInputs } from "../systems/inputs.js";
import { asksForSchedule } from "../triggers/phrases.js";
import { type ModelCaller, modelText } from "../systems/step-executor.js";
import type { LoadedSystem } from "../systems/types.js";
import { classifierPrompt, parseClassifierReply, retryMessage, type ClassifierReply } from "./classifier.js";
import { fallbackMatch, parseSlash } from "./keyword-fallback.js";
import type { RouterOptions } from "./options.js";

/** Making, changing or deploying a system, in words the keyword fallback can hear. */
const BUILD_WORDS =
  /\b(?:build|create|make|design|set up|draft)\b[^.?!\n]{0,80}\b(?:system|workflow|pipeline|automation)s?\b|^\s*\/?(?:deploy|undeploy|undo)\b/i;

export interface Decision {
  /** `ask`: a question about the person's systems, runs or canvases (the builder's QUERY answers it). */
  action: "answer" | "run" | "cancel" | "status" | "build" | "ask";
  system?: LoadedSystem;
  confidence: number;
  inputs: Record<string, unknown>;
  /** `rule`: decided by code before any classifier call (`builderRule`), with confidence 1. */
  source: "classifier" | "fallback" | "rule";
}

/** A message that is only the command `words`, optionally with a system id: [, command, id]. */
export const commandOf = (words: string): RegExp =>
  new RegExp(`^\\s*\\/?(${words})\\b(?:\\s+\`?([a-z0-9][a-z0-9_-]{0,63})\`?)?\\s*[.!]?\\s*$`, "i");

/** The builder's commands, heard before any classifier call. */
const BUILDER_COMMAND = commandOf("undo|pause|resume|deploy|undeploy|status|export|delete");
/** A question: a question word first ("can you run X?" and "do X" are requests, not questions). */
const QUESTION =
  /^\s*(?:what|which|how|why|when|where|who|whose|is|are|was|were|did|does|has|have|show|list|tell me|describe|explain)\b/i;
/** Words of a question about the person's runs. */
const STATE_WORDS = /\b(?:runs|failed|failing|failures?|status|last run|latest run)\b/i;

/** Whether `word` stands in `text` on its own (ids may hold `-` and `_`, so those do not end a word). */
export function wordIn(text: string, word: string): boolean {
  const esc = word.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  return new RegExp(`(^|[^a-z0-9_-])${esc}($|[^a-z0-9_-])`).test(text);
}

/** "roll back research-blog to version 2", "revert to v2": [, system?, version]. */
const ROLLBACK =
  /^\s*(?:please\s+)?(?:roll\s*back|revert|restore)\b(?:\s+`?([a-z0-9][a-z0-9_-]{0,63})`?)?\s+to\s+(?:version\s*|v)(\d+)\b/i;
/** "what changed between version 1 and 2 of research-blog", "diff v1 v3": [, from, to]. */
const VERSION_DIFF =
  /\b(?:what\s+changed|what\s+is\s+different|diff|difference|differences|compare)\b.*?\bv(?:ersions?)?\s*(\d+)\s*(?:and|to|vs\.?|with|→|->|-|,)?\s*(?:v(?:ersion)?\s*)?(\d+)\b/i;

/** A request about a system's versions, read without a model (the builder carries it out). */
export type VersionRequest =
  | { kind: "rollback"; version: number; system?: string }
  | { kind: "diff"; from: number; to: number };

export function versionRequest(text: string): VersionRequest | undefined {
  const r = ROLLBACK.exec(text);
  if (r) return { kind: "rollback", version: Number(r[2]), ...(r[1] ? { system: r[1].toLowerCase() } : {}) };
  const d = VERSION_DIFF.exec(text);
  return d ? { kind: "diff", from: Number(d[1]), to: Number(d[2]) } : undefined;
}

/** What code knows of the conversation when it decides without a model. */
export interface RuleContext {
  /** The builder's canvas in this conversation. */
  canvas?: string;
  /** Every system, offered in chat or not. */
  systems: readonly LoadedSystem[];
  /** A system run of this conversation is live: a bare "status" is the router's own. */
  runLive: boolean;
}

/**
 * What code can know, for a router with a builder, before any classifier call: a builder command
 * alone ("deploy", "undo", "export research-blog") naming a known system or, naming none, in a
 * conversation with a canvas → `build`; a schedule in words ("run it every weekday at 8") in a
 * conversation with a canvas → `build`; so does a request about a system's versions ("roll back
 * research-blog to version 2", "what changed between version 1 and 2 of research-blog"); a question (a question word first) naming a known
 * system id or name, or asking about runs, failures, status (unless a run here is live) → `ask`.
 * Plain chat that merely holds such a word in a longer sentence is left to the classifier.
 */
export function builderRule(text: string, ctx: RuleContext): { action: "build" | "ask"; reason: string } | undefined {
  const known = (id: string) => id === ctx.canvas || ctx.systems.some((s) => s.id === id);
  const namesOne = (t: string) =>
    ctx.systems.some((s) => wordIn(t, s.id.toLowerCase()) || wordIn(t, s.name.toLowerCase()));
  // Rolling a system back, or comparing its versions: the builder's, when it names a system (or one is at hand).
  if (versionRequest(text) && (ctx.canvas || namesOne(text.toLowerCase())))
    return { action: "build", reason: "a request about a system's versions" };
  const cmd = BUILDER_COMMAND.exec(text);
  if (cmd) {
    const id = cmd[2]?.toLowerCase();
    const ownStatus = cmd[1]!.toLowerCase() === "status" && !id && ctx.runLive;
    return (id ? known(id) : Boolean(ctx.canvas)) && !ownStatus
      ? { action: "build", reason: "a builder command" }
      : undefined;
  }
  // A schedule in words for the canvas in focus ("run it every weekday at 8") is the builder's.
  if (ctx.canvas && asksForSchedule(text)) return { action: "build", reason: "a schedule for the canvas" };
  if (!QUESTION.test(text)) return undefined;
  const t = text.toLowerCase();
  const names = ctx.systems.flatMap((s) => [s.id, s.name].map((n) => n.toLowerCase()));
  if (ctx.canvas) names.push(ctx.canvas);
  return (STATE_WORDS.test(t) && !ctx.runLive) || names.some((n) => n && wordIn(t, n))
    ? { action: "ask", reason: "a question about the person's systems" }
    : undefined;
}

/** What deciding needs of its router. */
export interface DecideContext {
  /** The router's name, in log lines. */
  name: string;
  opts: RouterOptions;
  rt: { callModel: ModelCaller; log: Logger };
  /** Called once for each classifier call made. */
  counted(): void;
}

/** One classifier call (asked again once if it does not parse); the keyword fallback if it fails. */
export async function decide(
  ctx: DecideContext,
  text: string,
  input: DispatchInput,
  systems: LoadedSystem[],
  gathering?: { system: LoadedSystem; values: Record<string, unknown> },
): Promise<Decision> {
  const reply = await classify(ctx, text, input, systems, gathering);
  if (reply)
    return {
      action: reply.action,
      system: reply.system ? systems.find((s) => s.id.toLowerCase() === reply.system!.toLowerCase()) : undefined,
      confidence: reply.confidence,
      inputs: reply.inputs,
      source: "classifier",
    };
  if (gathering) {
    // Without the classifier, `k=v` pairs still supply inputs, and a lone missing input takes the message.
    const pairs = parseSlash(`/run ${gathering.system.id} ${text}`);
    const given = pairs && !("error" in pairs) && pairs.cmd === "run" ? pairs.inputs : {};
    const missing = checkInputs(gathering.system.inputs, gathering.values).missing;
    const inputs = Object.keys(given).length ? given : missing.length === 1 ? { [missing[0]!.name]: text } : undefined;
    if (inputs) return { action: "run", system: gathering.system, confidence: 1, inputs, source: "fallback" };
  }
  if (ctx.opts.builder && BUILD_WORDS.test(text))
    return { action: "build", confidence: 0.7, inputs: {}, source: "fallback" };
  const fb = fallbackMatch(text, systems);
  if (!fb) return { action: "answer", confidence: 0, inputs: {}, source: "fallback" };
  return {
    action: "run",
    system: systems.find((s) => s.id === fb.system),
    confidence: fb.confidence,
    inputs: {},
    source: "fallback",
  };
}

async function classify(
  ctx: DecideContext,
  text: string,
  input: DispatchInput,
  systems: LoadedSystem[],
  gathering?: { system: LoadedSystem; values: Record<string, unknown> },
): Promise<ClassifierReply | undefined> {
  const known = new Set(systems.map((s) => s.id));
  const prompt = classifierPrompt({
    systems,
    userText: text,
    recent: input.recent,
    gathering: gathering
      ? {
          system: gathering.system,
          collected: gathering.values,
          missing: checkInputs(gathering.system.inputs, gathering.values).missing.map((f) => f.name),
        }
      : undefined,
    builder: Boolean(ctx.opts.builder),
  });
  let user = prompt.user;
  for (let attempt = 0; attempt < 2; attempt++) {
    const out = await callText(ctx, prompt.system, user, input.turn.cancel);
    if (out === undefined) return undefined; // upstream down, timeout, cancelled: fallback
    const parsed = parseClassifierReply(out, known, { builder: Boolean(ctx.opts.builder) });
    if (!("error" in parsed)) return parsed;
    ctx.rt.log.warn({ router: ctx.name, problem: parsed.error }, "classifier reply did not parse");
    user = `${prompt.user}\n\n${retryMessage(out)}`;
  }
  return undefined;
}

async function callText(
  ctx: DecideContext,
  system: string,
  prompt: string,
  cancel: Cancellation,
): Promise<string | undefined> {
  ctx.counted();
  const r = await modelText(ctx.rt.callModel, {
    model: ctx.opts.classifier,
    prompt,
    system,
    cancel,
    timeoutSeconds: ctx.opts.classifierTimeoutSeconds,
  });
  if (r.ok) return r.text;
  ctx.rt.log.warn(
    { router: ctx.name, code: r.code, message: r.message },
    "classifier call failed; using the keyword fallback",
  );
  return undefined;
}
