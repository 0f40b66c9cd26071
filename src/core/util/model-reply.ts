/**
 * Reading what a model was asked to answer as JSON, and clipping what it is shown — shared by the
 * router's classifier and the builder's Supervisor and Architect. A reply is read tolerantly:
 * `<think>` blocks, code fences and prose around the object are skipped; every `{` starts a
 * candidate that ends at its balancing `}` (braces inside JSON strings do not count).
 */

const MAX_CANDIDATES = 200;

export const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/** A reply without `<think>…</think>` blocks, cut to `maxChars`. */
export function cleanReply(text: string, maxChars: number): string {
  return String(text ?? "")
    .replace(/<think>[\s\S]*?<\/think>/gi, " ")
    .slice(0, maxChars);
}

/**
 * The JSON objects in a text, outermost first, in order. A candidate that does not parse is
 * reported through `onError` (its JSON.parse message) and skipped.
 */
export function* jsonObjects(text: string, onError?: (message: string) => void): Generator<Record<string, unknown>> {
  let tries = 0;
  for (
    let start = text.indexOf("{");
    start !== -1 && tries < MAX_CANDIDATES;
    start = text.indexOf("{", start + 1), tries++
  ) {
    let depth = 0;
    let inString = false;
    let end = -1;
    for (let i = start; i < text.length; i++) {
      const c = text[i];
      if (inString) {
        if (c === "\\") i++;
        else if (c === '"') inString = false;
      } else if (c === '"') inString = true;
      else if (c === "{") depth++;
      else if (c === "}" && --depth === 0) {
        end = i;
        break;
      }
    }
    if (end === -1) continue;
    try {
      const parsed: unknown = JSON.parse(text.slice(start, end + 1));
      if (isObject(parsed)) yield parsed;
    } catch (err) {
      onError?.(err instanceof Error ? err.message : String(err));
    }
  }
}

/** A confidence as 0..1: a number, "0.8", "85%" or 85 (a percentage); undefined when unreadable. */
export function readConfidence(v: unknown): number | undefined {
  let n: number | undefined;
  if (typeof v === "number") n = v;
  else if (typeof v === "string") {
    const m = /^\s*([+-]?(?:\d+(?:\.\d*)?|\.\d+))\s*(%?)\s*$/.exec(v);
    if (m) n = Number(m[1]) / (m[2] ? 100 : 1);
  }
  if (n === undefined || !Number.isFinite(n)) return undefined;
  if (n > 1 && n <= 100) n /= 100; // a percentage
  return Math.min(1, Math.max(0, n));
}

export const oneLine = (s: string): string => s.replace(/\s+/g, " ").trim();

/** One line, at most `max` characters (an ellipsis when cut). */
export function clip(s: string, max: number): string {
  const t = oneLine(s);
  return t.length <= max ? t : `${t.slice(0, max - 1).trimEnd()}…`;
}

/** A long text as its head and tail, saying how much was left out between. */
export function clipMiddle(s: string, head: number, tail: number): string {
  const t = s.trim();
  if (t.length <= head + tail) return t;
  return `${t.slice(0, head)}\n[… ${t.length - head - tail} characters left out …]\n${t.slice(t.length - tail)}`;
}
