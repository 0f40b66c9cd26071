/**
 * The OpenAI Responses API request (`POST /v1/responses`), checked at the door: strict about what
 * changes the answer (model, input, instructions, tools, tool_choice, limits, sampling, the chain),
 * loose about the rest (unknown fields are ignored, as `include`, `prompt_cache_key`,
 * `client_metadata` or `stream_options` that Codex and the SDK send). The input items are checked
 * while they are translated (src/request/responses-api/translate.ts), so that each problem names
 * its item (`input[3].content[0].image_url`).
 *
 * What cannot be honoured is refused with a message that says so, never ignored: `background`
 * (no background responses here), `conversation` (the Conversations API: use
 * `previous_response_id`) and `prompt` (stored prompt templates).
 */
import { z } from "zod";

const nullableString = z.string().nullable().optional();

export const responsesRequestSchema = z.looseObject({
  model: z
    .string({ error: "model is required: the id of a model GET /v1/models lists" })
    .min(1, "model must be a non-empty string: the id of a model GET /v1/models lists"),
  input: z.union([z.string(), z.array(z.unknown())], {
    error: "input must be a string or an array of input items (messages, function_call_output...)",
  }),
  instructions: nullableString,
  previous_response_id: nullableString,
  stream: z.boolean().nullable().optional(),
  store: z.boolean().nullable().optional(),
  tools: z.array(z.looseObject({ type: z.string({ error: "each tool needs a string `type`" }) })).optional(),
  tool_choice: z.unknown().optional(),
  parallel_tool_calls: z.boolean().nullable().optional(),
  max_output_tokens: z.number().int().positive().nullable().optional(),
  temperature: z.number().min(0).max(2).nullable().optional(),
  top_p: z.number().min(0).max(1).nullable().optional(),
  user: z.string().optional(),
  metadata: z.record(z.string(), z.string()).nullable().optional(),
  reasoning: z
    .looseObject({ effort: z.string().nullable().optional(), summary: z.string().nullable().optional() })
    .nullable()
    .optional(),
  text: z
    .looseObject({ format: z.looseObject({ type: z.string() }).nullable().optional() })
    .nullable()
    .optional(),
  background: z
    .boolean()
    .nullable()
    .optional()
    .refine((v) => v !== true, "background responses are not supported here: leave `background` out"),
  conversation: z
    .unknown()
    .optional()
    .refine(
      (v) => v === undefined || v === null,
      "the Conversations API is not supported here: continue a conversation with `previous_response_id`, or send the whole conversation as `input`",
    ),
  prompt: z
    .unknown()
    .optional()
    .refine(
      (v) => v === undefined || v === null,
      "stored prompt templates are not supported here: send the prompt as `instructions` and `input`",
    ),
});

export type ResponsesRequest = z.infer<typeof responsesRequestSchema>;
