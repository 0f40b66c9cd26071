/**
 * The Chat Completions door, `POST /v1/chat/completions`: the pipeline's own language, so the
 * request passes as it is (checked against src/request/chat-api/schema.ts) and the answer is
 * `chat.completion.chunk` SSE (src/request/encoder/sse.ts) or one `chat.completion`
 * (src/request/encoder/json.ts). Errors are OpenAI-shaped. The HTTP work is the door runner's
 * (src/request/http/door-route.ts).
 */
import { chatRequestSchema, describeIssues } from "../chat-api/schema.js";
import { badRequest, type ApiError } from "../chat-api/errors.js";
import { collectCompletion } from "../encoder/json.js";
import { ChatDialect } from "../encoder/sse.js";
import { isPath, type Door } from "./door.js";

export const CHAT_PATH = "/v1/chat/completions";

/** The chat route's URL, with or without a query string. */
export function isChatRoute(method: string | undefined, url: string | undefined): boolean {
  return method === "POST" && isPath(url, CHAT_PATH);
}

export const chatDoor: Door = {
  name: "chat",
  native: true,
  bodyHint: "with `model` and `messages`",
  matches: isChatRoute,
  errorBody: (err: ApiError) => err.body(),
  parse(raw) {
    const parsed = chatRequestSchema.safeParse(raw);
    if (!parsed.success) {
      const { message, param } = describeIssues(parsed.error);
      throw badRequest(message, "invalid_request", param);
    }
    const chat = parsed.data;
    return {
      chat,
      stream: chat.stream === true,
      dialect: (turn) => new ChatDialect(turn.model, chat.stream_options?.include_usage === true),
      async collect(events, turn) {
        const r = await collectCompletion(events, turn.model);
        return r.ok ? { ok: true, body: r.body } : { ok: false, error: r.error };
      },
    };
  },
};
