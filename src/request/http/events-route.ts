/**
 * `GET /v1/events`: the bridge's event bus as Server-Sent Events (the hub: src/ops/events/hub.ts).
 *
 * - Behind the same bearer keys as every `/v1/*` route (app.ts's auth hook: 401 without the right key).
 * - `text/event-stream`; each event is `id: <n>`, `event: <type>`, `data: <json>`; a `: heartbeat`
 *   comment every `events.heartbeatSeconds`; `retry: 3000` for EventSource.
 * - Filters: `?conversation=`, `?run=`, `?system=` (comma-separated values), `?types=` (exact types
 *   or prefixes such as `turn.*,run.*`); a bad one is 400 naming the parameter.
 * - `Last-Event-ID` (or `?lastEventId=` where a client cannot send the header) replays the ring
 *   after that id (with PostgreSQL, the log every instance shares when the ring does not hold it),
 *   then the stream goes live without a gap or a duplicate; `event: gap` first when events after
 *   that id are no longer kept. Every event's data says which instance published it (`instance`).
 * - A watcher that does not read is dropped by the hub (`event: dropped`, then the connection
 *   closes); on shutdown every stream ends with `event: shutdown` (the bridge's `close()` ends the
 *   hub before it closes the connections, so an open stream never holds it up).
 */
import type { FastifyInstance } from "fastify";
import { FilterError, parseFilter, type EventFilter } from "../../ops/events/filter.js";
import { END_GRACE_MS, type EventHub, type EventSink, type Subscription } from "../../ops/events/hub.js";
import { ApiError, badRequest } from "../chat-api/errors.js";
import { sendApiError } from "./reply.js";

export const EVENTS_PATH = "/v1/events";

/** `Last-Event-ID`, or `?lastEventId=`: a non-negative integer, or undefined when absent; throws a 400. */
function lastEventId(header: string | string[] | undefined, query: unknown): number | undefined {
  const raw = (Array.isArray(header) ? header[0] : header) ?? (Array.isArray(query) ? query[0] : query);
  if (raw === undefined || raw === "") return undefined;
  const s = String(raw).trim();
  if (!/^\d{1,15}$/.test(s))
    throw badRequest(
      `Last-Event-ID must be an event id (a non-negative integer), not "${s.slice(0, 40)}".`,
      "invalid_last_event_id",
      "Last-Event-ID",
    );
  return Number(s);
}

export function registerEventsRoute(app: FastifyInstance, hub: EventHub | undefined): void {
  // In a plugin scope, so the app's auth hook (added after this call) applies.
  app.register(async (scope) => {
    scope.get(EVENTS_PATH, (req, reply) => {
      if (!hub)
        return sendApiError(
          reply,
          new ApiError(404, "not_found_error", "events_not_enabled", "The event stream is not enabled on this bridge."),
        );
      const query = (req.query ?? {}) as Record<string, unknown>;
      let filter: EventFilter;
      let after: number | undefined;
      try {
        filter = parseFilter(query);
        after = lastEventId(req.headers["last-event-id"], query.lastEventId);
      } catch (err) {
        if (err instanceof FilterError)
          return sendApiError(reply, badRequest(err.message, "invalid_filter", err.param));
        if (err instanceof ApiError) return sendApiError(reply, err);
        throw err;
      }
      reply.hijack();
      const res = reply.raw;
      // The connection closes with the stream (dropped, shut down): nothing follows an event stream on it.
      res.writeHead(200, {
        "content-type": "text/event-stream; charset=utf-8",
        "cache-control": "no-cache, no-transform",
        "x-accel-buffering": "no",
        connection: "close",
      });
      res.socket?.setNoDelay(true);
      let sub: Subscription | undefined;
      const sink: EventSink = {
        write: (chunk) => res.write(chunk),
        onDrain: (fn) => void res.once("drain", fn),
        end: (last) => {
          if (res.writableEnded) return;
          res.end(last);
          if (res.writableFinished) return;
          // The last frame may never leave a connection that does not drain: then it is cut.
          const timer = setTimeout(() => res.destroy(), END_GRACE_MS);
          timer.unref();
          res.once("close", () => clearTimeout(timer));
        },
      };
      res.once("close", () => sub?.close());
      try {
        sub = hub.subscribe(sink, filter, after);
      } catch {
        res.end(); // the hub is closed: the bridge is shutting down
      }
    });
  });
}
