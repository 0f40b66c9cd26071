/**
 * The one template language, of a system's settings and of a build plan's params:
 *   `${inputs.x}`             a run input
 *   `${steps.a.output}`       a step's output (text as is, anything else as JSON)
 *   `${steps.a.output.f.g}`   a field of a step's JSON output
 *   `${run.id}`               the run's id
 *   `${secrets.NAME}`         a secret (src/core/secrets/): allowed only where the library says
 *                             (webhook headers and body fields, command and MCP server settings)
 *   `$${`                     a literal `${`
 * A string that is exactly one reference keeps the value's type where types matter (JSON bodies,
 * MCP arguments: `renderValue`); everywhere else the value is text (`renderString`), passed through
 * `encode` when given (URL path and query: encodeURIComponent). A system's references are checked
 * at load (`refsIn`), so an unknown one at run time is a bug in the caller, reported as `TemplateError`.
 *
 * A build plan carries the templates of the system it builds (a node's prompt `${inputs.topic}`,
 * `${steps.research.output}`), so a build resolves only its own: `renderOwnSteps` replaces, in one
 * pass, `${steps.ID.output…}` where ID is a step of the build plan, and `$${` by `${`; everything
 * else is left as written for the system (its references, a shell's `${HOME}`, an unclosed `${`).
 * When a plan step has the id of a node, a reference to it in a node's properties could mean either:
 * src/workflows/builder/plan-check.ts refuses it (rename the plan step, or write `$${` to leave it to
 * the system).
 */

import { SECRET_NAME } from "../../core/secrets/store.js";

export type Ref =
  | { kind: "input"; name: string }
  | { kind: "step"; step: string; path: string[] }
  | { kind: "run"; field: "id" }
  | { kind: "secret"; name: string };

export type Part = { text: string } | { ref: Ref; source: string };

export interface Scope {
  inputs: Record<string, unknown>;
  steps?: Record<string, { output: unknown }>;
  runId?: string;
  /** A secret's value by name (a test run gives `[secret NAME]`); without it `${secrets.X}` is an error. */
  secret?: (name: string) => string | undefined;
}

export class TemplateError extends Error {}

/** An input name or a step id (step ids may start with a digit: schema.ts `id`). */
const NAME = /^[A-Za-z0-9_][A-Za-z0-9_-]*$/;

function parseRef(expr: string): Ref {
  const parts = expr.trim().split(".");
  if (parts[0] === "inputs" && parts.length === 2 && NAME.test(parts[1]!)) return { kind: "input", name: parts[1]! };
  if (
    parts[0] === "steps" &&
    parts.length >= 3 &&
    parts[2] === "output" &&
    NAME.test(parts[1]!) &&
    parts.slice(3).every((p) => p.length > 0)
  ) {
    return { kind: "step", step: parts[1]!, path: parts.slice(3) };
  }
  if (parts[0] === "run" && parts.length === 2 && parts[1] === "id") return { kind: "run", field: "id" };
  if (parts[0] === "secrets" && parts.length === 2 && SECRET_NAME.test(parts[1]!))
    return { kind: "secret", name: parts[1]! };
  throw new TemplateError(
    `\${${expr}} is not a reference: use \${inputs.NAME}, \${steps.ID.output}, \${steps.ID.output.FIELD}, \${run.id} or \${secrets.NAME} (write $\${ for a literal \${)`,
  );
}

/**
 * Split a string into text and references. Throws `TemplateError` for a malformed one, unless
 * `lenient` (a build plan's strings: then it is text, as written).
 */
export function parseTemplate(s: string, lenient = false): Part[] {
  const out: Part[] = [];
  let text = "";
  let i = 0;
  while (i < s.length) {
    if (s.startsWith("$${", i)) {
      text += "${";
      i += 3;
      continue;
    }
    if (s.startsWith("${", i)) {
      const end = s.indexOf("}", i + 2);
      if (end < 0 && lenient) {
        text += "${";
        i += 2;
        continue;
      }
      if (end < 0) throw new TemplateError(`unclosed \${ in "${s}"`);
      const source = s.slice(i, end + 1);
      i = end + 1;
      let ref: Ref;
      try {
        ref = parseRef(source.slice(2, -1));
      } catch (err) {
        if (!lenient) throw err;
        text += source;
        continue;
      }
      if (text) out.push({ text });
      text = "";
      out.push({ ref, source });
      continue;
    }
    text += s[i];
    i++;
  }
  if (text) out.push({ text });
  return out;
}

/** Every reference in a value (strings anywhere inside objects and arrays, keys excluded). */
export function refsIn(value: unknown, lenient = false): Ref[] {
  if (typeof value === "string") return parseTemplate(value, lenient).flatMap((p) => ("ref" in p ? [p.ref] : []));
  if (Array.isArray(value)) return value.flatMap((v) => refsIn(v, lenient));
  if (value && typeof value === "object") return Object.values(value).flatMap((v) => refsIn(v, lenient));
  return [];
}

/** Text of a value: strings as they are, other values as JSON (undefined/null as ""). */
export function asText(v: unknown): string {
  if (v === undefined || v === null) return "";
  if (typeof v === "string") return v;
  if (typeof v === "number" || typeof v === "boolean") return String(v);
  return JSON.stringify(v);
}

function lookup(ref: Ref, scope: Scope): unknown {
  switch (ref.kind) {
    case "input":
      return scope.inputs[ref.name];
    case "secret": {
      const v = scope.secret?.(ref.name);
      if (v === undefined)
        throw new TemplateError(`secret ${ref.name} is not ${scope.secret ? "set" : "available here"}`);
      return v;
    }
    case "run":
      if (scope.runId === undefined) throw new TemplateError("${run.id} is not known here");
      return scope.runId;
    case "step": {
      const step = scope.steps && Object.hasOwn(scope.steps, ref.step) ? scope.steps[ref.step] : undefined;
      if (!step) throw new TemplateError(`step "${ref.step}" has no output yet`);
      let v: unknown = step.output;
      for (const key of ref.path) {
        if (typeof v === "string") {
          try {
            v = JSON.parse(v);
          } catch {
            throw new TemplateError(`step "${ref.step}" output is text, not JSON with a field "${key}"`);
          }
        }
        if (v === null || typeof v !== "object" || !Object.hasOwn(v, key)) {
          throw new TemplateError(`step "${ref.step}" output has no field "${ref.path.join(".")}"`);
        }
        v = (v as Record<string, unknown>)[key];
      }
      return v;
    }
  }
}

/** The parts as text: each reference `take` accepts becomes its value's text (through `encode`), others stay as written. */
function textOf(parts: Part[], scope: Scope, encode?: (text: string) => string, take?: (ref: Ref) => boolean): string {
  let out = "";
  for (const p of parts) {
    if ("text" in p) out += p.text;
    else if (take && !take(p.ref)) out += p.source;
    else {
      const t = asText(lookup(p.ref, scope));
      out += encode ? encode(t) : t;
    }
  }
  return out;
}

/** Substitute into a string; each value becomes text, passed through `encode` when given. */
export function renderString(s: string, scope: Scope, encode?: (text: string) => string): string {
  return textOf(parseTemplate(s), scope, encode);
}

function renderDeep(value: unknown, scope: Scope, lenient: boolean, take?: (ref: Ref) => boolean): unknown {
  if (typeof value === "string") {
    const parts = parseTemplate(value, lenient);
    const only = parts.length === 1 ? parts[0]! : undefined;
    if (only && "ref" in only && (!take || take(only.ref))) return lookup(only.ref, scope);
    return textOf(parts, scope, undefined, take);
  }
  if (Array.isArray(value)) return value.map((v) => renderDeep(v, scope, lenient, take));
  if (value && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, renderDeep(v, scope, lenient, take)]));
  }
  return value;
}

/** Substitute deep inside a value; a string that is exactly one reference takes the value itself. */
export function renderValue(value: unknown, scope: Scope): unknown {
  return renderDeep(value, scope, false);
}

/**
 * A build plan's params with its own steps' results in, in one pass (a deep copy): `${steps.ID.output…}`
 * where ID is one of `own` (the plan's step ids) → `outputs[ID]`, `$${` → `${`, everything else as
 * written (see the header). Throws `TemplateError` when such a step has no output yet.
 */
export function renderOwnSteps<T>(value: T, own: readonly string[], outputs: Readonly<Record<string, unknown>>): T {
  const ids = new Set(own);
  const steps = Object.fromEntries(
    Object.entries(outputs)
      .filter(([id, output]) => ids.has(id) && output !== undefined)
      .map(([id, output]) => [id, { output }]),
  );
  return renderDeep(value, { inputs: {}, steps }, true, (r) => r.kind === "step" && ids.has(r.step)) as T;
}
