/**
 * A Messages API body, checked and translated: the request the pipeline runs (a Chat Completions
 * request, src/request/messages-api/translate.ts), whether it streams, and the conversation
 * `metadata.user_id` names (with the thread's first message). Any problem is an `ApiError` 400
 * naming the field, which the door answers in Anthropic's shape.
 */
import type { z } from "zod";
import { badRequest } from "../chat-api/errors.js";
import { describeIssues, type ChatRequest } from "../chat-api/schema.js";
import type { Conversation } from "../identity/conversation.js";
import { countTokensSchema, messagesRequestSchema, type CountTokensRequest } from "./schema.js";
import { checkDepth, conversationOf, toChatRequest } from "./translate.js";

export interface ParsedMessages {
  chat: ChatRequest;
  stream: boolean;
  conversation?: Conversation;
}

function validate<T>(schema: z.ZodType<T>, raw: unknown): T {
  checkDepth(raw);
  const r = schema.safeParse(raw);
  if (r.success) return r.data;
  const { message, param } = describeIssues(r.error);
  throw badRequest(message, "invalid_request", param);
}

/** `POST /v1/messages`. */
export function parseMessagesRequest(raw: Record<string, unknown>): ParsedMessages {
  const req = validate(messagesRequestSchema, raw);
  const chat = toChatRequest(req);
  const conversation = conversationOf(req.metadata?.user_id, chat.messages);
  return { chat, stream: req.stream === true, ...(conversation ? { conversation } : {}) };
}

/** `POST /v1/messages/count_tokens` (the same body; `max_tokens` not needed). */
export function parseCountTokensRequest(raw: unknown): CountTokensRequest {
  if (raw === null || typeof raw !== "object" || Array.isArray(raw))
    throw badRequest("The request body must be a JSON object with `model` and `messages`.", "invalid_body");
  return validate(countTokensSchema, raw);
}
