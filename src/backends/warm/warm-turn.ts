/**
 * One turn on a warm worker, the same for every CLI: lease the conversation's worker from the pool
 * (or take a standby, or start one), let the CLI's driver run the turn on it, and hand the worker back — kept when
 * the driver says it is fit for another turn, ended otherwise. A reused worker that died before the
 * turn produced anything is replaced by a cold run of the same turn; no lease (pool closed or full
 * of busy workers) means a cold run too. The backend contract holds: exactly one done or error.
 */
import type { SuspendedTurn } from "../client-tools/types.js";
import type { BackendEvent } from "../contract/backend.js";
import { TurnDeadline } from "../../core/util/cancel.js";
import type { StandbyKind, WarmLease, WarmPool, WarmWorker } from "./pool.js";

/**
 * What a driver reads while it runs a turn, and what it sets to suspend it. A turn suspended on a
 * client tool call (`parked`, set just before its `done` with `tool_calls`) keeps its worker and
 * its generator, paused at that `done`; it goes on later into another response, whose
 * cancellation then replaces `signal`.
 */
export interface WarmTurnControl {
  signal: AbortSignal;
  parked: boolean;
}

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
  /**
   * The standbys that could serve this turn instead of a new worker (a new session without
   * per-conversation start-up parts); absent: none could.
   */
  standby?: StandbyKind<W>;
  /** Run the turn on the worker: events ending with done/error, then whether to keep it. */
  drive(lease: WarmLease<W>, ctl: WarmTurnControl): AsyncGenerator<BackendEvent, WarmTurnEnd>;
  /** The same turn with a new process of its own (the cold path). */
  cold(): AsyncGenerator<BackendEvent>;
  signal: AbortSignal;
  /** Told which worker serves the turn (the backend's `lastPid`). */
  onWorker?(worker: W): void;
  /** The driver suspended the turn on a client tool call: keep it (the worker stays leased). */
  onPark?(turn: ParkedWarmTurn<W>): void;
  /** The CLI keeps no result for a call its turn was interrupted on (`SuspendedTurn.answerFirst`). */
  answerFirst?: boolean;
}

export async function* runWarmTurn<W extends WarmWorker>(spec: WarmTurnSpec<W>): AsyncGenerator<BackendEvent> {
  let lease: WarmLease<W> | undefined;
  try {
    lease = await spec.pool.acquire(
      spec.key,
      (w) => spec.fits(w),
      () => spec.start(),
      spec.signal,
      spec.standby,
    );
  } catch (err) {
    yield {
      type: "error",
      error: {
        code: "backend_unavailable",
        message: `cannot start the warm CLI: ${(err as Error).message}`,
        status: 503,
      },
    };
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
  const ctl: WarmTurnControl = { signal: spec.signal, parked: false };
  const gen = spec.drive(lease, ctl);
  const park = () => spec.onPark?.(new ParkedWarmTurn(lease, gen, ctl, park, !!spec.answerFirst));
  const lost = yield* pump(lease, gen, ctl, park);
  if (lost) yield* spec.cold();
}

/**
 * Relay a driver's events, then hand the worker back — unless the driver parked the turn (it
 * yielded its `done` with `ctl.parked` set): then `park` is called BEFORE that `done` is passed on
 * (the client's next request must find the suspended turn), the generator stays paused there and
 * the worker leased. The consumer stopping early ends the driver (its own finally interrupts the
 * CLI's turn). Returns whether the turn was lost before any output (run it cold).
 */
async function* pump<W extends WarmWorker>(
  lease: WarmLease<W>,
  gen: AsyncGenerator<BackendEvent, WarmTurnEnd>,
  ctl: WarmTurnControl,
  park: () => void,
): AsyncGenerator<BackendEvent, boolean> {
  let end: WarmTurnEnd = { keep: false };
  let finished = false;
  let parked = false;
  try {
    for (;;) {
      const r = await gen.next();
      if (r.done) {
        end = r.value;
        finished = true;
        break;
      }
      if (r.value.type === "done" && ctl.parked) {
        parked = true;
        park();
        yield r.value;
        return false;
      }
      yield r.value;
    }
  } finally {
    if (!parked) {
      if (!finished) await gen.return({ keep: false });
      lease.release((finished ? end.keep : true) && lease.worker.usable);
    }
  }
  return !!end.lost && !lease.fresh;
}

/** How long an abandoned `answerFirst` turn may go on for its CLI to take the calls' answers in. */
const ANSWER_TAKEN_MS = 5000;

/**
 * A warm turn suspended on a client tool call (see `WarmTurnControl`): resumed into the next
 * response, or abandoned (the driver's finally interrupts the CLI's turn, the worker is handed
 * back). `gone` resolves when its process ends while it waits.
 */
export class ParkedWarmTurn<W extends WarmWorker> implements SuspendedTurn {
  private taken = false;
  readonly gone: Promise<void>;

  constructor(
    private readonly lease: WarmLease<W>,
    private readonly gen: AsyncGenerator<BackendEvent, WarmTurnEnd>,
    private readonly ctl: WarmTurnControl,
    /** Park it again (the resumed turn made another client tool call). */
    private readonly onPark: () => void,
    readonly answerFirst = false,
  ) {
    this.gone = lease.worker.ended;
  }

  async *resume(signal: AbortSignal): AsyncGenerator<BackendEvent> {
    if (this.take()) return;
    this.ctl.signal = signal;
    this.ctl.parked = false;
    yield* pump(this.lease, this.gen, this.ctl, this.onPark);
  }

  async abandon(): Promise<void> {
    if (this.take()) return;
    if (this.answerFirst && (await this.untilAnswerTaken())) return;
    const r = await this.gen.return({ keep: false }).catch(() => undefined);
    this.lease.release(!!r && this.lease.worker.usable);
  }

  /**
   * `answerFirst`: the calls were just answered (with an error) and the CLI must take the answers
   * into its history before its turn is ended, so the turn goes on, unseen, until the model speaks
   * again (its first text), the turn ends by itself, or `ANSWER_TAKEN_MS` pass (then it is
   * cancelled like an abort). True when it ended by itself (the worker was handed back).
   */
  private async untilAnswerTaken(): Promise<boolean> {
    this.ctl.parked = false;
    this.ctl.signal = AbortSignal.timeout(ANSWER_TAKEN_MS);
    try {
      for (let i = 0; i < 10_000; i++) {
        const r = await this.gen.next();
        if (r.done) {
          this.lease.release(r.value.keep && this.lease.worker.usable);
          return true;
        }
        if (r.value.type === "text" || r.value.type === "reasoning" || this.ctl.parked) return false;
      }
    } catch {
      /* the driver failed: ended below */
    }
    return false;
  }

  /** True when it was already resumed or abandoned. */
  private take(): boolean {
    const was = this.taken;
    this.taken = true;
    return was;
  }
}

/** The error of a turn ended by its cancellation: the deadline (`backend_timeout`) or an abort. */
export function cancelledError(signal: AbortSignal, label: string): BackendEvent {
  const reason: unknown = signal.reason;
  if (reason instanceof TurnDeadline) {
    return {
      type: "error",
      error: {
        code: "backend_timeout",
        message: `${label} did not finish within ${reason.seconds}s and was stopped`,
        status: 504,
        retryable: true,
      },
    };
  }
  return { type: "error", error: { code: "aborted", message: "the turn was cancelled", status: 499 } };
}

/** A warm process that ended in the middle of a turn that had already produced output. */
export function diedMidTurn(label: string, detail: string): BackendEvent {
  return {
    type: "error",
    error: {
      code: "backend_failed",
      message: `${label} ended in the middle of the turn${detail ? `: ${detail}` : ""}`,
      status: 502,
      retryable: true,
    },
  };
}
