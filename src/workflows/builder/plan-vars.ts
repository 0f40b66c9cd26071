/**
 * `${name}` variables of an ExecutionPlan: a step's `output` is stored under a name, and a later
 * step that depends on it writes `${name}` in its params to use it (a node id, an edge id, a path).
 *
 * - A reference is `${name}`: a letter or `_`, then letters, digits or `_` — no dots.
 * - `$${` is an escaped literal `${`: `$${HOME}` becomes `${HOME}` and is never a reference.
 * - Anything else after `${` is not ours and is left exactly as written: dotted system templates
 *   (`${inputs.topic}`, `${steps.a.output}`, `${run.id}`, src/workflows/systems/template.ts), shell forms
 *   in file contents (`${1:-x}`), an unclosed `${`. So a plan can carry the templates of the system
 *   it builds without escaping them.
 *
 * Only strings are looked at, deep inside arrays and objects; object keys are never references.
 * Pure.
 */

/** `$${` (group 1 unset) or `${name}` (group 1 = name). Scanning left to right, `$${` wins. */
const TOKEN = /\$\$\{|\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g;

export class UndefinedVariableError extends Error {
  constructor(readonly variable: string) {
    super(`undefined variable \${${variable}}`);
    this.name = "UndefinedVariableError";
  }
}

const isPlainObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" &&
  v !== null &&
  !Array.isArray(v) &&
  (Object.getPrototypeOf(v) === Object.prototype || Object.getPrototypeOf(v) === null);

function visitStrings(value: unknown, fn: (s: string) => void): void {
  if (typeof value === "string") fn(value);
  else if (Array.isArray(value)) for (const v of value) visitStrings(v, fn);
  else if (isPlainObject(value)) for (const k of Object.keys(value)) visitStrings(value[k], fn);
}

/** The variable names one string references, in order, repeats included. */
function refsOf(s: string): string[] {
  const out: string[] = [];
  for (const m of s.matchAll(TOKEN)) if (m[1] !== undefined) out.push(m[1]);
  return out;
}

/** Every variable referenced in any string of a JSON value, unique, in order of first appearance. */
export function variablesIn(value: unknown): string[] {
  const seen = new Set<string>();
  visitStrings(value, (s) => {
    for (const name of refsOf(s)) seen.add(name);
  });
  return [...seen];
}

function substituteString(s: string, vars: Readonly<Record<string, string>>): string {
  return s.replace(TOKEN, (whole: string, name: string | undefined) => {
    if (name === undefined) return "${";
    if (!Object.hasOwn(vars, name)) throw new UndefinedVariableError(name);
    return vars[name]!;
  });
}

function substituteValue(value: unknown, vars: Readonly<Record<string, string>>): unknown {
  if (typeof value === "string") return substituteString(value, vars);
  if (Array.isArray(value)) return value.map((v) => substituteValue(v, vars));
  if (isPlainObject(value)) {
    const out: Record<string, unknown> = {};
    for (const k of Object.keys(value)) {
      // defineProperty: a "__proto__" key from JSON.parse stays an own key instead of setting the prototype.
      Object.defineProperty(out, k, {
        value: substituteValue(value[k], vars),
        enumerable: true,
        writable: true,
        configurable: true,
      });
    }
    return out;
  }
  return value;
}

/**
 * A deep copy of `value` with every `${name}` replaced by `vars[name]` and every `$${` turned into
 * `${`. Throws UndefinedVariableError for a name not in `vars`. Numbers, booleans and null are copied
 * as they are.
 */
export function substitute<T>(value: T, vars: Readonly<Record<string, string>>): T {
  return substituteValue(value, vars) as T;
}
