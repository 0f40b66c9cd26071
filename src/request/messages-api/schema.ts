/**
 * The Anthropic Messages API request (`POST /v1/messages`, `/v1/messages/count_tokens`), checked at
 * the door. The request's own fields are checked here; each content block is checked by its kind
 * in translate.ts (`blockSchemas`), so that a bad block's error names its place
 * (`messages[2].content[0].source.data`) and a block kind the bridge does not know (a server
 * tool's result, a newer kind) is passed over instead of refused: a real client must never get a
 * 400 for a kind it sends. Unknown fields are kept out of the translation, never refused
 * (Claude Code sends `context_management`, `output_config`, betas in the query string).
 */
import { z } from "zod";

const cacheControl = z.unknown().optional();

export const textBlockSchema = z.looseObject({
  type: z.literal("text"),
  text: z.string(),
  cache_control: cacheControl,
});

export const imageBlockSchema = z.looseObject({
  type: z.literal("image"),
  source: z.union([
    z.looseObject({
      type: z.literal("base64"),
      media_type: z.string().regex(/^image\/[a-z0-9.+-]+$/i, "media_type must be an image type, like image/png"),
      data: z.string().min(1, "data must hold the base64 image"),
    }),
    z.looseObject({ type: z.literal("url"), url: z.string().min(1, "url must be the image's address") }),
    z.looseObject({ type: z.literal("file"), file_id: z.string() }),
  ]),
});

export const documentBlockSchema = z.looseObject({
  type: z.literal("document"),
  source: z.looseObject({ type: z.string() }),
  title: z.string().nullable().optional(),
  context: z.string().nullable().optional(),
});

export const toolUseBlockSchema = z.looseObject({
  type: z.literal("tool_use"),
  id: z.string().min(1, "a tool_use block needs its id"),
  name: z.string().min(1, "a tool_use block needs the tool's name"),
  input: z.unknown(),
});

export const toolResultBlockSchema = z.looseObject({
  type: z.literal("tool_result"),
  tool_use_id: z.string().min(1, "a tool_result block needs the tool_use_id it answers"),
  content: z.union([z.string(), z.array(z.looseObject({ type: z.string() }))]).optional(),
  is_error: z.boolean().optional(),
});

export const searchResultBlockSchema = z.looseObject({
  type: z.literal("search_result"),
  source: z.string().optional(),
  title: z.string().optional(),
  content: z.array(z.looseObject({ type: z.string() })),
});

/** A block of any kind: its own fields are checked by kind in translate.ts. */
const blockSchema = z.looseObject({ type: z.string().min(1, "each content block needs a `type`") });
export type Block = z.infer<typeof blockSchema>;

const contentSchema = z.union([z.string(), z.array(blockSchema)], {
  error: "content must be a string or an array of content blocks",
});

export const messageParamSchema = z.looseObject({
  // `system`: Claude Code 2.1 sends system messages between the others (a beta of the real API).
  role: z.enum(["user", "assistant", "system"], { error: 'role must be "user" or "assistant"' }),
  content: contentSchema,
});
export type MessageParam = z.infer<typeof messageParamSchema>;

/** A tool as sent: a client tool has `input_schema`; a server tool (`web_search_20250305`, `bash_…`) has none. */
export const toolParamSchema = z.looseObject({
  name: z.string().min(1, "each tool needs a name"),
  type: z.string().nullable().optional(),
  description: z.string().optional(),
  input_schema: z.unknown().optional(),
});
export type ToolParam = z.infer<typeof toolParamSchema>;

export const toolChoiceSchema = z.union(
  [
    z.looseObject({ type: z.literal("auto"), disable_parallel_tool_use: z.boolean().optional() }),
    z.looseObject({ type: z.literal("any"), disable_parallel_tool_use: z.boolean().optional() }),
    z.looseObject({
      type: z.literal("tool"),
      name: z.string().min(1, "tool_choice of type tool needs the tool's name"),
      disable_parallel_tool_use: z.boolean().optional(),
    }),
    z.looseObject({ type: z.literal("none") }),
  ],
  { error: 'tool_choice must be {"type":"auto"|"any"|"none"} or {"type":"tool","name":…}' },
);
export type ToolChoice = z.infer<typeof toolChoiceSchema>;

/** The fields `count_tokens` reads (the same body as a message, without `max_tokens`). */
const countFields = {
  model: z.string({ error: "model must be a string" }).min(1, "model must be a non-empty string"),
  messages: z.array(messageParamSchema, { error: "messages must be an array of messages" }),
  system: z.union([z.string(), z.array(blockSchema)], { error: "system must be a string or text blocks" }).optional(),
  tools: z.array(toolParamSchema, { error: "tools must be an array" }).optional(),
  tool_choice: toolChoiceSchema.optional(),
  thinking: z.unknown().optional(),
};

export const countTokensSchema = z.looseObject(countFields);

export const messagesRequestSchema = z.looseObject({
  ...countFields,
  messages: countFields.messages.min(1, "messages must contain at least one message"),
  max_tokens: z
    .number({ error: "max_tokens is required: the most tokens the answer may have (a positive integer)" })
    .int("max_tokens must be an integer")
    .positive("max_tokens must be positive"),
  stop_sequences: z.array(z.string(), { error: "stop_sequences must be an array of strings" }).optional(),
  stream: z.boolean({ error: "stream must be true or false" }).optional(),
  temperature: z.number().min(0).max(1).optional(),
  top_p: z.number().min(0).max(1).optional(),
  top_k: z.number().int().min(0).optional(),
  metadata: z.looseObject({ user_id: z.string().nullable().optional() }).nullable().optional(),
});

export type MessagesRequest = z.infer<typeof messagesRequestSchema>;
export type CountTokensRequest = z.infer<typeof countTokensSchema>;
