/**
 * The backend contract, enforced at the boundary for every turn whatever the backend:
 * - exactly one terminal event (`done` or `error`), and nothing after it;
 * - a thrown exception becomes an error event instead of a crash;
 * - a stream that ends without a terminal event becomes an error event (never an empty success);
 * - a turn that finishes without usage gets counted usage (real tokenizer), marked `estimated`;
 * - the turn's one deadline: when it passes, the turn's cancellation is aborted with a
 *   `TurnDeadline` and the turn ends with `backend_timeout` (504, retryable), whatever the
 *   backend called the stop.
 */
import type { Backend, BackendError, BackendEvent, TurnInput } from "../../backends/contract/backend.js";
import { TurnDeadline, type Cancellation } from "../../core/util/cancel.js";
import { countTokens } from "./usage.js";

/**
 * Start the turn's deadline: after `seconds`, `cancel` is aborted with a `TurnDeadline`. Returns
 * the function that disarms it (call it when the turn ends). No deadline without `seconds`.
 */
export function armDeadline(cancel: Cancellation, seconds: number | undefined): () => void {
  if (!seconds || seconds <= 0 || !Number.isFinite(seconds)) return disarmed;
  const timer = setTimeout(() => cancel.abort(new TurnDeadline(seconds)), seconds * 1000);
  return () => clearTimeout(timer);
}
const disarmed = () => {};

/** The error a turn ends with once its deadline passed. */
function deadlineError(backend: Backend, deadline: TurnDeadline, reported: BackendError): BackendError {
  if (reported.code === "backend_timeout") return reported; // the backend's own words (which upstream, which limit)
  return {
    code: "backend_timeout",
    message: `${backend.name} did not finish within ${deadline.seconds}s and was stopped`,
    status: 504,
    retryable: true,
  };
}

/** `backend.run(turn)` with the contract above enforced. `promptText` is read only to count usage. */
export async function* contract(
  backend: Backend,
  turn: TurnInput,
  promptText: () => string,
): AsyncGenerator<BackendEvent> {
  let sawUsage = false;
  let output = "";
  try {
    for await (const ev of backend.run(turn)) {
      switch (ev.type) {
        case "usage":
          sawUsage = true;
          break;
        case "text":
        case "reasoning":
          output += ev.text;
          break;
        case "tool_call":
          output += (ev.name ?? "") + ev.argumentsDelta;
          break;
        case "done":
          if (!sawUsage) {
            const promptTokens = await countTokens(promptText());
            const completionTokens = await countTokens(output);
            yield {
              type: "usage",
              usage: { promptTokens, completionTokens, totalTokens: promptTokens + completionTokens, estimated: true },
            };
          }
          yield ev;
          return;
        case "error": {
          const reason = turn.cancel.reason;
          yield reason instanceof TurnDeadline
            ? { type: "error", error: deadlineError(backend, reason, ev.error) }
            : ev;
          return;
        }
        default:
          break;
      }
      yield ev;
    }
    yield {
      type: "error",
      error: { code: "backend_failed", message: `backend "${backend.name}" ended without an answer`, status: 502 },
    };
  } catch (err) {
    yield {
      type: "error",
      error: {
        code: "backend_failed",
        message: `backend "${backend.name}" failed: ${(err as Error).message}`,
        status: 502,
      },
    };
  }
}
