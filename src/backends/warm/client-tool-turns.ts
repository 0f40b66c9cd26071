/**
 * The client's tools on a warm turn, the same for every CLI: a request that answers the calls a
 * suspended turn waits for resumes that turn (its CLI goes on into this response); otherwise the
 * call is answered with what happened instead, and the CLI goes on from that; a new turn whose
 * suspension, if its CLI calls a client tool, is kept in the conversation's `ToolSession`.
 *
 * The CLI's model is told what happened, never "the user rejected the tool" (what an interrupt
 * leaves in Claude Code's and Qwen Code's history):
 * - A new message from the person while a call waits: the call is answered (`isError`) with "no
 *   result: the person sent a new message instead", then the person's message, in the same tool
 *   result, and the turn is resumed into this response: the model reads that the tool was not
 *   answered and then the person's words, and answers them in one model call. No interrupt, no
 *   hidden reply, no second answer.
 * - The tool's result AND a new message in one request (OpenClaw sends both when the person types
 *   while a tool runs): the result resolves the call and the person's message follows it, as the
 *   next text in that same tool result (the next user message the CLI's API receives, after the
 *   result). Chosen over a second turn after the resumed one ends because that would either hide
 *   the first reply from the person or put two answers in one response, and because the resumed
 *   turn may call another tool before it ends, which would keep the person's message waiting
 *   behind it; this way the model sees the real result, then what the person said meanwhile, in
 *   the order it happened, and answers both at once (Claude Code itself hands a message typed
 *   during a tool to its model next to the tool's result).
 * - The pending timeout, a request that offers no tools: see `ToolSession.settle`.
 * - The same tool-result request sent again (a client's retry): its kept answer is replayed, or,
 *   when that was cut off or is too old, the CLI is asked to answer the results it already has
 *   again (`client-tools/replay.ts`); the results never reach its model twice.
 */
import type { ToolSession } from "../client-tools/sessions.js";
import { resultsKey } from "../client-tools/replay.js";
import { isBridgeCallId, type ClientToolResult, type ClientToolsTurn } from "../client-tools/types.js";
import type { BackendEvent } from "../contract/backend.js";
import type { WarmWorker } from "./pool.js";
import type { ParkedWarmTurn } from "./warm-turn.js";

/**
 * Said to the CLI before tool results that came for a call its turn no longer waits for (the turn
 * timed out, its process ended, or the bridge restarted in between): they arrive as text.
 */
export const LATE_RESULTS_NOTE =
  "(The results below are for tool calls you made earlier. Your turn that asked for them had already ended — the wait timed out or the bridge restarted — so they arrive here as text. Go on from them.)";

export interface ClientToolsWarmTurn {
  session: ToolSession;
  spec: ClientToolsTurn;
  /** The backend's name (a suspended turn belongs to one backend). */
  backend: string;
  signal: AbortSignal;
  /** The CLI goes on with a session it already has (else a new one starts, seeded from the request). */
  continuing: boolean;
  /** The turn's own text, as the pipeline built it. */
  text: string;
  /** A new warm turn; `text`, when given, is what the CLI is sent instead of the turn's own text. */
  fresh(text?: string): AsyncGenerator<BackendEvent>;
}

export async function* warmTurnWithClientTools(t: ClientToolsWarmTurn): AsyncGenerator<BackendEvent> {
  const { session, spec } = t;
  session.tools = spec.tools;
  const key = resultsKey(spec);
  const before = session.answerTo(key);
  if (before?.replayable()) {
    // The same request again (the client retried after a network error or a 5xx): the same answer.
    session.log.info({ conversation: session.key }, "tool results sent again: the answer is replayed, no model call");
    yield* before.replay();
    return;
  }
  if (!before && session.waitingOn === t.backend) {
    if (spec.results.length) {
      const problem = session.check(spec.results);
      if (problem) {
        yield { type: "error", error: { code: "backend_rejected", message: problem, status: 400 } };
        return;
      }
      const suspended = session.take();
      if (suspended) {
        session.answer(spec.results);
        yield* session.recordAnswer(key, suspended.resume(t.signal));
        return;
      }
    }
    const both = spec.resultsThenMessage;
    if (both && !session.check(both.results)) {
      // The result, then the person's new message: the call resolved, the message read after it.
      const suspended = session.take();
      if (suspended) {
        session.answer(both.results, personSaid(both.message));
        yield* session.recordAnswer(key, suspended.resume(t.signal));
        return;
      }
    }
    if (!spec.results.length && t.continuing && t.text.trim()) {
      // Only the person's new message: the call is answered saying so, then their message.
      const suspended = session.take();
      if (suspended) {
        session.answerInstead(`${NEW_MESSAGE_INSTEAD}\n\n${personSaid(t.text)}`);
        yield* suspended.resume(t.signal);
        return;
      }
    }
  }
  await session.endSuspended(
    before
      ? "No result: the client sent an earlier request again instead of this call's result, so this call was given up."
      : "No result: the conversation went on with a new message before the result came, so this call was given up.",
  );
  if (before && t.continuing) {
    // Sent again, but its answer cannot be replayed (cut off, or no longer kept): the CLI's session
    // already holds the results, so it is asked to answer them again, not given them twice.
    session.log.info({ conversation: session.key }, "tool results sent again: the CLI answers them again");
    yield* session.recordAnswer(key, t.fresh(before.answerAgainText()));
    return;
  }
  // Results of calls of ours that no turn waits for any more: a session the CLI goes on with holds
  // the person's message and its own call, so only the results go, as text; a new session (the old
  // one was lost) gets the conversation from the request as usual, after the note.
  const late = spec.results.some((r) => isBridgeCallId(r.id));
  yield* t.fresh(
    !late ? undefined : t.continuing ? lateResultsText(spec.results) : `${LATE_RESULTS_NOTE}\n\n${t.text}`,
  );
}

/** A pending call's answer when the person wrote instead of the client answering it. */
export const NEW_MESSAGE_INSTEAD =
  "No result: the person sent a new message instead, so the client did not answer this tool call and its outcome is unknown (do not assume it ran).";

/** The person's message as the CLI's model reads it after a tool result. */
export const personSaid = (message: string): string =>
  `The person sent a new message while this tool call was pending; it is their next message to you:\n\n${message}`;

/** Each result's text is kept to this many characters when it arrives late, as text. */
const LATE_RESULT_CHARS = 16_000;

export function lateResultsText(results: readonly ClientToolResult[]): string {
  const parts = results.map((r) => {
    const text = r.text.length > LATE_RESULT_CHARS ? `${r.text.slice(0, LATE_RESULT_CHARS)} […]` : r.text;
    return `TOOL RESULT${r.name ? ` (${r.name})` : ""}:\n${text}`;
  });
  return [LATE_RESULTS_NOTE, ...parts].join("\n\n");
}

/** What `runWarmTurn` calls when the driver parks: keep the turn in the session until the client answers. */
export function parkIn<W extends WarmWorker>(
  session: ToolSession,
  backend: string,
  timeoutSeconds: number,
): (p: ParkedWarmTurn<W>) => void {
  return (p) => {
    session.suspend(p, backend, timeoutSeconds);
    void p.gone.then(() => session.gone(p, "The agent's CLI process ended while this tool call was pending."));
  };
}
