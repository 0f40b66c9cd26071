/**
 * `POST /v1/hooks/:id`: an inbound hook starts a run of a system with `hook` set, the JSON body as
 * its inputs, and answers 202 with the run (src/wire/runs.ts `RunRow`). No bearer key: the app's
 * key check lets this route through (`isHooksRoute`) and the request is judged by its signature
 * alone (src/workflows/triggers/hooks.ts reads the raw body, the timestamp and the signature and
 * says why it refuses). Refusals are OpenAI-shaped (`{"error":{message,type,code,param}}`; a 429
 * carries Retry-After).
 */
import type { FastifyInstance } from "fastify";
import { ApiError, type ErrorType } from "../chat-api/errors.js";
import { sendApiError } from "./reply.js";
import { runJson } from "./systems-routes.js";
import type { RouterRuntimeHandle } from "../../workflows/router/runtime.js";

const BODY_LIMIT = 1024 * 1024;

const TYPES: Record<number, ErrorType> = {
  401: "authentication_error",
  404: "not_found_error",
  429: "rate_limit_error",
};

export function registerHooksRoute(app: FastifyInstance, systems: RouterRuntimeHandle | undefined): void {
  app.register(async (scope) => {
    // The signature covers the exact bytes sent: the body is kept as text, whatever its type says.
    scope.addContentTypeParser("*", { parseAs: "string", bodyLimit: BODY_LIMIT }, (_req, body, done) =>
      done(null, body),
    );
    scope.post<{ Params: { id: string }; Body: unknown }>("/v1/hooks/:id", async (req, reply) => {
      if (!systems)
        return sendApiError(
          reply,
          new ApiError(404, "not_found_error", "hook_not_found", "No systems are configured on this bridge."),
        );
      const header = (name: string) => {
        const v = req.headers[name];
        return Array.isArray(v) ? v[0] : v;
      };
      const res = await systems.triggers.hooks.receive(
        req.params.id,
        { timestamp: header("x-clawbridge-timestamp"), signature: header("x-clawbridge-signature") },
        typeof req.body === "string" ? req.body : "",
      );
      if (res.ok) return reply.code(202).send(runJson(res.run));
      const r = res.refusal;
      return sendApiError(
        reply,
        new ApiError(
          r.status,
          TYPES[r.status] ?? "invalid_request_error",
          r.code,
          r.message,
          r.param ?? null,
          r.retryAfter ? { "retry-after": String(r.retryAfter) } : {},
        ),
      );
    });
  });
}

/** Whether a request goes to this route (it reads a body, and needs no bearer key). */
export function isHooksRoute(method: string | undefined, url: string | undefined): boolean {
  return method === "POST" && !!url && url.startsWith("/v1/hooks/");
}
