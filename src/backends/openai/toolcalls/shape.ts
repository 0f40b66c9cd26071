/**
 * What counts as a tool call once a candidate's JSON is complete.
 */
import { parseJsonLenient } from "./json.js";

/** A recognised call before it gets an id. */
export interface RawCall {
  name: string;
  args: Record<string, unknown>;
}

const TOP_KEYS: ReadonlySet<string> = new Set(["name", "arguments", "parameters", "type", "id"]);
const WRAP_KEYS: ReadonlySet<string> = new Set(["function", "function_call", "type", "id"]);
const FN_KEYS: ReadonlySet<string> = new Set(["name", "arguments", "parameters"]);
const SCHEMA_KEYS: ReadonlySet<string> = new Set([
  "type",
  "properties",
  "required",
  "additionalProperties",
  "$schema",
  "description",
  "title",
]);

export function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function onlyKeys(o: Record<string, unknown>, allowed: ReadonlySet<string>): boolean {
  for (const k of Object.keys(o)) if (!allowed.has(k)) return false;
  return true;
}

/** `arguments` as given by the model → a plain object, or null when it is not one. */
export function normalizeArgs(a: unknown): Record<string, unknown> | null {
  if (a === undefined || a === null) return {};
  if (typeof a === "string") {
    if (a.trim() === "") return {};
    const v = parseJsonLenient(a);
    return isPlainObject(v) ? v : null;
  }
  return isPlainObject(a) ? a : null;
}

/**
 * A model echoing a tool DEFINITION (`"parameters": {"type":"object","properties":{...}}`) is not
 * calling it.
 */
function looksLikeSchema(args: Record<string, unknown>): boolean {
  return args.type === "object" && isPlainObject(args.properties) && onlyKeys(args, SCHEMA_KEYS);
}

/** One call object in any accepted shape → RawCall, or null when it is not a call. */
export function normalizeCall(v: unknown, tools: ReadonlySet<string>): RawCall | null {
  if (!isPlainObject(v)) return null;
  let src: Record<string, unknown> = v;
  const wrap = "function" in v ? "function" : "function_call" in v ? "function_call" : null;
  if (wrap !== null) {
    if (!onlyKeys(v, WRAP_KEYS) || ("function" in v && "function_call" in v)) return null;
    const fn = v[wrap];
    if (!isPlainObject(fn) || !onlyKeys(fn, FN_KEYS)) return null;
    src = fn;
  } else if (!onlyKeys(v, TOP_KEYS)) {
    return null;
  }
  if (v.type !== undefined && v.type !== "function") return null;
  const name = src.name;
  if (typeof name !== "string" || !tools.has(name)) return null;
  if (src.arguments !== undefined && src.parameters !== undefined) return null;
  const args = normalizeArgs(src.arguments !== undefined ? src.arguments : src.parameters);
  if (args === null || looksLikeSchema(args)) return null;
  return { name, args };
}

/** A parsed JSON value (a call object or an array of them) → its calls; null unless ALL are calls. */
export function callsFromValue(v: unknown, tools: ReadonlySet<string>): RawCall[] | null {
  if (Array.isArray(v)) {
    if (v.length === 0) return null;
    const out: RawCall[] = [];
    for (const item of v) {
      const c = normalizeCall(item, tools);
      if (c === null) return null;
      out.push(c);
    }
    return out;
  }
  const c = normalizeCall(v, tools);
  return c === null ? null : [c];
}

/** JSON text → calls, or null. */
export function callsFromJsonText(text: string, tools: ReadonlySet<string>): RawCall[] | null {
  const v = parseJsonLenient(text);
  return v === undefined ? null : callsFromValue(v, tools);
}

/** A JSON array whose closing bracket was missing at the end of the reply → its calls, or null. */
export function callsFromClosedArray(text: string | null, tools: ReadonlySet<string>): RawCall[] | null {
  return text === null ? null : callsFromJsonText(text, tools);
}

/** JSON text of an arguments object → the object, or null. */
export function objectFromJsonText(text: string): Record<string, unknown> | null {
  const v = parseJsonLenient(text);
  return isPlainObject(v) ? v : null;
}

/**
 * A Qwen3-Coder `<parameter=k>` value: a string, unless it parses as a JSON number (safe integers
 * only, so ids and phone numbers keep their digits), boolean, object or array.
 */
export function convertParamValue(raw: string): unknown {
  const t = raw.trim();
  if (t === "true") return true;
  if (t === "false") return false;
  const c = t[0];
  if (c === "{" || c === "[") {
    const v = parseJsonLenient(t);
    if (typeof v === "object" && v !== null) return v;
    return raw;
  }
  if (c === "-" || (c !== undefined && c >= "0" && c <= "9")) {
    let v: unknown;
    try {
      v = JSON.parse(t);
    } catch {
      return raw;
    }
    if (typeof v !== "number" || !Number.isFinite(v)) return raw;
    if (/^-?\d+$/.test(t) && !Number.isSafeInteger(v)) return raw;
    return v;
  }
  return raw;
}
