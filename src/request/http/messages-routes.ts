/**
 * The Anthropic Messages API's door, `POST /v1/messages` (with or without a query string: Claude
 * Code calls `/v1/messages?beta=true`), run by the door runner (src/request/http/door-route.ts) like
 * every turn-taking door, and `POST /v1/messages/count_tokens` on Fastify. The translation both ways
 * is src/request/messages-api's; this file only joins it to the HTTP layer. Every error, the
 * 401 included, is Anthropic-shaped (`{"type":"error","error":{"type","message"}}`).
 */
import type { FastifyInstance, FastifyReply } from "fastify";
import type { Logger } from "pino";
import { ApiError, badRequest } from "../chat-api/errors.js";
import { collectMessage } from "../messages-api/collect.js";
import { countInputTokens } from "../messages-api/count-tokens.js";
import { MessagesDialect } from "../messages-api/dialect.js";
import { anthropicErrorBody } from "../messages-api/errors.js";
import { parseCountTokensRequest, parseMessagesRequest } from "../messages-api/request.js";
import { isPath, type Door } from "./door.js";

export const MESSAGES_PATH = "/v1/messages";
export const COUNT_TOKENS_PATH = "/v1/messages/count_tokens";

/** What an Anthropic client is told about a missing or wrong key. */
const KEY_HELP =
  "Missing or wrong API key: send `x-api-key: <key>` (ANTHROPIC_API_KEY) or `Authorization: Bearer <key>` (ANTHROPIC_AUTH_TOKEN) with one of server.apiKeys.";

/** An error as an Anthropic client reads it. */
export function messagesErrorBody(err: ApiError): object {
  const body = anthropicErrorBody(err);
  if (err.status === 401) body.error.message = KEY_HELP;
  return body;
}

/** An `ApiError` as a Fastify reply in Anthropic's shape (its headers kept). */
export function sendMessagesError(reply: FastifyReply, err: ApiError): FastifyReply {
  for (const [k, v] of Object.entries(err.headers)) void reply.header(k, v);
  return reply.code(err.status).type("application/json").send(messagesErrorBody(err));
}

export function isCountTokensRoute(method: string | undefined, url: string | undefined): boolean {
  return method === "POST" && isPath(url, COUNT_TOKENS_PATH);
}

export const messagesDoor: Door = {
  name: "messages",
  bodyHint: "with `model`, `max_tokens` and `messages`",
  matches: (method, url) => method === "POST" && isPath(url, MESSAGES_PATH),
  errorBody: messagesErrorBody,
  parse(raw) {
    const parsed = parseMessagesRequest(raw);
    return {
      ...parsed,
      dialect: (turn) => new MessagesDialect(turn.model),
      collect: (events, turn) => collectMessage(events, turn.model),
    };
  },
};

export interface MessagesRoutesDeps {
  /** `server.bodyLimitBytes`. */
  bodyLimitBytes: number;
  logger: Logger;
}

/** `POST /v1/messages/count_tokens` → `{"input_tokens": n}`, an estimate (src/request/messages-api/count-tokens.ts). */
export function registerMessagesRoutes(app: FastifyInstance, deps: MessagesRoutesDeps): void {
  app.register(async (scope) => {
    // The body is JSON whatever content type the client claims, as on the doors.
    scope.addContentTypeParser("*", { parseAs: "string", bodyLimit: deps.bodyLimitBytes }, (_req, body, done) => {
      const text = (body as string).trim();
      if (!text) return done(null, undefined);
      try {
        done(null, JSON.parse(text));
      } catch (err) {
        done(badRequest(`The request body is not valid JSON: ${(err as Error).message}`, "invalid_json"), undefined);
      }
    });
    scope.setErrorHandler((err: Error & { statusCode?: number; code?: string }, _req, reply) => {
      if (err instanceof ApiError) return sendMessagesError(reply, err);
      const status = err.statusCode && err.statusCode >= 400 && err.statusCode < 500 ? err.statusCode : 500;
      const message =
        status === 413
          ? `The request body is larger than ${deps.bodyLimitBytes} bytes (server.bodyLimitBytes).`
          : status === 500
            ? "Internal error in the bridge; see its log."
            : err.message;
      if (status === 500) deps.logger.error({ err }, "count_tokens failed");
      return sendMessagesError(
        reply,
        new ApiError(status, "invalid_request_error", err.code ?? "bad_request", message),
      );
    });
    scope.post(COUNT_TOKENS_PATH, async (req) => {
      const parsed = parseCountTokensRequest(req.body);
      return { input_tokens: await countInputTokens(parsed) };
    });
  });
}
