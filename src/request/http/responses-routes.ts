/**
 * The stored responses of the Responses API door (src/request/responses-api), on Fastify:
 * - `GET /v1/responses/:id`: the response object as it was answered;
 * - `DELETE /v1/responses/:id`: forgets it (`{id, object: "response", deleted: true}`); a chain
 *   that went through it can no longer be continued;
 * - `GET /v1/responses/:id/input_items` (`limit` 1-100, default 20; `order` desc (default) or asc;
 *   `after` an item id): the input items the client sent with it, as a list page.
 * A response that is not kept (never stored: `store: false`; expired; deleted) is a 404
 * `response_not_found`. API keys are checked by the app's hook for every /v1/ route. Without a
 * response store (it could not be opened) nothing is registered: every such path is the app's 404.
 */
import type { FastifyInstance } from "fastify";
import type { ResponseStore } from "../../core/store/responses.js";
import { ApiError } from "../chat-api/errors.js";
import { sendApiError } from "./reply.js";

const notFound = (id: string) =>
  new ApiError(
    404,
    "invalid_request_error",
    "response_not_found",
    `Response with id '${id}' not found. Only responses created with store: true (the default) are kept, for server.responses.keepDays days and up to server.responses.maxStored of them.`,
    "response_id",
  );

type IdParams = { Params: { id: string } };

export function registerResponsesRoutes(app: FastifyInstance, deps: { store?: ResponseStore }): void {
  const { store } = deps;
  if (!store) return;
  app.get<IdParams>("/v1/responses/:id", async (req, reply) => {
    const body = await store.body(req.params.id);
    if (body === undefined) return sendApiError(reply, notFound(req.params.id));
    return reply.code(200).type("application/json").send(body);
  });
  app.delete<IdParams>("/v1/responses/:id", async (req, reply) => {
    if (!(await store.delete(req.params.id))) return sendApiError(reply, notFound(req.params.id));
    return { id: req.params.id, object: "response", deleted: true };
  });
  app.get<IdParams & { Querystring: Record<string, string | undefined> }>(
    "/v1/responses/:id/input_items",
    async (req, reply) => {
      const items = await store.input(req.params.id);
      if (!items) return sendApiError(reply, notFound(req.params.id));
      const q = req.query;
      const limit = q.limit === undefined ? 20 : Number(q.limit);
      if (!Number.isInteger(limit) || limit < 1 || limit > 100)
        return sendApiError(
          reply,
          new ApiError(
            400,
            "invalid_request_error",
            "invalid_value",
            "limit must be an integer from 1 to 100",
            "limit",
          ),
        );
      if (q.order !== undefined && q.order !== "asc" && q.order !== "desc")
        return sendApiError(
          reply,
          new ApiError(400, "invalid_request_error", "invalid_value", 'order must be "asc" or "desc"', "order"),
        );
      let list = q.order === "asc" ? items : [...items].reverse();
      if (q.after) {
        const at = list.findIndex((i) => (i as { id?: unknown } | null)?.id === q.after);
        list = at < 0 ? [] : list.slice(at + 1);
      }
      const data = list.slice(0, limit);
      const idOf = (i: unknown) => ((i as { id?: unknown } | null)?.id as string | undefined) ?? null;
      return {
        object: "list",
        data,
        first_id: data.length ? idOf(data[0]) : null,
        last_id: data.length ? idOf(data[data.length - 1]) : null,
        has_more: list.length > limit,
      };
    },
  );
}
