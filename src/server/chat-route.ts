/**
 * `POST /v1/chat/completions` on plain node:http, ahead of Fastify.
 *
 * Every turn goes through here, so its cost per request is the bridge's cost per request. Served
 * by Fastify it spent more CPU in the framework (routing, hooks, content-type parsing, reply
 * serialisation) than in the rest of the bridge; here the same contract is kept by hand, and
 * every other route stays on Fastify (src/server/app.ts):
 * - 503 while shutting down (`connection: close`), 401 without a right API key (checked before
 *   the body is read), 413 over `server.bodyLimitBytes` (checked on Content-Length, then while
 *   reading), 400 for an empty, non-JSON or non-object body and for a request the schema refuses;
 * - the body is JSON whatever content type the client claims;
 * - the model is routed (404 for an unknown one) and the conversation identified (headers, `user`,
 *   OpenClaw's metadata) here, before the pipeline, which knows nothing of HTTP; its refusals
 *   (queue full → 429 with `Retry-After`, cancelled while waiting → 499) are mapped here;
 * - every error is OpenAI-shaped; an unexpected failure is a logged 500, never a crash.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Logger } from "pino";
import type { Config } from "../config/schema.js";
import { collectCompletion } from "../encoder/json.js";
import { writeSse } from "../encoder/sse.js";
import type { DebugLog } from "../log/debug-log.js";
import { chatRequestSchema, describeIssues } from "../openai/schema.js";
import { resolveConversation } from "../identity/conversation.js";
import type { ChatPipeline, PreparedTurn } from "../pipeline/chat.js";
import { QueueRejected, WaitAborted } from "../queue/scheduler.js";
import type { ModelRouter } from "../routing/router.js";
import { Cancellation } from "../util/cancel.js";
import { readLimited } from "../util/read-limited.js";
import { ApiKeys } from "./auth.js";
import { backendErrorBody, backendErrorStatus } from "../encoder/errors.js";
import { ApiError, badRequest, internalError, unauthorized, type ApiErrorBody } from "../openai/errors.js";

export const CHAT_PATH = "/v1/chat/completions";

/** The chat route's URL, with or without a query string. */
export function isChatRoute(method: string | undefined, url: string | undefined): boolean {
  return method === "POST" && url !== undefined && (url === CHAT_PATH || (url.startsWith(CHAT_PATH) && url.charCodeAt(CHAT_PATH.length) === 63)); // "?"
}

export interface ChatRouteDeps {
  config: Config;
  pipeline: ChatPipeline;
  router: ModelRouter;
  keys: ApiKeys;
  logger: Logger;
  debugLog: DebugLog;
  /** True once the server is shutting down. */
  closing(): boolean;
  /** The `server` response header (`clawbridge/<version>`). */
  server: string;
}

const JSON_TYPE = "application/json; charset=utf-8";

/**
 * Write an OpenAI-shaped JSON answer on a raw response. Every header goes in `writeHead`: a header
 * set earlier with `setHeader` would send Node down its slower path that validates each header
 * twice (measurable per request).
 */
function writeJson(res: ServerResponse, server: string, status: number, body: object | ApiErrorBody, headers?: Record<string, string>): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { server, ...headers, "content-type": JSON_TYPE, "content-length": Buffer.byteLength(text) });
  res.end(text);
}

export function chatRoute(deps: ChatRouteDeps): (req: IncomingMessage, res: ServerResponse) => void {
  const { config, pipeline, router, keys, logger, debugLog, server } = deps;
  const writeApiError = (res: ServerResponse, err: ApiError, extra?: Record<string, string>) => writeJson(res, server, err.status, err.body(), { ...err.headers, ...extra });
  const limit = config.server.bodyLimitBytes;
  const heartbeatMs = config.server.heartbeatSeconds * 1000;
  const tooLarge = () => new ApiError(413, "invalid_request_error", "body_too_large", `The request body is larger than ${limit} bytes (server.bodyLimitBytes).`);

  const fail = (res: ServerResponse, err: unknown) => {
    if (res.headersSent) {
      // Mid-answer: the encoders end their own streams; anything else can only close it.
      if (!res.writableEnded) res.destroy();
      return;
    }
    if (err instanceof ApiError) return writeApiError(res, err);
    logger.error({ err }, "unexpected error");
    writeApiError(res, internalError());
  };

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    if (deps.closing()) {
      return writeApiError(res, new ApiError(503, "server_error", "shutting_down", "The bridge is shutting down; retry in a moment."), { connection: "close" });
    }
    if (keys.required && !keys.check(ApiKeys.presented(req.headers))) {
      return writeApiError(res, unauthorized());
    }
    const text = await readBody(req, limit);
    if (text === undefined) return writeApiError(res, tooLarge(), { connection: "close" });

    let raw: unknown;
    if (text.trim()) {
      try {
        raw = JSON.parse(text);
      } catch (err) {
        throw badRequest(`The request body is not valid JSON: ${(err as Error).message}`, "invalid_json");
      }
    }
    if (raw === undefined || raw === null || typeof raw !== "object" || Array.isArray(raw)) {
      throw badRequest("The request body must be a JSON object with `model` and `messages`.", "invalid_body");
    }
    const parsed = chatRequestSchema.safeParse(raw);
    if (!parsed.success) {
      const { message, param } = describeIssues(parsed.error);
      throw badRequest(message, "invalid_request", param);
    }
    const body = parsed.data;
    const route = router.resolve(body.model);
    if (!route) {
      throw new ApiError(
        404,
        "invalid_request_error",
        "model_not_found",
        `The model "${body.model}" is not served here. Available: ${router.models().map((m) => m.id).join(", ")} (GET /v1/models lists them).`,
        "model",
      );
    }
    const conversation = resolveConversation(body, req.headers, { sessionHeader: config.server.sessionHeader, scope: route.model.id });

    // The client's connection: when it goes away, the turn is aborted (and its process killed).
    // The cancellation becomes the turn's own (the pipeline also aborts it on shutdown): whether
    // the client went away is kept apart.
    const cancel = new Cancellation();
    let clientGone = false;
    res.on("close", () => {
      if (!res.writableFinished) {
        clientGone = true;
        cancel.abort();
      }
    });

    let turn: PreparedTurn;
    try {
      turn = await pipeline.prepare({ request: body, route, conversation }, cancel);
    } catch (err) {
      refusal(err);
    }
    if (body.stream) {
      await writeSse(res, turn.events, {
        model: body.model,
        includeUsage: body.stream_options?.include_usage === true,
        heartbeatMs,
        headers: { server, ...turn.headers },
      });
      return;
    }
    const result = await collectCompletion(turn.events, body.model);
    if (!result.ok) {
      // Nobody is listening: drop the connection rather than leave the reply open.
      if (clientGone) return void res.destroy();
      return writeJson(res, server, backendErrorStatus(result.error), backendErrorBody(result.error), turn.headers);
    }
    writeJson(res, server, 200, result.body, turn.headers);
  };

  return (req, res) => {
    if (debugLog.enabled) {
      res.once("finish", () => debugLog.line(`HTTP: "${req.method} ${req.url} HTTP/${req.httpVersion}" ${res.statusCode} -`));
    }
    handle(req, res).catch((err) => fail(res, err));
  };
}

/** The pipeline's refusals (typed values) as OpenAI-shaped HTTP errors. */
function refusal(err: unknown): never {
  if (err instanceof QueueRejected) {
    throw new ApiError(429, "rate_limit_error", "queue_full", `${err.message}; retry in ${err.retryAfterSeconds}s`, null, { "retry-after": String(err.retryAfterSeconds) });
  }
  if (err instanceof WaitAborted) throw new ApiError(499, "invalid_request_error", "client_closed", err.message);
  throw err;
}

/**
 * The request body as text, or `undefined` when it is larger than `limit` bytes (then the rest is
 * not read: the caller answers 413 and closes the connection).
 */
function readBody(req: IncomingMessage, limit: number): Promise<string | undefined> {
  const declared = Number(req.headers["content-length"]);
  if (declared > limit) {
    req.resume();
    return Promise.resolve(undefined);
  }
  return readLimited(req, limit).then(
    (bytes) => {
      if (bytes) return bytes.toString("utf8");
      req.resume(); // the rest is discarded while the 413 goes out
      return undefined;
    },
    () => {
      throw new ApiError(499, "invalid_request_error", "client_closed", "the client went away while sending the request");
    },
  );
}
