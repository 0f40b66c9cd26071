/**
 * OpenAI Chat Completions request shape, validated at the edge. Unknown fields are kept (loose
 * objects) so that pass-through backends can forward what they understand.
 *
 * Nesting is bounded first (`MAX_JSON_DEPTH`, checked without recursion before zod sees the body):
 * a client value nested thousands deep would overflow the stack of anything that walks it
 * recursively later (`JSON.stringify` of the upstream body did: a 500 for a client error).
 */
import { z } from "zod";

/** Deepest nesting of arrays and objects anywhere in a request; the body itself is level 1. */
export const MAX_JSON_DEPTH = 64;

// The walk's stack, kept between calls (the walk is synchronous): no allocation per request once
// it has grown; emptied after each walk so that it holds no request.
const stackValues: unknown[] = [];
const stackDepths: number[] = [];

/**
 * Whether `value` nests arrays and objects more than `max` levels deep (`value` itself, when an
 * array or object, is level 1). Iterative: any depth is safe.
 */
export function nestedDeeperThan(value: unknown, max: number): boolean {
  if (typeof value !== "object" || value === null) return false;
  if (max < 1) return true;
  const values = stackValues;
  const depths = stackDepths;
  values[0] = value;
  depths[0] = 1;
  let n = 1;
  let high = 1;
  let deeper = false;
  walk: while (n > 0) {
    n--;
    const v = values[n] as object;
    const child = depths[n]! + 1;
    if (Array.isArray(v)) {
      for (let i = 0; i < v.length; i++) {
        const c: unknown = v[i];
        if (typeof c !== "object" || c === null) continue;
        if (child > max) {
          deeper = true;
          break walk;
        }
        values[n] = c;
        depths[n++] = child;
      }
    } else {
      for (const k in v) {
        const c: unknown = (v as Record<string, unknown>)[k];
        if (typeof c !== "object" || c === null) continue;
        if (child > max) {
          deeper = true;
          break walk;
        }
        values[n] = c;
        depths[n++] = child;
      }
    }
    if (n > high) high = n;
  }
  for (let i = 0; i < high; i++) values[i] = undefined;
  return deeper;
}

/**
 * Path to the first (in document order) array or object nested more than `max` levels deep, or []
 * when there is none. Iterative, and it holds only the current path (at most `max` levels): the
 * answer for a refused body, so it may allocate.
 */
function pathDeeperThan(value: unknown, max: number): PropertyKey[] {
  if (typeof value !== "object" || value === null) return [];
  interface Frame {
    value: Record<PropertyKey, unknown>;
    keys: string[] | undefined; // undefined: an array
    next: number;
  }
  const frame = (v: object): Frame => ({
    value: v as Record<PropertyKey, unknown>,
    keys: Array.isArray(v) ? undefined : Object.keys(v),
    next: 0,
  });
  const frames: Frame[] = [frame(value)];
  const path: PropertyKey[] = [];
  while (frames.length) {
    const f = frames[frames.length - 1]!;
    if (f.next >= (f.keys ? f.keys.length : (f.value as unknown as unknown[]).length)) {
      frames.pop();
      path.pop();
      continue;
    }
    const key: PropertyKey = f.keys ? f.keys[f.next]! : f.next;
    f.next++;
    const c = f.value[key];
    if (typeof c !== "object" || c === null) continue;
    path.push(key);
    if (frames.length + 1 > max) return path; // `c` is at level frames.length + 1
    frames.push(frame(c));
  }
  return [];
}

/**
 * The request's own structure, down to where a free-form value begins (tool_choice, a content
 * part's image_url, a tool's parameters, any unknown field): an object shape keeps one key and
 * goes on with that key's shape, if any; an array shape keeps one index.
 */
type Shape = { readonly [key: string]: Shape } | readonly [Shape];
const REQUEST_SHAPE: Shape = {
  messages: [{ content: [{}], tool_calls: [{ function: {} }] }],
  tools: [{ function: {} }],
  stream_options: {},
};

/** `path` cut where it leaves the request's own structure: the field a client got wrong. */
function fieldOf(path: readonly PropertyKey[]): PropertyKey[] {
  const out: PropertyKey[] = [];
  let shape: Shape | undefined = REQUEST_SHAPE;
  for (const seg of path) {
    if (!shape) break;
    if (Array.isArray(shape)) {
      if (typeof seg !== "number") break;
      shape = shape[0];
    } else {
      if (typeof seg !== "string") break;
      const obj = shape as { readonly [key: string]: Shape };
      shape = Object.hasOwn(obj, seg) ? obj[seg] : undefined;
    }
    out.push(seg);
  }
  return out;
}

/** The nesting bound, before any other check: zod and the rest only ever see bounded values. */
const boundedDepth = z.unknown().check((payload) => {
  if (!nestedDeeperThan(payload.value, MAX_JSON_DEPTH)) return;
  payload.issues.push({
    code: "custom",
    message: `nested more than ${MAX_JSON_DEPTH} levels deep (arrays and objects, counted from the request body); flatten it`,
    input: undefined,
    path: fieldOf(pathDeeperThan(payload.value, MAX_JSON_DEPTH)),
  });
});

const textPart = z.looseObject({ type: z.literal("text"), text: z.string() });
const otherPart = z.looseObject({ type: z.string().refine((t) => t !== "text", "a text part needs a string `text`") });
export const contentPartSchema = z.union([textPart, otherPart]);

export const messageContentSchema = z.union([z.string(), z.array(contentPartSchema), z.null()]);

export const toolCallSchema = z.looseObject({
  id: z.string().optional(),
  type: z.string().optional(),
  function: z.looseObject({
    name: z.string(),
    arguments: z.string().optional(),
  }),
});

export const messageSchema = z.looseObject({
  role: z.enum(["system", "developer", "user", "assistant", "tool", "function"]),
  content: messageContentSchema.optional(),
  name: z.string().optional(),
  tool_calls: z.array(toolCallSchema).optional(),
  tool_call_id: z.string().optional(),
  reasoning_content: z.string().nullable().optional(),
});

export const toolSchema = z.looseObject({
  type: z.string(),
  function: z.looseObject({
    name: z.string().min(1),
    description: z.string().optional(),
    parameters: z.unknown().optional(),
  }),
});

const chatRequestFields = z.looseObject({
  model: z.string().min(1, "model must be a non-empty string"),
  messages: z.array(messageSchema).min(1, "messages must contain at least one message"),
  stream: z.boolean().optional(),
  stream_options: z.looseObject({ include_usage: z.boolean().optional() }).nullable().optional(),
  tools: z.array(toolSchema).optional(),
  tool_choice: z.unknown().optional(),
  max_tokens: z.number().int().positive().nullable().optional(),
  max_completion_tokens: z.number().int().positive().nullable().optional(),
  temperature: z.number().min(0).max(2).nullable().optional(),
  top_p: z.number().min(0).max(1).nullable().optional(),
  user: z.string().optional(),
  n: z.number().int().min(1).max(1, "n must be 1: the bridge returns one choice").nullable().optional(),
});

/** The request body: nesting bounded first (`MAX_JSON_DEPTH`), then the fields. */
export const chatRequestSchema = boundedDepth.pipe(chatRequestFields);

export type ChatRequest = z.infer<typeof chatRequestSchema>;
export type ChatMessage = z.infer<typeof messageSchema>;
export type MessageContent = z.infer<typeof messageContentSchema>;

/** Concatenated text of a message's content (text parts only). */
export function contentText(content: MessageContent | undefined): string {
  if (content == null) return "";
  if (typeof content === "string") return content;
  let out = "";
  for (const part of content) {
    if (part.type === "text" && typeof (part as { text?: unknown }).text === "string") {
      out += (out ? "\n" : "") + (part as { text: string }).text;
    }
  }
  return out;
}

/** Format the first validation issue as a message that names the field and says what to fix. */
export function describeIssues(error: z.ZodError): { message: string; param: string | null } {
  const issue = error.issues[0];
  if (!issue) return { message: "invalid request body", param: null };
  const param = formatPath(issue.path);
  const extra =
    error.issues.length > 1
      ? ` (and ${error.issues.length - 1} more problem${error.issues.length > 2 ? "s" : ""})`
      : "";
  return { message: `${param ? `${param}: ` : ""}${issue.message}${extra}`, param: param || null };
}

export function formatPath(path: ReadonlyArray<PropertyKey>): string {
  let out = "";
  for (const p of path) {
    if (typeof p === "number") out += `[${p}]`;
    else out += out ? `.${String(p)}` : String(p);
  }
  return out;
}
