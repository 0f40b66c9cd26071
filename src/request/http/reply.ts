/** An ApiError as the HTTP answer (OpenAI-shaped body, its headers), for the Fastify routes. */
import type { FastifyReply } from "fastify";
import type { ApiError } from "../chat-api/errors.js";

export function sendApiError(reply: FastifyReply, err: ApiError): FastifyReply {
  for (const [k, v] of Object.entries(err.headers)) void reply.header(k, v);
  return reply.code(err.status).type("application/json").send(err.body());
}
