/** Driving a backend's `run()` directly in tests: a turn input, the collected events, and checks. */
import assert from "node:assert/strict";
import { readdirSync, statSync } from "node:fs";
import path from "node:path";
import type { Backend, BackendEvent, TurnInput } from "../../src/backends/contract/backend.js";
import { armDeadline, contract } from "../../src/request/pipeline/enforce-contract.js";
import { Cancellation } from "../../src/core/util/cancel.js";
import { chatRequestSchema } from "../../src/request/chat-api/schema.js";

/**
 * One turn as the pipeline hands it to a backend. `resume` (default true): the pipeline keeps the
 * conversation's backend session (resume mode); false: a stateless turn.
 */
export function turnInput(
  key: string,
  text: string,
  opts: {
    system?: string;
    sessionId?: string;
    signal?: AbortSignal;
    model?: string;
    cwd?: string;
    resume?: boolean;
  } = {},
): TurnInput {
  const { cancel } = Cancellation.follow(opts.signal ?? new AbortController().signal);
  return {
    model: opts.model ?? "default",
    prompt: { system: opts.system ?? "", text },
    request: chatRequestSchema.parse({ model: "backend-test", messages: [{ role: "user", content: text }] }),
    session: {
      key,
      backendSessionId: opts.sessionId,
      turn: opts.sessionId ? 1 : 0,
      ...(opts.cwd ? { cwd: opts.cwd } : {}),
      ...(opts.resume === false ? {} : { resume: true }),
    },
    cancel,
    get signal() {
      return cancel.signal;
    },
  };
}

/**
 * A backend's turn the way the pipeline runs it: under the backend contract and the turn's one
 * deadline (`backend.timeoutSeconds`), both the pipeline's own code (src/request/pipeline/enforce-contract.ts).
 */
export async function* guardedRun(backend: Backend, turn: TurnInput): AsyncGenerator<BackendEvent> {
  const disarm = armDeadline(turn.cancel, backend.timeoutSeconds);
  try {
    yield* contract(backend, turn, () => `${turn.prompt.system}\n${turn.prompt.text}`);
  } finally {
    disarm();
  }
}

/** Every event of a run (bounded). */
export async function collect(it: AsyncIterable<BackendEvent>, max = 5000): Promise<BackendEvent[]> {
  const out: BackendEvent[] = [];
  for await (const ev of it) {
    out.push(ev);
    if (out.length >= max) throw new Error("too many events");
  }
  return out;
}

export const textOf = (evs: BackendEvent[]) => evs.flatMap((e) => (e.type === "text" ? [e.text] : [])).join("");
export const sessionOf = (evs: BackendEvent[]) =>
  evs.find((e): e is Extract<BackendEvent, { type: "session" }> => e.type === "session")?.id;
export const errorOf = (evs: BackendEvent[]) =>
  evs.find((e): e is Extract<BackendEvent, { type: "error" }> => e.type === "error")?.error;

/** The backend contract: exactly one done/error, and it is the last event. */
export function assertEndsOnce(evs: BackendEvent[]): void {
  const ends = evs.filter((e) => e.type === "done" || e.type === "error");
  assert.equal(ends.length, 1, `exactly one done/error: ${JSON.stringify(evs.map((e) => e.type))}`);
  assert.equal(evs.at(-1), ends[0], "done/error is the last event");
}

/** True when no process `pid` exists any more (it was ended and reaped). */
export function pidGone(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return false;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "ESRCH";
  }
}

/** Files (not folders) below `root` whose name `match`es (a bounded walk; a missing root has none). */
export function findFiles(root: string, match: (name: string) => boolean, depth = 6): string[] {
  const out: string[] = [];
  if (depth < 0) return out;
  let entries: string[];
  try {
    entries = readdirSync(root);
  } catch {
    return out;
  }
  for (const e of entries) {
    const p = path.join(root, e);
    if (statSync(p).isDirectory()) out.push(...findFiles(p, match, depth - 1));
    else if (match(e)) out.push(p);
  }
  return out;
}
