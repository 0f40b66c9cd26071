/**
 * The door runner: every turn-taking door (`POST /v1/chat/completions`, `/v1/responses`,
 * `/v1/messages`; src/request/http/door.ts) on plain node:http, ahead of Fastify.
 *
 * Every turn goes through here, so its cost per request is the bridge's cost per request. Served
 * by Fastify it spent more CPU in the framework (routing, hooks, content-type parsing, reply
 * serialisation) than in the rest of the bridge; here the same contract is kept by hand, and
 * every other route stays on Fastify (src/request/http/app.ts). Both sit behind the HTTP front
 * (src/request/http/http-front.ts: timeouts, connection cap, HTTP-level errors, 503 while shutting down).
 * - 401 without a right API key (`Authorization: Bearer` or `x-api-key`) and 413 over
 *   `server.bodyLimitBytes` on Content-Length, both before the body is read and before
 *   `100 Continue`; 413 again while reading; both close the connection without reading the rest (a
 *   bounded lingering close); 400 for an empty, non-JSON or non-object body and for a request the
 *   door refuses;
 * - the body is JSON whatever content type the client claims;
 * - the door translates the request; its images are fetched and checked (src/request/images);
 * - the model is routed (404 for an unknown one) and the conversation identified (headers, the
 *   door's own identity, `user`, OpenClaw's metadata) here, before the pipeline, which knows
 *   nothing of HTTP; its refusals (queue full → 429 with `Retry-After`, cancelled while waiting →
 *   499) are mapped here;
 * - a turn stopped by shutdown (while it waited or ran) is not a client that went away: it gets
 *   503 `shutting_down` with `Retry-After` (SDKs retry it; they do not retry a 499);
 * - answers sent while the bridge shuts down say `Connection: close`; a stream honours the
 *   client's own `Connection: close`;
 * - every error is shaped by the door's API; an unexpected failure is a logged 500, never a crash.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Logger } from "pino";
import type { Config } from "../../core/config/schema.js";
import type { DebugLog } from "../../core/log/debug-log.js";
import { resolveConversation } from "../identity/conversation.js";
import type { ChatPipeline, PreparedTurn } from "../pipeline/chat.js";
import { ANSWERED_BY } from "../pipeline/fallback.js";
import { QueueRejected, WaitAborted } from "../queue/scheduler.js";
import type { ModelRouter } from "../models/routes.js";
import { Cancellation, TurnDeadline } from "../../core/util/cancel.js";
import { readLimited } from "../../core/util/read-limited.js";
import { streamEvents } from "../encoder/stream.js";
import { ImageRefused, type ImageResolver } from "../images/resolve.js";
import { ApiKeys } from "./auth.js";
import { lingerAfterAnswer, shuttingDown, UNAUTHENTICATED_LINGER_BYTES } from "./http-front.js";
import { apiErrorOf, retryAfter } from "../encoder/backend-errors.js";
import { ApiError, badRequest, internalError, unauthorized } from "../chat-api/errors.js";
import type { Door, DoorTurn } from "./door.js";

export interface DoorRouteDeps {
  config: Config;
  pipeline: ChatPipeline;
  router: ModelRouter;
  keys: ApiKeys;
  logger: Logger;
  debugLog: DebugLog;
  /** Fetches and checks the request's images (src/request/images); without it image URLs are refused. */
  images?: ImageResolver;
  /** Whether the answer to `req` closes its connection (the server is shutting down). */
  closesAfter(req: IncomingMessage): boolean;
  /** The `server` response header (`clawbridge/<version>`). */
  server: string;
  /** Bytes a lingering close may read after a 413 (src/request/http/http-front.ts). */
  lingerBytes(): number;
}

const JSON_TYPE = "application/json; charset=utf-8";

/**
 * Write a JSON answer on a raw response. Every header goes in `writeHead`: a header set earlier
 * with `setHeader` would send Node down its slower path that validates each header twice
 * (measurable per request).
 */
function writeJson(
  res: ServerResponse,
  server: string,
  status: number,
  body: object,
  headers?: Record<string, string>,
): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { server, ...headers, "content-type": JSON_TYPE, "content-length": Buffer.byteLength(text) });
  res.end(text);
}

const CLOSE = { connection: "close" } as const;

/** The handler of one door: `(req, res, expectsContinue)` from the HTTP front. */
export function doorRoute(
  door: Door,
  deps: DoorRouteDeps,
): (req: IncomingMessage, res: ServerResponse, expectsContinue?: boolean) => void {
  const { config, pipeline, router, keys, logger, debugLog, server } = deps;
  /** A JSON answer; while shutting down it closes its connection. */
  const send = (res: ServerResponse, status: number, body: object, headers?: Record<string, string>) =>
    writeJson(res, server, status, body, deps.closesAfter(res.req) ? { ...headers, ...CLOSE } : headers);
  const writeApiError = (res: ServerResponse, err: ApiError, extra?: Record<string, string>) =>
    send(res, err.status, door.errorBody(err), { ...err.headers, ...extra });
  const limit = config.server.bodyLimitBytes;
  const heartbeatMs = config.server.heartbeatSeconds * 1000;
  const tooLarge = () =>
    new ApiError(
      413,
      "invalid_request_error",
      "body_too_large",
      `The request body is larger than ${limit} bytes (server.bodyLimitBytes).`,
    );

  const fail = (res: ServerResponse, err: unknown) => {
    if (res.headersSent || res.destroyed) {
      // Mid-answer: the encoders end their own streams; anything else can only close it.
      if (!res.writableEnded) res.destroy();
      return;
    }
    if (err instanceof ApiError) return writeApiError(res, err);
    logger.error({ err, door: door.name }, "unexpected error");
    writeApiError(res, internalError());
  };

  const handle = async (req: IncomingMessage, res: ServerResponse, expectsContinue: boolean) => {
    if (keys.required && !keys.check(ApiKeys.presented(req.headers))) {
      // The connection closes: of the body, a client without a key gets at most a small budget read.
      writeApiError(res, unauthorized(), CLOSE);
      return lingerAfterAnswer(req, UNAUTHENTICATED_LINGER_BYTES);
    }
    if (Number(req.headers["content-length"]) > limit) {
      writeApiError(res, tooLarge(), CLOSE);
      return lingerAfterAnswer(req, deps.lingerBytes());
    }
    if (expectsContinue) res.writeContinue();
    const text = await readBody(req, limit);
    if (text === undefined) {
      writeApiError(res, tooLarge(), CLOSE);
      return lingerAfterAnswer(req, deps.lingerBytes());
    }
    // Answered while the body was arriving (408: it came too slowly): the request is over.
    if (res.headersSent) return;

    let raw: unknown;
    if (text.trim()) {
      try {
        raw = JSON.parse(text);
      } catch (err) {
        throw badRequest(`The request body is not valid JSON: ${(err as Error).message}`, "invalid_json");
      }
    }
    if (raw === undefined || raw === null || typeof raw !== "object" || Array.isArray(raw)) {
      throw badRequest(`The request body must be a JSON object ${door.bodyHint}.`, "invalid_body");
    }
    const parsed = await door.parse(raw as Record<string, unknown>, req);
    const route = await router.resolveLive(parsed.chat.model);
    if (!route) {
      throw new ApiError(
        404,
        "invalid_request_error",
        "model_not_found",
        `The model "${parsed.chat.model}" is not served here. Available: ${router
          .listed()
          .map((m) => m.id)
          .join(", ")} (GET /v1/models lists them).`,
        "model",
      );
    }

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

    // Image URLs become data (fetched through the network guard, size-capped) before the turn
    // waits for its slot: a refused image is the client's error, answered before anything streams.
    // Another API's client is told which image ("image 2 of the request"), not the pipeline's position.
    const body =
      deps.images && hasImageParts(parsed.chat)
        ? await deps.images.resolve(parsed.chat, cancel.signal).catch((err: unknown) => {
            throw err instanceof ImageRefused && !door.native ? err.counted() : err;
          })
        : parsed.chat;
    const conversation = resolveConversation(body, req.headers, {
      sessionHeader: config.server.sessionHeader,
      scope: route.model.id,
      ...(parsed.conversation ? { own: parsed.conversation } : {}),
    });

    let turn: PreparedTurn;
    try {
      turn = await pipeline.prepare({ request: body, route, conversation }, cancel);
    } catch (err) {
      // Stopped while it waited, and not by its client: the bridge is shutting down.
      if (err instanceof WaitAborted && !clientGone) throw shuttingDown();
      refusal(err);
    }
    const headers = turn.headers;
    const info: DoorTurn = {
      requestId: turn.requestId,
      conversation,
      model: body.model,
      answeredBy: () => headers[ANSWERED_BY] ?? route.model.id,
    };
    if (parsed.stream) {
      await streamEvents(res, turn.events, parsed.dialect(info), {
        heartbeatMs,
        // A fallback chain decides at the first event which model answers (and names it in
        // turn.headers then): the same object, read when the headers go out.
        headers: deps.closesAfter(req) ? Object.assign(headers, { server }, CLOSE) : Object.assign(headers, { server }),
        deferHeaders: turn.decidesLate,
      });
      return;
    }
    const result = await parsed.collect(turn.events, info);
    if (!result.ok) {
      // Nobody is listening: drop the connection rather than leave the reply open.
      if (clientGone) return void res.destroy();
      // Aborted, not by its client and not by its deadline: by the shutdown. Retryable.
      if (cancel.aborted && !(cancel.reason instanceof TurnDeadline))
        return writeApiError(res, shuttingDown(), headers);
      const extra = result.error.resetAt ? { ...headers, "retry-after": retryAfter(result.error.resetAt) } : headers;
      return writeApiError(res, apiErrorOf(result.error), extra);
    }
    send(res, 200, result.body, headers);
  };

  return (req, res, expectsContinue = false) => {
    if (debugLog.enabled) {
      res.once("finish", () =>
        debugLog.line(`HTTP: "${req.method} ${req.url} HTTP/${req.httpVersion}" ${res.statusCode} -`),
      );
    }
    handle(req, res, expectsContinue).catch((err) => fail(res, err));
  };
}

/** Whether any message of the request has a content part that is not text (an image to check). */
function hasImageParts(request: { messages: ReadonlyArray<{ content?: unknown }> }): boolean {
  for (const m of request.messages) {
    if (!Array.isArray(m.content)) continue;
    for (const p of m.content as Array<{ type?: unknown }>) if (p.type === "image_url") return true;
  }
  return false;
}

/** The pipeline's refusals (typed values) as HTTP errors (each door shapes them). */
function refusal(err: unknown): never {
  if (err instanceof QueueRejected) {
    // "conversation": only this conversation has too many turns waiting; others are still served.
    const code = err.scope === "conversation" ? "conversation_queue_full" : "queue_full";
    throw new ApiError(429, "rate_limit_error", code, `${err.message}; retry in ${err.retryAfterSeconds}s`, null, {
      "retry-after": String(err.retryAfterSeconds),
    });
  }
  if (err instanceof WaitAborted) throw new ApiError(499, "invalid_request_error", "client_closed", err.message);
  throw err;
}

/**
 * The request body as text, or `undefined` when it is larger than `limit` bytes (then the rest is
 * not read: the caller answers 413 and closes the connection, lingering). A Content-Length over the
 * limit is refused before this.
 */
function readBody(req: IncomingMessage, limit: number): Promise<string | undefined> {
  return readLimited(req, limit).then(
    (bytes) => bytes?.toString("utf8"),
    () => {
      throw new ApiError(
        499,
        "invalid_request_error",
        "client_closed",
        "the client went away while sending the request",
      );
    },
  );
}
