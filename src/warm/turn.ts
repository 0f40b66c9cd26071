/**
 * One turn on a warm worker, the same for every CLI: lease the conversation's worker from the pool
 * (or start one), let the CLI's driver run the turn on it, and hand the worker back — kept when
 * the driver says it is fit for another turn, ended otherwise. A reused worker that died before the
 * turn produced anything is replaced by a cold run of the same turn; no lease (pool closed or full
 * of busy workers) means a cold run too. The backend contract holds: exactly one done or error.
 */
import type { BackendEvent } from "../contract/backend.js";
import { TurnDeadline } from "../util/cancel.js";
import type { WarmLease, WarmPool, WarmWorker } from "./pool.js";

/** How a driver's turn ended, for the pool. */
export interface WarmTurnEnd {
  /** The worker may serve another turn. */
  keep: boolean;
  /**
   * The worker's process ended before the turn produced any event, so the same turn may be run
   * cold instead (only honoured for a reused worker: a fresh one's failure is the CLI's answer).
   */
  lost?: boolean;
}

export interface WarmTurnSpec<W extends WarmWorker> {
  pool: WarmPool<W>;
  /** The conversation key (one worker per key). */
  key: string;
  /** Whether the conversation's current worker can serve this turn (same session, bootstrap, model...). */
  fits(worker: W): boolean;
  /** Start a new worker for this turn. */
  start(): Promise<W>;
  /** Run the turn on the worker: events ending with done/error, then whether to keep it. */
  drive(lease: WarmLease<W>): AsyncGenerator<BackendEvent, WarmTurnEnd>;
  /** The same turn with a new process of its own (the cold path). */
  cold(): AsyncGenerator<BackendEvent>;
  signal: AbortSignal;
  /** Told which worker serves the turn (the backend's `lastPid`). */
  onWorker?(worker: W): void;
}

export async function* runWarmTurn<W extends WarmWorker>(spec: WarmTurnSpec<W>): AsyncGenerator<BackendEvent> {
  let lease: WarmLease<W> | undefined;
  try {
    lease = await spec.pool.acquire(spec.key, (w) => spec.fits(w), () => spec.start(), spec.signal);
  } catch (err) {
    yield { type: "error", error: { code: "backend_unavailable", message: `cannot start the warm CLI: ${(err as Error).message}`, status: 503 } };
    return;
  }
  if (!lease) {
    if (spec.signal.aborted) {
      yield cancelledError(spec.signal, "the CLI");
      return;
    }
    yield* spec.cold();
    return;
  }
  spec.onWorker?.(lease.worker);
  let end: WarmTurnEnd = { keep: false };
  let finished = false;
  let lost = false;
  const gen = spec.drive(lease);
  try {
    for (;;) {
      const r = await gen.next();
      if (r.done) {
        end = r.value;
        finished = true;
        break;
      }
      yield r.value;
    }
    lost = !!end.lost && !lease.fresh;
  } finally {
    // The consumer stopped early: the driver's own finally runs first and interrupts the CLI's
    // turn — the worker stays if the CLI obeyed (else the driver killed it or marked it broken).
    if (!finished) await gen.return({ keep: false });
    lease.release((finished ? end.keep : true) && lease.worker.usable);
  }
  if (lost) yield* spec.cold();
}

/** The error of a turn ended by its cancellation: the deadline (`backend_timeout`) or an abort. */
export function cancelledError(signal: AbortSignal, label: string): BackendEvent {
  const reason: unknown = signal.reason;
  if (reason instanceof TurnDeadline) {
    return { type: "error", error: { code: "backend_timeout", message: `${label} did not finish within ${reason.seconds}s and was stopped`, status: 504, retryable: true } };
  }
  return { type: "error", error: { code: "aborted", message: "the turn was cancelled", status: 499 } };
}

/** A warm process that ended in the middle of a turn that had already produced output. */
export function diedMidTurn(label: string, detail: string): BackendEvent {
  return {
    type: "error",
    error: { code: "backend_failed", message: `${label} ended in the middle of the turn${detail ? `: ${detail}` : ""}`, status: 502, retryable: true },
  };
}
