/**
 * ajv's validation errors in a person's words ("must be one of formal, casual, technical", "must
 * be an integer", "needs topic"), for the router's clarify question and the HTTP API's 400s; and
 * the JSON Pointer escaping the error paths use.
 */
import type { ErrorObject } from "ajv";

export const pointerEscape = (s: string): string => s.replace(/~/g, "~0").replace(/\//g, "~1");
export const pointerUnescape = (s: string): string => s.replace(/~1/g, "/").replace(/~0/g, "~");

const TYPE_WORDS: Record<string, string> = {
  integer: "an integer",
  number: "a number",
  boolean: "true or false",
  string: "text",
  array: "a list",
  object: "an object",
  null: "empty",
};

const FORMAT_WORDS: Record<string, string> = {
  email: "an email address",
  uri: "a full URL (https://…)",
  url: "a full URL (https://…)",
  "uri-reference": "a URL or path",
  date: "a date like 2025-01-31",
  "date-time": "a date and time like 2025-01-31T09:00:00Z",
  time: "a time like 09:30:00",
  duration: "a duration like P1D or PT30M",
  hostname: "a host name",
  ipv4: "an IPv4 address",
  ipv6: "an IPv6 address",
  uuid: "a UUID",
};

const show = (v: unknown): string => (typeof v === "string" ? v : JSON.stringify(v));
const plural = (n: unknown, word: string): string => `${String(n)} ${word}${n === 1 ? "" : "s"}`;

export function errorWords(e: ErrorObject): string {
  const p = e.params as Record<string, unknown>;
  switch (e.keyword) {
    case "type": {
      const types = String(p.type).split(",");
      return `must be ${types.map((t) => TYPE_WORDS[t] ?? t).join(" or ")}`;
    }
    case "enum":
      return `must be one of ${(Array.isArray(p.allowedValues) ? p.allowedValues : []).map(show).join(", ")}`;
    case "const":
      return `must be ${show(p.allowedValue)}`;
    case "minimum":
      return `must be at least ${String(p.limit)}`;
    case "maximum":
      return `must be at most ${String(p.limit)}`;
    case "exclusiveMinimum":
      return `must be more than ${String(p.limit)}`;
    case "exclusiveMaximum":
      return `must be less than ${String(p.limit)}`;
    case "multipleOf":
      return `must be a multiple of ${String(p.multipleOf)}`;
    case "minLength":
      return `must be at least ${plural(p.limit, "character")} long`;
    case "maxLength":
      return `must be at most ${plural(p.limit, "character")} long`;
    case "pattern":
      return `must match the pattern ${String(p.pattern)}`;
    case "format":
      return `must be ${FORMAT_WORDS[String(p.format)] ?? `a valid ${String(p.format)}`}`;
    case "minItems":
      return `must have at least ${plural(p.limit, "item")}`;
    case "maxItems":
      return `must have at most ${plural(p.limit, "item")}`;
    case "uniqueItems":
      return "must not repeat items";
    case "required":
      return `needs ${show(p.missingProperty)}`;
    case "additionalProperties":
      return `must not have ${show(p.additionalProperty)}`;
    case "not":
      return "is not allowed";
    default:
      return e.message ?? "is not valid";
  }
}

/** "item 2", "city", "item 1 → name": where inside a value an error is. */
export function where(segments: string[]): string {
  return segments.map((s) => (/^\d+$/.test(s) ? `item ${Number(s) + 1}` : pointerUnescape(s))).join(" → ");
}

/**
 * One short sentence for the errors of one value. `base` is the value's JSON pointer; errors of
 * combinators (anyOf…) give way to the errors of their branches, type errors at the same place
 * merge ("must be a number or text").
 */
export function describe(errors: ErrorObject[], base: string): string {
  const mine = errors.filter((e) => e.instancePath === base || e.instancePath.startsWith(`${base}/`));
  const specific = mine.filter((e) => !["anyOf", "oneOf", "allOf", "if", "then", "else", "$ref"].includes(e.keyword));
  const pool = specific.length > 0 ? specific : mine;
  const first = pool[0];
  if (!first) return "is not valid";
  let words: string;
  const sameTypeErrors = pool.filter((e) => e.keyword === "type" && e.instancePath === first.instancePath);
  if (first.keyword === "type" && sameTypeErrors.length > 1) {
    const types = [...new Set(sameTypeErrors.flatMap((e) => String((e.params as { type: unknown }).type).split(",")))];
    words = `must be ${types.map((t) => TYPE_WORDS[t] ?? t).join(" or ")}`;
  } else if (first.keyword === "type") {
    // A type error beside an enum/const error at the same place: the allowed values say more.
    const valueErr = pool.find(
      (e) => (e.keyword === "enum" || e.keyword === "const") && e.instancePath === first.instancePath,
    );
    words = errorWords(valueErr ?? first);
  } else {
    words = errorWords(first);
  }
  const rest = first.instancePath.slice(base.length).split("/").filter(Boolean);
  return rest.length > 0 ? `${words} (at ${where(rest)})` : words;
}
