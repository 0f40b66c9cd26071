/**
 * Answers to tool results, kept so that the same request sent again gets the same answer and the
 * CLI's model never reads the same results twice. OpenClaw and the OpenAI SDKs resend a request
 * after a network error or a 5xx; a tool-result request is not idempotent by itself (its results
 * would reach the model a second time and a second, different answer would come back).
 *
 * - A request's key (`resultsKey`) is a SHA-256 of its results (ids and texts, and the person's
 *   message when one follows them); only results that answer the bridge's own calls have one.
 * - `RecordedAnswer` keeps what the resumed CLI turn streamed. One that finished (`done`) is
 *   replayed, event for event, to a resend within `REPLAY_MS` (its usage marked `replayed`: no
 *   model was called for it). One that was cut off (the client went away, an error, more than
 *   `MAX_RECORDED_CHARS`) or is older is not replayed: the resend asks the CLI, in the session that
 *   already holds the results, to answer them again (`answerAgainText`), and that answer is kept.
 * - The keys stay as long as the conversation's tool session (so a late resend is recognised); the
 *   events are dropped once their window has passed.
 */
import { createHash } from "node:crypto";
import type { BackendEvent } from "../contract/backend.js";
import { isBridgeCallId, type ClientToolResult, type ClientToolsTurn } from "./types.js";

/** How long a finished answer is replayed to a resend of its request. */
export const REPLAY_MS = 10 * 60_000;
/** An answer larger than this (its texts and arguments) is not kept for replay. */
const MAX_RECORDED_CHARS = 2_000_000;

/**
 * The key of a request that answers the bridge's calls: its trailing results, or its results and
 * the person's message after them. Undefined when it carries no result for a call of ours.
 */
export function resultsKey(spec: Pick<ClientToolsTurn, "results" | "resultsThenMessage">): string | undefined {
  const both = spec.results.length ? undefined : spec.resultsThenMessage;
  const results: readonly ClientToolResult[] = both?.results ?? spec.results;
  if (!results.length || !results.every((r) => isBridgeCallId(r.id))) return undefined;
  const h = createHash("sha256");
  for (const r of results) h.update(`${r.id}\u0000${r.text}\u0000`);
  if (both) h.update(`\u0001${both.message}`);
  return h.digest("hex");
}

export class RecordedAnswer {
  private events: BackendEvent[] | undefined = [];
  private chars = 0;
  /** `done`: it finished normally; `cut`: it ended with an error or before its end. */
  ended: "done" | "cut" | undefined;
  endedAt = 0;

  /** Pass the answer's events on, keeping them. */
  async *record(src: AsyncGenerator<BackendEvent>): AsyncGenerator<BackendEvent> {
    try {
      for await (const ev of src) {
        this.keep(ev);
        if (ev.type === "done") this.ended ??= "done";
        else if (ev.type === "error") this.ended ??= "cut";
        yield ev;
      }
    } finally {
      this.ended ??= "cut";
      this.endedAt = Date.now();
    }
  }

  private keep(ev: BackendEvent): void {
    if (!this.events) return;
    this.chars += ev.type === "text" || ev.type === "reasoning" ? ev.text.length : 0;
    this.chars += ev.type === "tool_call" ? ev.argumentsDelta.length : 0;
    if (this.chars > MAX_RECORDED_CHARS) this.events = undefined;
    else this.events.push(ev);
  }

  /** Whether a resend gets this answer replayed. */
  replayable(now = Date.now()): boolean {
    return this.ended === "done" && !!this.events && now - this.endedAt < REPLAY_MS;
  }

  /** Drop the events once the window has passed (the key stays known). */
  expire(now = Date.now()): void {
    if (this.ended && now - this.endedAt >= REPLAY_MS) this.events = undefined;
  }

  /** The answer again; its usage marked `replayed` (the model was not asked again). */
  *replay(): Generator<BackendEvent> {
    for (const ev of this.events ?? [])
      yield ev.type === "usage" ? { type: "usage", usage: { ...ev.usage, replayed: true } } : ev;
  }

  /** What the CLI is told when a resend cannot be replayed and it must answer the results again. */
  answerAgainText(): string {
    const why =
      this.ended === "done"
        ? "it is no longer kept"
        : "your answer was cut off before it reached the person in full (the connection dropped or the turn failed)";
    return `(The client sent the same tool results again, which you already have above; ${why}. Do not run anything again for them: answer from those results once more.)`;
  }
}
