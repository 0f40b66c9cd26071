/**
 * A system's inputs as the router sees them: which fields it declares, whether its schema is
 * usable, and which of the values gathered from chat are valid. Everything here is pure (no I/O).
 *
 * - `checkInputs` is the only judge of whether an input is present and valid. Whatever a model or a
 *   person claims, a value counts only when it validates against the field's own schema.
 * - Values from chat arrive as text, so strings are coerced where the field's type asks for it
 *   ("800" becomes 800 for an integer, "yes" becomes true for a boolean) and enum values are
 *   matched without regard to case or surrounding spaces ("Casual" becomes "casual").
 *   A value that is already valid as given is kept as given (a field typed `["string","integer"]`
 *   keeps "800" as text).
 * - "", whitespace, null and undefined count as "not given".
 *
 * Validation uses ajv with `strict: false`: the schemas come from people and from MCP tools, which
 * carry annotations ajv does not know (`x-…`, `examples`, UI hints) and custom formats; those are
 * ignored rather than rejected. Misused known keywords (`type: "strng"`, a `required` that is not a
 * list) are still reported by `schemaProblem`. The dialect follows `$schema`: 2020-12 and 2019-09
 * use ajv's matching class; anything else (none, draft-07, older drafts) is validated as draft-07.
 * Each schema object is compiled once (validators are cached in a WeakMap keyed by the object).
 */
import { createHash } from "node:crypto";
import { Ajv, type ErrorObject, type Options, type ValidateFunction } from "ajv";
import { Ajv2019 } from "ajv/dist/2019.js";
import { Ajv2020 } from "ajv/dist/2020.js";
import addFormatsModule from "ajv-formats";
import { describe, errorWords, pointerEscape, pointerUnescape, where } from "./input-errors.js";
import type { InputSchema } from "../../wire/runs.js";

// ajv-formats is CommonJS with `exports.default`: under NodeNext the default import is the module
// object (typed) and, at run time, the plugin function that also carries `.default`.
const addFormats = addFormatsModule.default;

/** One declared input, for prompts and for the router's questions. */
export interface FieldInfo {
  name: string;
  /** The JSON type(s), joined with "|" when several ("string|null"); "string" when not stated. */
  type: string;
  /** Allowed values, when the field has a fixed set. */
  enum?: unknown[];
  description?: string;
  required: boolean;
}

export interface InputCheck {
  /** Valid values of declared fields only, in declared order, coerced to their types. */
  values: Record<string, unknown>;
  /** Required fields with no valid value (a required field given an invalid value is also here). */
  missing: FieldInfo[];
  /** Values given but not valid; they are not in `values`. */
  invalid: Array<{ field: FieldInfo; value: unknown; problem: string }>;
  /**
   * Whether the system can run with `values`: nothing missing, nothing invalid, and `values`
   * validates against the whole schema.
   */
  complete: boolean;
  /**
   * What the whole schema rejects that no single field explains (e.g. "must have one of a, b"
   * from an `anyOf` of `required`), in plain words. Empty when there is nothing of the kind.
   */
  problems: string[];
}

const JSON_TYPES = new Set(["string", "number", "integer", "boolean", "array", "object", "null"]);

type Schema = Record<string, unknown>;

const isObject = (v: unknown): v is Schema => typeof v === "object" && v !== null && !Array.isArray(v);

/** `obj[key] = value` that stays a plain own property even for keys such as `__proto__`. */
export function put(obj: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(obj, key, { value, enumerable: true, writable: true, configurable: true });
}

/** "", whitespace-only text, null and undefined: not given. */
export function isGiven(v: unknown): boolean {
  return v !== undefined && v !== null && !(typeof v === "string" && v.trim() === "");
}

function propertiesOf(schema: InputSchema | Schema): Record<string, Schema> {
  const props = (schema as Schema).properties;
  if (!isObject(props)) return {};
  const out: Record<string, Schema> = {};
  for (const [k, v] of Object.entries(props)) out[k] = isObject(v) ? v : {};
  return out;
}

function requiredOf(schema: InputSchema | Schema): Set<string> {
  const r = (schema as Schema).required;
  return new Set(Array.isArray(r) ? r.filter((x): x is string => typeof x === "string") : []);
}

/**
 * A property schema with a local `$ref` ("#/$defs/Tone", "#/definitions/…", "#/properties/…")
 * followed, its own keywords on top. Only for reading types and allowed values: ajv validates the
 * real thing.
 */
function deref(p: Schema, root: Schema, depth = 0): Schema {
  if (typeof p.$ref !== "string" || !p.$ref.startsWith("#/") || depth > 16) return p;
  let target: unknown = root;
  for (const seg of p.$ref.slice(2).split("/")) {
    if (!isObject(target)) return p;
    let key = seg;
    try {
      key = decodeURIComponent(seg);
    } catch {
      /* a stray % is kept as written */
    }
    target = target[pointerUnescape(key)];
  }
  if (!isObject(target)) return p;
  const { $ref: _ref, ...own } = p;
  return { ...deref(target, root, depth + 1), ...own };
}

/** The member schemas of `anyOf`/`oneOf`, when the property is a union. */
function unionMembers(p: Schema, root: Schema): Schema[] {
  const list = Array.isArray(p.anyOf) ? p.anyOf : Array.isArray(p.oneOf) ? p.oneOf : [];
  return list.filter(isObject).map((m) => deref(m, root));
}

/** The JSON types a property accepts, as far as its own keywords say ([] when unknown). */
function typesOf(p: Schema, root: Schema): string[] {
  if (typeof p.type === "string") return [p.type];
  if (Array.isArray(p.type)) return p.type.filter((t): t is string => typeof t === "string");
  return [...new Set(unionMembers(p, root).flatMap((m) => typesOf(m, root)))];
}

/** The fixed set of allowed values of a property (its enum, its const, a union of consts, or its items' enum). */
function allowedOf(p: Schema, root: Schema): unknown[] | undefined {
  if (Array.isArray(p.enum)) return p.enum;
  if ("const" in p) return [p.const];
  const members = unionMembers(p, root);
  if (members.length > 0) {
    const out: unknown[] = [];
    for (const m of members) {
      if (Array.isArray(m.enum)) out.push(...m.enum);
      else if ("const" in m) out.push(m.const);
      else if (!(m.type === "null")) return undefined; // an open member: no fixed set
    }
    return out.length > 0 ? out : undefined;
  }
  const items = isObject(p.items) ? deref(p.items, root) : undefined;
  if (items && Array.isArray(items.enum)) return items.enum;
  return undefined;
}

/** The declared inputs, in declared order. */
export function fieldsOf(schema: InputSchema): FieldInfo[] {
  const required = requiredOf(schema);
  return Object.entries(propertiesOf(schema)).map(([name, p]) =>
    fieldInfo(name, deref(p, schema), required.has(name), schema),
  );
}

function fieldInfo(name: string, p: Schema, required: boolean, root: Schema): FieldInfo {
  const types = typesOf(p, root);
  const info: FieldInfo = { name, type: types.length > 0 ? types.join("|") : "string", required };
  const allowed = allowedOf(p, root);
  if (allowed) info.enum = allowed;
  const description = [p.description, p.title].find((d): d is string => typeof d === "string" && d.trim() !== "");
  if (description !== undefined) info.description = description.trim();
  return info;
}

// ---------------------------------------------------------------------------------------------
// ajv instances and compiled validators

const AJV_OPTIONS: Options = { strict: false, allErrors: true, logger: false };

type Dialect = "draft-07" | "2019-09" | "2020-12";
type AjvLike = Ajv | Ajv2019 | Ajv2020;

function dialectOf(schema: Schema): Dialect {
  const s = typeof schema.$schema === "string" ? schema.$schema : "";
  if (s.includes("2020-12")) return "2020-12";
  if (s.includes("2019-09")) return "2019-09";
  return "draft-07";
}

function newAjv(dialect: Dialect): AjvLike {
  const ajv =
    dialect === "2020-12"
      ? new Ajv2020(AJV_OPTIONS)
      : dialect === "2019-09"
        ? new Ajv2019(AJV_OPTIONS)
        : new Ajv(AJV_OPTIONS);
  addFormats(ajv);
  return ajv;
}

// One shared instance per dialect (an instance costs ~30 ms to build). A schema that declares an
// `$id` anywhere gets an instance of its own, so two schemas with the same `$id` cannot collide.
const shared = new Map<Dialect, AjvLike>();
function sharedAjv(dialect: Dialect): AjvLike {
  if (!shared.has(dialect)) shared.set(dialect, newAjv(dialect));
  return shared.get(dialect)!;
}

function hasId(v: unknown, depth = 0): boolean {
  if (depth > 64) return true; // absurdly deep: isolate it
  if (Array.isArray(v)) return v.some((x) => hasId(x, depth + 1));
  if (!isObject(v)) return false;
  if (typeof v.$id === "string") return true;
  return Object.values(v).some((x) => hasId(x, depth + 1));
}

/** The schema as given to ajv: draft-07 rules for anything that is not 2019-09 / 2020-12 (its `$schema` dropped). */
function forAjv(schema: Schema, dialect: Dialect): Schema {
  if (dialect !== "draft-07" || schema.$schema === undefined) return schema;
  const { $schema: _drop, ...rest } = schema;
  return rest;
}

interface Compiled {
  /** The whole schema. */
  whole: ValidateFunction;
  /**
   * The properties only (no `required`, no root combinators): validating `{[name]: value}` checks
   * one value against its own property schema, with `$ref`s into `$defs`/`definitions`/sibling
   * properties still resolving.
   */
  loose: ValidateFunction;
}

const compiledCache = new WeakMap<object, Compiled>();

function compile(schema: InputSchema): Compiled {
  const hit = compiledCache.get(schema);
  if (hit) return hit;
  const dialect = dialectOf(schema);
  const ajv = hasId(schema) ? newAjv(dialect) : sharedAjv(dialect);
  const root = forAjv(schema, dialect);
  const whole = ajv.compile(root);
  const loose: Schema = { type: "object", properties: propertiesOf(schema) };
  if (dialect !== "draft-07") loose.$schema = schema.$schema;
  for (const k of ["$defs", "definitions"]) if (schema[k] !== undefined) loose[k] = schema[k];
  const compiled: Compiled = { whole, loose: ajv.compile(loose) };
  compiledCache.set(schema, compiled);
  return compiled;
}

/**
 * Why a value cannot serve as a system's input schema, or undefined when it can: it must be a JSON
 * Schema of an object (`type: "object"`, or no `type`), its `properties` schemas, its `required`
 * a list of declared property names, and ajv must accept and compile it.
 */
export function schemaProblem(schema: unknown): string | undefined {
  if (!isObject(schema))
    return `the input schema must be a JSON Schema object, got ${schema === null ? "null" : Array.isArray(schema) ? "a list" : typeof schema}`;
  if (schema.type !== undefined && schema.type !== "object")
    return `the input schema must describe an object (type: object), not type ${JSON.stringify(schema.type)}`;
  const props = schema.properties;
  if (props !== undefined && !isObject(props)) return "properties must be a mapping of input names to schemas";
  for (const [name, p] of Object.entries(props ?? {})) {
    if (!isObject(p))
      return `properties.${name} must be a schema (a mapping such as {type: string}), got ${JSON.stringify(p)}`;
    for (const t of Array.isArray(p.type) ? p.type : p.type === undefined ? [] : [p.type]) {
      if (typeof t !== "string" || !JSON_TYPES.has(t))
        return `properties.${name}.type: unknown type ${JSON.stringify(t)} (use string, number, integer, boolean, array, object or null)`;
    }
    if (p.enum !== undefined && (!Array.isArray(p.enum) || p.enum.length === 0))
      return `properties.${name}.enum must be a non-empty list of allowed values`;
  }
  const req = schema.required;
  if (req !== undefined) {
    if (!Array.isArray(req) || req.some((r) => typeof r !== "string")) return "required must be a list of input names";
    const declared = new Set(Object.keys(props ?? {}));
    const unknown = (req as string[]).filter((r) => !declared.has(r));
    if (unknown.length > 0)
      return `required names ${unknown.map((u) => JSON.stringify(u)).join(", ")}, not in properties (declared: ${[...declared].join(", ") || "none"})`;
  }
  const dialect = dialectOf(schema);
  const isolated = hasId(schema);
  const ajv = isolated ? newAjv(dialect) : sharedAjv(dialect);
  const root = forAjv(schema, dialect);
  try {
    if (!ajv.validateSchema(root))
      return `not a valid JSON Schema: ${ajv.errorsText(ajv.errors, { dataVar: "inputs" })}`;
    // A throw-away compile (removed again so start-up checks do not pile up in the shared instance).
    ajv.compile(root);
    if (!isolated) ajv.removeSchema(root);
  } catch (err) {
    if (!isolated) ajv.removeSchema(root);
    return `the input schema does not compile: ${(err as Error).message}`;
  }
  return undefined;
}

// ---------------------------------------------------------------------------------------------
// coercion

const NUMERIC = /^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:e[+-]?\d+)?$/i;
const TRUE_WORDS = new Set(["true", "yes", "y", "on", "1"]);
const FALSE_WORDS = new Set(["false", "no", "n", "off", "0"]);

const matchKey = (v: unknown): string | undefined =>
  typeof v === "string"
    ? v.normalize("NFKC").trim().toLowerCase()
    : typeof v === "number" || typeof v === "boolean"
      ? String(v)
      : undefined;

/** Best-effort conversions of `v` to what `p` asks for, most likely first (not validated). */
function coercions(v: unknown, p: Schema, root: Schema): unknown[] {
  const out: unknown[] = [];
  const allowed = allowedOf(p, root);
  const types = typesOf(p, root);
  if (allowed && !types.includes("array")) {
    const key = matchKey(v);
    if (key !== undefined) {
      const hit = allowed.find((a) => matchKey(a) === key);
      if (hit !== undefined) out.push(hit);
    }
  }
  if (typeof v === "string") {
    const t = v.trim();
    if (t !== v) out.push(t);
    for (const type of types) {
      if ((type === "integer" || type === "number") && NUMERIC.test(t)) out.push(Number(t));
      else if (type === "boolean") {
        const k = t.toLowerCase();
        if (TRUE_WORDS.has(k)) out.push(true);
        else if (FALSE_WORDS.has(k)) out.push(false);
      } else if (type === "array") {
        out.push(toList(t, p, root));
      } else if (type === "object" && t.startsWith("{")) {
        try {
          out.push(JSON.parse(t));
        } catch {
          /* not JSON: left to validation */
        }
      }
    }
  } else if (typeof v === "number" || typeof v === "boolean") {
    if (types.includes("string")) out.push(String(v));
    if (types.includes("array")) out.push([coerceItem(v, p.items, root)]);
  } else if (Array.isArray(v) && types.includes("array") && isObject(p.items)) {
    out.push(v.map((x) => coerceItem(x, p.items, root)));
  }
  return out;
}

/** A list written as text: a JSON array, or comma-separated items. */
function toList(t: string, p: Schema, root: Schema): unknown[] {
  let items: unknown[] | undefined;
  if (t.startsWith("[")) {
    try {
      const parsed: unknown = JSON.parse(t);
      if (Array.isArray(parsed)) items = parsed;
    } catch {
      /* fall through to commas */
    }
  }
  items ??= t
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "");
  return items.map((x) => coerceItem(x, p.items, root));
}

/** One list item converted to the items schema's type or enum, without validation (the list is validated whole). */
function coerceItem(x: unknown, items: unknown, root: Schema): unknown {
  if (!isObject(items)) return x;
  const [first] = coercions(x, deref(items, root), root).filter((c) => typeof c !== "string" || c !== x);
  return first === undefined ? x : first;
}

// ---------------------------------------------------------------------------------------------
// checking

/**
 * Which declared inputs have valid values, which required ones are missing, which given values are
 * invalid (with a short reason), and whether the whole set may run. Unknown keys are dropped.
 */
export function checkInputs(schema: InputSchema, candidate: Record<string, unknown>): InputCheck {
  const { whole, loose } = compile(schema);
  const required = requiredOf(schema);
  const values: Record<string, unknown> = {};
  const missing: FieldInfo[] = [];
  const invalid: InputCheck["invalid"] = [];
  const source: Record<string, unknown> = isObject(candidate) ? candidate : {};

  for (const [name, own] of Object.entries(propertiesOf(schema))) {
    const p = deref(own, schema);
    const field = fieldInfo(name, p, required.has(name), schema);
    const given = Object.hasOwn(source, name) ? source[name] : undefined;
    if (!isGiven(given)) {
      // JSON Schema's `default`: the value used when none is given (never asked for).
      if (p && typeof p === "object" && "default" in p) put(values, name, (p as { default: unknown }).default);
      else if (field.required) missing.push(field);
      continue;
    }
    let accepted = false;
    let lastErrors: ErrorObject[] = [];
    for (const attempt of [given, ...coercions(given, p, schema)]) {
      if (loose({ [name]: attempt })) {
        put(values, name, attempt);
        accepted = true;
        break;
      }
      lastErrors = [...(loose.errors ?? [])];
    }
    if (!accepted) {
      invalid.push({ field, value: given, problem: describe(lastErrors, `/${pointerEscape(name)}`) });
      if (field.required) missing.push(field);
    }
  }

  // The whole schema may ask for more than its properties say (if/then, dependentRequired, anyOf…).
  const problems: string[] = [];
  const wholeValid = whole(values);
  if (!wholeValid) {
    const fields = fieldsOf(schema);
    const alternatives: string[] = [];
    for (const e of whole.errors ?? []) {
      const params = e.params as { missingProperty?: unknown };
      const inChoice = /\/(anyOf|oneOf)\//.test(e.schemaPath);
      if (
        ["required", "dependencies", "dependentRequired"].includes(e.keyword) &&
        e.instancePath === "" &&
        typeof params.missingProperty === "string"
      ) {
        const named = fields.find((f) => f.name === params.missingProperty);
        if (named && !Object.hasOwn(values, named.name)) {
          // One of several would do: say so rather than asking for all of them.
          if (inChoice) {
            if (!alternatives.includes(named.name)) alternatives.push(named.name);
          } else if (!missing.some((m) => m.name === named.name)) {
            missing.push({ ...named, required: true });
          }
          continue;
        }
      }
      if (inChoice || ["anyOf", "oneOf", "allOf", "if", "then", "else"].includes(e.keyword)) continue;
      const path = e.instancePath.split("/").filter(Boolean);
      const text = path.length > 0 ? `${where(path)} ${errorWords(e)}` : errorWords(e);
      if (!problems.includes(text)) problems.push(text);
    }
    if (alternatives.length > 0)
      problems.push(alternatives.length === 1 ? `needs ${alternatives[0]}` : `needs one of ${alternatives.join(", ")}`);
    if (problems.length === 0 && missing.length === 0 && invalid.length === 0)
      problems.push("the inputs do not fit the system's input schema together");
  }
  return { values, missing, invalid, complete: missing.length === 0 && invalid.length === 0 && wholeValid, problems };
}

/** An incomplete check in words (`missing topic (string); tone must be one of …`), and the first input it names. */
export function incompleteText(check: InputCheck): { text: string; input?: string } {
  const parts = [
    ...check.missing.map((f) => `missing ${f.name} (${f.type}${f.enum ? `: ${f.enum.join(", ")}` : ""})`),
    ...check.invalid.map((i) => `${i.field.name} ${i.problem}`),
    ...check.problems,
  ];
  return {
    text: parts.join("; ") || "they do not match the schema",
    input: check.missing[0]?.name ?? check.invalid[0]?.field.name,
  };
}

/** Earlier values updated with later ones; "", whitespace and null in `next` do not erase earlier values. */
export function mergeInputs(previous: Record<string, unknown>, next: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...previous };
  for (const [k, v] of Object.entries(next ?? {})) if (isGiven(v)) put(out, k, v);
  return out;
}

/** JSON with object keys sorted at every level (undefined members dropped, as JSON.stringify does). */
export function canonicalJson(v: unknown): string {
  return JSON.stringify(sortKeys(v, 0)) ?? "null";
}

function sortKeys(v: unknown, depth: number): unknown {
  if (depth > 100) throw new Error("value nested too deeply to hash");
  if (typeof v === "bigint") return v.toString();
  if (v === null || typeof v !== "object") return v;
  const withJson = v as { toJSON?: () => unknown };
  if (typeof withJson.toJSON === "function") return sortKeys(withJson.toJSON(), depth + 1);
  if (Array.isArray(v)) return v.map((x) => sortKeys(x, depth + 1));
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(v).sort()) put(out, k, sortKeys((v as Record<string, unknown>)[k], depth + 1));
  return out;
}

/** A short stable fingerprint of "this system with these inputs": sha256 hex, first 16 characters. */
export function inputsHash(systemId: string, values: Record<string, unknown>): string {
  return createHash("sha256")
    .update(canonicalJson({ system: systemId, inputs: values }))
    .digest("hex")
    .slice(0, 16);
}
