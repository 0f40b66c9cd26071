/**
 * Request compatibility rules for OpenAI-compatible upstreams (vLLM, Ollama, llama.cpp, LM Studio).
 *
 * The rules are DATA: a backend has a base set (defaults below, overridden by its `compat` option),
 * and a model may override them again (`mergeCompat(base, override)`). `applyRequestCompat` turns a
 * client request into what the upstream accepts; it is pure (never mutates its input).
 *
 * The flag names follow OpenClaw's own `compat` vocabulary where one exists (supportsStore,
 * supportsDeveloperRole, supportsReasoningEffort, supportsStrictMode, maxTokensField).
 */
import { z } from "zod";

export type MaxTokensField = "max_tokens" | "max_completion_tokens";

export interface CompatRules {
  /** false: drop `store` (vLLM rejects it). */
  supportsStore: boolean;
  /** Which field carries the output limit; the other one is renamed to it. */
  maxTokensField: MaxTokensField;
  /** false: messages with role `developer` are sent as `system`. */
  supportsDeveloperRole: boolean;
  /** false: drop `reasoning_effort`. */
  supportsReasoningEffort: boolean;
  /** false: drop `strict` from tool definitions (`tools[].function.strict`). */
  supportsStrictMode: boolean;
  /**
   * true: the bridge asks for `stream_options: {include_usage: true}` so the upstream reports
   * usage in the stream (vLLM, Ollama >= 0.5, llama.cpp and LM Studio accept it).
   * false: `stream_options` is dropped from every request.
   */
  supportsStreamOptions: boolean;
  /** true: message content given as an array of text parts is sent as one string (old servers). */
  flattenTextContent: boolean;
  /** Top-level request fields removed before sending (e.g. `parallel_tool_calls`, `user`). */
  dropFields: string[];
  /** Object deep-merged into every request last (e.g. Ollama `{"options":{"num_ctx":32768}}`). */
  extraBody: Record<string, unknown>;
}

/** Partial rules, as given in configuration. */
export type CompatOverride = Partial<CompatRules>;

/** Defaults for local model servers: only what vLLM / Ollama / llama.cpp accept without complaint. */
export const LOCAL_SERVER_COMPAT: Readonly<CompatRules> = Object.freeze({
  supportsStore: false,
  maxTokensField: "max_tokens",
  supportsDeveloperRole: false,
  supportsReasoningEffort: false,
  supportsStrictMode: false,
  supportsStreamOptions: true,
  flattenTextContent: false,
  dropFields: [],
  extraBody: {},
});

export const compatOverrideSchema = z.strictObject({
  supportsStore: z.boolean().optional(),
  maxTokensField: z.enum(["max_tokens", "max_completion_tokens"]).optional(),
  supportsDeveloperRole: z.boolean().optional(),
  supportsReasoningEffort: z.boolean().optional(),
  supportsStrictMode: z.boolean().optional(),
  supportsStreamOptions: z.boolean().optional(),
  flattenTextContent: z.boolean().optional(),
  dropFields: z.array(z.string().min(1)).optional(),
  extraBody: z.record(z.string(), z.unknown()).optional(),
});

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** Deep merge of plain objects: `over` wins; arrays and other values are replaced, not merged. */
export function deepMerge(base: Record<string, unknown>, over: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...base };
  for (const [k, v] of Object.entries(over)) {
    const cur = out[k];
    out[k] = isPlainObject(cur) && isPlainObject(v) ? deepMerge(cur, v) : v;
  }
  return out;
}

/**
 * Rules `base` with `override` on top. Flags are replaced; `dropFields` is the union of both;
 * `extraBody` is deep-merged (override wins). Neither argument is modified.
 */
export function mergeCompat(base: Readonly<CompatRules>, override?: CompatOverride | null): CompatRules {
  const o = override ?? {};
  const out: CompatRules = { ...base, dropFields: [...base.dropFields], extraBody: { ...base.extraBody } };
  for (const key of Object.keys(o) as Array<keyof CompatRules>) {
    const v = o[key];
    if (v === undefined) continue;
    if (key === "dropFields") out.dropFields = [...new Set([...base.dropFields, ...(v as string[])])];
    else if (key === "extraBody") out.extraBody = deepMerge(base.extraBody, v as Record<string, unknown>);
    else (out as unknown as Record<string, unknown>)[key] = v;
  }
  return out;
}

function compatMessages(messages: unknown[], compat: Readonly<CompatRules>): unknown[] {
  return messages.map((m: unknown) => {
    if (!isPlainObject(m)) return m;
    let msg = m;
    if (!compat.supportsDeveloperRole && msg.role === "developer") msg = { ...msg, role: "system" };
    if (compat.flattenTextContent && Array.isArray(msg.content)) {
      const flat = flattenContent(msg.content);
      if (flat !== msg.content) msg = { ...msg, content: flat };
    }
    return msg;
  });
}

/** Tool definitions without `function.strict`. */
function withoutStrict(tools: unknown[]): unknown[] {
  return tools.map((t: unknown) => {
    if (!isPlainObject(t) || !isPlainObject(t.function) || !("strict" in t.function)) return t;
    const { strict: _strict, ...fn } = t.function;
    return { ...t, function: fn };
  });
}

function flattenContent(content: unknown): unknown {
  if (!Array.isArray(content)) return content;
  const allText = content.every((p) => isPlainObject(p) && p.type === "text" && typeof p.text === "string");
  if (!allText) return content;
  return content.map((p) => (p as { text: string }).text).join("\n");
}

/**
 * Rewrite a Chat Completions request body for an upstream with the given rules. Pure: returns a
 * new object and shares no mutated structure with `request`.
 *
 * Besides the flags, two clean-ups always apply: an empty `tools: []` is removed together with
 * `tool_choice` / `parallel_tool_calls` (vLLM rejects tool_choice without tools), and null-valued
 * limits (`max_tokens: null`) are dropped.
 */
export function applyRequestCompat(
  request: Readonly<Record<string, unknown>>,
  compat: Readonly<CompatRules>,
): Record<string, unknown> {
  // The body is built by copying the keys that stay, not by deleting from a copy: an object that
  // loses keys turns into a slow dictionary in V8, and every turn serialises this one.
  const field = compat.maxTokensField;
  // Output limit: one field, the one the upstream understands.
  const other: MaxTokensField = field === "max_tokens" ? "max_completion_tokens" : "max_tokens";
  const wanted = request[field];
  const given = request[other];
  // An empty `tools: []` goes with `tool_choice` / `parallel_tool_calls` (vLLM rejects tool_choice without tools).
  const noTools = Array.isArray(request.tools) && request.tools.length === 0;
  const drops = compat.dropFields;
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(request)) {
    switch (key) {
      case "store":
        if (!compat.supportsStore) continue;
        break;
      case "reasoning_effort":
        if (!compat.supportsReasoningEffort) continue;
        break;
      case "stream_options":
        if (!compat.supportsStreamOptions) continue;
        break;
      case "tools":
      case "tool_choice":
      case "parallel_tool_calls":
        if (noTools) continue;
        break;
      default:
        break;
    }
    if (key === other || (key === field && wanted == null) || (drops.length > 0 && drops.includes(key))) continue;
    let v = request[key];
    if (key === "messages" && Array.isArray(v)) v = compatMessages(v, compat);
    else if (key === "tools" && Array.isArray(v) && !compat.supportsStrictMode) v = withoutStrict(v);
    out[key] = v;
  }
  if (wanted == null && given != null && !drops.includes(field)) out[field] = given;

  return Object.keys(compat.extraBody).length ? deepMerge(out, compat.extraBody) : out;
}
