/**
 * The non-streamed Responses answer: the backend's events collected into one `response` object.
 * It runs the streaming dialect (src/request/responses-api/dialect.ts) and keeps its final object
 * (parsed back from the JSON the stream would send; this path is not the per-token one) instead
 * of its frames, so a JSON answer, a stream and `GET /v1/responses/:id` can never disagree
 * about the output items (ids, call ids, namespaces, freeform calls). A failure is returned, not
 * thrown: the door runner answers it as an HTTP error (OpenAI-shaped).
 */
import type { BackendError, BackendEvent, FinishReason, Usage } from "../../backends/contract/backend.js";
import type { ResponsesDialect } from "./dialect.js";

/** The response object, or the failure (the door runner's `Collected`, src/request/http/door.ts). */
export type CollectedResponse = { ok: true; body: object } | { ok: false; error: BackendError };

const STOPPED = "the backend stopped without finishing its answer";

export async function collectResponse(
  events: AsyncIterable<BackendEvent>,
  dialect: ResponsesDialect,
): Promise<CollectedResponse> {
  let usage: Usage | undefined;
  let sawToolCall = false;
  dialect.open();
  for await (const ev of events) {
    switch (ev.type) {
      case "error":
        return { ok: false, error: ev.error };
      case "done": {
        const reason: FinishReason = sawToolCall && ev.finishReason === "stop" ? "tool_calls" : ev.finishReason;
        dialect.finish(reason, usage);
        const r = dialect.result;
        if (!r) break;
        return { ok: true, body: JSON.parse(r.json) as object };
      }
      case "usage":
        usage = ev.usage;
        break;
      case "tool_call":
        sawToolCall = true;
        dialect.event(ev);
        break;
      case "text":
        if (ev.text) dialect.event(ev);
        break;
      default:
        dialect.event(ev);
    }
  }
  return { ok: false, error: { code: "backend_failed", message: STOPPED, status: 502 } };
}
