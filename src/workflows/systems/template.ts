/**
 * `${…}` substitution in a system's settings:
 *   `${inputs.x}`             a run input
 *   `${steps.a.output}`       a plan step's output (text as is, anything else as JSON)
 *   `${steps.a.output.f.g}`   a field of a step's JSON output
 *   `${run.id}`               the run's id
 *   `$${`                     a literal `${`
 * A string that is exactly one reference keeps the value's type where types matter (JSON bodies,
 * MCP arguments: `renderValue`); everywhere else the value is text (`renderString`), passed through
 * `encode` when given (URL path and query: encodeURIComponent). References are checked at load
 * (`refsIn`), so an unknown one at run time is a bug in the caller, reported as `TemplateError`.
 */

export type Ref =
  | { kind: "input"; name: string }
  | { kind: "step"; step: string; path: string[] }
  | { kind: "run"; field: "id" };

export type Part = { text: string } | { ref: Ref; source: string };

export interface Scope {
  inputs: Record<string, unknown>;
  steps?: Record<string, { output: unknown }>;
  runId?: string;
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
  throw new TemplateError(
    `\${${expr}} is not a reference: use \${inputs.NAME}, \${steps.ID.output}, \${steps.ID.output.FIELD} or \${run.id} (write $\${ for a literal \${)`,
  );
}

/** Split a string into text and references. Throws `TemplateError` for a malformed one. */
export function parseTemplate(s: string): Part[] {
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
      if (end < 0) throw new TemplateError(`unclosed \${ in "${s}"`);
      if (text) out.push({ text });
      text = "";
      const expr = s.slice(i + 2, end);
      out.push({ ref: parseRef(expr), source: s.slice(i, end + 1) });
      i = end + 1;
      continue;
    }
    text += s[i];
    i++;
  }
  if (text) out.push({ text });
  return out;
}

/** Every reference in a value (strings anywhere inside objects and arrays, keys excluded). */
export function refsIn(value: unknown): Ref[] {
  if (typeof value === "string") return parseTemplate(value).flatMap((p) => ("ref" in p ? [p.ref] : []));
  if (Array.isArray(value)) return value.flatMap(refsIn);
  if (value && typeof value === "object") return Object.values(value).flatMap(refsIn);
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
    case "run":
      if (scope.runId === undefined) throw new TemplateError("${run.id} is not known here");
      return scope.runId;
    case "step": {
      const step = scope.steps?.[ref.step];
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

/** Substitute into a string; each value becomes text, passed through `encode` when given. */
export function renderString(s: string, scope: Scope, encode?: (text: string) => string): string {
  let out = "";
  for (const p of parseTemplate(s)) {
    if ("text" in p) out += p.text;
    else {
      const t = asText(lookup(p.ref, scope));
      out += encode ? encode(t) : t;
    }
  }
  return out;
}

/** Substitute deep inside a value; a string that is exactly one reference takes the value itself. */
export function renderValue(value: unknown, scope: Scope): unknown {
  if (typeof value === "string") {
    const parts = parseTemplate(value);
    if (parts.length === 1 && "ref" in parts[0]!) return lookup(parts[0].ref, scope);
    return renderString(value, scope);
  }
  if (Array.isArray(value)) return value.map((v) => renderValue(v, scope));
  if (value && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, renderValue(v, scope)]));
  }
  return value;
}
