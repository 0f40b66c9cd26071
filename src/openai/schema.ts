/**
 * OpenAI Chat Completions request shape, validated at the edge. Unknown fields are kept (loose
 * objects) so that pass-through backends can forward what they understand.
 */
import { z } from "zod";

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

export const chatRequestSchema = z.looseObject({
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
  const extra = error.issues.length > 1 ? ` (and ${error.issues.length - 1} more problem${error.issues.length > 2 ? "s" : ""})` : "";
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
