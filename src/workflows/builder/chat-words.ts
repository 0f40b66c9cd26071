/**
 * The words of a builder chat, read without a model: the plain commands ("undo", "deploy x", …),
 * the shape of a system id, whether a message names an id or a name on word boundaries, and a
 * readable id for a new system made from a request's own words (`researches-topic-writes`).
 */

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

/** Plain commands understood without a model. */
export const COMMAND =
  /^\s*\/?(undo|pause|resume|deploy|undeploy|status)\b(?:\s+`?([a-z0-9][a-z0-9_-]{0,63})`?)?\s*[.!]?\s*$/i;

/** Whether `word` stands in `text` on its own (ids may hold `-` and `_`, so those do not end a word). */
export function wordIn(text: string, word: string): boolean {
  const esc = word.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  return new RegExp(`(^|[^a-z0-9_-])${esc}($|[^a-z0-9_-])`).test(text);
}

/** A readable id for a new system from the request's words (`researches-topic-writes`), not `taken`. */
export function freshSystemId(text: string, taken: (id: string) => boolean): string {
  const words = (text.toLowerCase().match(/[a-z0-9]+/g) ?? []).filter((w) => !STOP.has(w) && w.length > 1).slice(0, 3);
  const base = (words.join("-") || "system").slice(0, 48);
  let id = base;
  for (let n = 2; taken(id) && n < 1000; n++) id = `${base}-${n}`;
  return id;
}
