/**
 * `GET /metrics`: the Prometheus text exposition of src/ops/metrics/metrics.ts.
 *
 * Not registered when `metrics.enabled` is false (or no metrics were built): the path is then 404
 * like any unknown route. With `metrics.requireKey` (the default when `server.apiKeys` is set) it
 * needs one of the keys, as `Authorization: Bearer <key>` (Prometheus' `authorization` or
 * `bearer_token` settings) or `x-api-key`; without it, 401 with `www-authenticate: Bearer`.
 */
import type { FastifyInstance } from "fastify";
import type { BridgeMetrics } from "../../ops/metrics/metrics.js";
import { unauthorized } from "../chat-api/errors.js";
import { ApiKeys } from "./auth.js";
import { sendApiError } from "./reply.js";

export const METRICS_PATH = "/metrics";

export function registerMetricsRoute(
  app: FastifyInstance,
  deps: { metrics?: BridgeMetrics; keys: ApiKeys; requireKey: boolean },
): void {
  const { metrics, keys, requireKey } = deps;
  if (!metrics) return;
  app.get(METRICS_PATH, async (req, reply) => {
    if (requireKey && !keys.check(ApiKeys.presented(req.headers))) {
      void reply.header("www-authenticate", "Bearer");
      return sendApiError(reply, unauthorized());
    }
    const text = await metrics.text();
    return reply.code(200).header("cache-control", "no-store").type(metrics.contentType).send(text);
  });
}
