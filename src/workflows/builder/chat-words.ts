/**
 * The words of a builder chat, read without a model: the plain commands ("undo", "deploy x", …),
 * the shape of a system id, whether a message names an id or a name on word boundaries, a
 * readable id for a new system made from a request's own words (`researches-topic-writes`), and the
 * answer to "change the system of that name, or make a new one?".
 */

import { commandOf, wordIn } from "../router/decide.js";

/** Words left out of a new system's id. */
const STOP = new Set([
  "a",
  "an",
  "the",
  "that",
  "which",
  "who",
  "with",
  "and",
  "or",
  "of",
  "to",
  "for",
  "on",
  "in",
  "it",
  "about",
  "one",
  "another",
  "then",
  "me",
  "my",
  "i",
  "please",
  "build",
  "make",
  "create",
  "new",
  "system",
  "workflow",
  "pipeline",
  "can",
  "you",
  "would",
  "could",
  "set",
  "up",
  "design",
  "generate",
  "agent",
  "agents",
  "using",
  "by",
  "from",
  "into",
  "is",
  "be",
]);

/** Plain commands understood without a model (the router hears these and export, delete: decide.ts). */
export const COMMAND = commandOf("undo|pause|resume|deploy|undeploy|status");

export { wordIn };

/** A readable id for a new system from the request's words (`researches-topic-writes`), not `taken`. */
export function freshSystemId(text: string, taken: (id: string) => boolean): string {
  const words = (text.toLowerCase().match(/[a-z0-9]+/g) ?? []).filter((w) => !STOP.has(w) && w.length > 1).slice(0, 3);
  return uniqueId((words.join("-") || "system").slice(0, 48), taken);
}

/** `base`, or `base-2`, `base-3`… : the first that is not `taken`. */
export function uniqueId(base: string, taken: (id: string) => boolean): string {
  let id = base;
  for (let n = 2; taken(id) && n < 1000; n++) id = `${base}-${n}`;
  return id;
}

/** A short answer to "change the existing system, or make a new one?": "new", "change", or undefined when it is neither. */
export function sameNameAnswer(text: string): "new" | "change" | undefined {
  if (text.length > 60) return undefined;
  const t = text.toLowerCase();
  if (/\b(new|another|separate|second)\b/.test(t)) return "new";
  return /\b(change|update|edit|existing)\b/.test(t) ? "change" : undefined;
}
