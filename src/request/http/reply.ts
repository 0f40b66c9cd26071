/**
 * An ApiError as the HTTP answer (OpenAI-shaped body, its headers), for the Fastify routes; and the
 * one check that a body holds only the fields a route takes (a field it does not know is a 400
 * naming it, never ignored).
 */
import type { FastifyReply } from "fastify";
import { ApiError } from "../chat-api/errors.js";

export function sendApiError(reply: FastifyReply, err: ApiError): FastifyReply {
  for (const [k, v] of Object.entries(err.headers)) void reply.header(k, v);
  return reply.code(err.status).type("application/json").send(err.body());
}

/** A 400 for the first field of `body` not in `known` (none known: the route takes no body fields). */
export function unknownField(body: Record<string, unknown>, known: readonly string[]): ApiError | undefined {
  const field = Object.keys(body).find((k) => !known.includes(k));
  if (field === undefined) return undefined;
  return new ApiError(
    400,
    "invalid_request_error",
    "unknown_field",
    known.length
      ? `Unknown field "${field}": this route takes ${known.map((k) => `\`${k}\``).join(", ")}.`
      : `Unknown field "${field}": this route takes no body fields.`,
    field,
  );
}
