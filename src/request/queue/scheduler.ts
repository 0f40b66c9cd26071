/**
 * Turn scheduling: turns of ONE conversation run strictly one at a time in arrival order; turns of
 * different conversations run in parallel up to `maxConcurrent`. Beyond that, turns wait in a
 * bounded queue (`maxQueue` places in all, `maxQueuedPerConversation` of them per conversation,
 * `queueTimeoutMs` at most) and are then refused (HTTP 429).
 *
 * Fairness, for the slots: a free slot goes to the conversations that have a waiting turn in turn
 * (round-robin, the one that has waited longest first), not to the turns in global arrival order. A
 * conversation whose turn ends and that has another turn waiting joins the end of that round, behind
 * the conversations already waiting. Since a conversation runs one turn at a time, its backlog only
 * holds places other conversations could use: `maxQueuedPerConversation` bounds it (a flooding
 * conversation is refused, the others are not).
 *
 * Fairness, for the places in the queue: a client that honours Retry-After is not in the queue while
 * it sleeps, and a client that resends at once would take every place that frees meanwhile. So a
 * conversation refused because the queue is full keeps a place (a reservation, in refusal order): a
 * place that frees goes to the oldest reservation, and a conversation without one is refused while
 * every free place is reserved. Its Retry-After is the time by which enough places will have freed
 * for it (the places it needs × one recent average turn ÷ `maxConcurrent`, rounded up to whole
 * seconds, 1..60); coming back then, it gets in. A reservation lapses when its conversation gets in,
 * or when it has not come back within its Retry-After plus as long again (at least 2 s); a
 * conversation that comes back too early is refused again and keeps its place in line.
 *
 * The common case — the conversation is idle and a slot is free — is granted at once: no timer,
 * no listener, no waiter.
 */

import { onAbort, type Abortable } from "../../core/util/cancel.js";

export class QueueRejected extends Error {
  constructor(
    message: string,
    readonly retryAfterSeconds: number,
    /**
     * What is full: the whole bridge (`maxQueue` turns waiting, or no slot within the queue
     * timeout), or only this conversation (`maxQueuedPerConversation` turns waiting, or its
     * previous turn still running after the queue timeout).
     */
    readonly scope: "bridge" | "conversation" = "bridge",
  ) {
    super(message);
    this.name = "QueueRejected";
  }
}

export class WaitAborted extends Error {
  constructor() {
    super("the client went away while the turn was waiting");
    this.name = "WaitAborted";
  }
}

export interface Lease {
  /** Milliseconds spent waiting (conversation + global). */
  waitedMs: number;
  release(): void;
}

export interface SchedulerOptions {
  maxConcurrent: number;
  maxQueue: number;
  queueTimeoutMs: number;
  /** Turns of one conversation that may wait (behind its running turn or for a slot); default 2. */
  maxQueuedPerConversation?: number;
}

export const DEFAULT_MAX_QUEUED_PER_CONVERSATION = 2;

/** At most this many reservations are kept (one per conversation); beyond, a refusal keeps none. */
const MAX_RESERVATIONS = 1024;
/** A reservation lapses this long after its Retry-After at the least. */
const MIN_RESERVATION_GRACE_MS = 2000;

/** A place in the queue kept for a conversation refused because the queue was full. */
interface Reservation {
  /** When it lapses unless its conversation comes back. */
  until: number;
}

/** A waiting turn: `grant` gives it the slot (and its conversation), `fail` refuses it. */
interface Waiter {
  grant: () => void;
  fail: (err: Error) => void;
}

/**
 * A conversation with a turn running or waiting. It is in the round (`TurnScheduler.round`)
 * exactly when no turn of it runs and a turn of it waits: its first waiter is next for a slot.
 */
interface KeyState {
  running: boolean;
  /** Its waiting turns, oldest first. */
  waiters: Waiter[];
}

export class TurnScheduler {
  private running = 0;
  private waiting = 0;
  /** Conversations with a turn running or waiting. */
  private readonly keys = new Map<string, KeyState>();
  /** Conversations waiting for a slot, in the order they get one (round-robin). */
  private readonly round: KeyState[] = [];
  /** Conversations refused for want of a place, oldest first: the next free places are theirs. */
  private readonly reservations = new Map<string, Reservation>();
  private readonly perConversation: number;
  private recentDurations: number[] = [];

  constructor(private readonly opts: SchedulerOptions) {
    this.perConversation = opts.maxQueuedPerConversation ?? DEFAULT_MAX_QUEUED_PER_CONVERSATION;
  }

  stats() {
    return {
      running: this.running,
      waiting: this.waiting,
      conversations: this.keys.size,
      maxConcurrent: this.opts.maxConcurrent,
      maxQueue: this.opts.maxQueue,
    };
  }

  /** Conversations holding a place in the queue (refused while it was full, not yet back). */
  reserved(): number {
    this.pruneReservations(Date.now());
    return this.reservations.size;
  }

  /** Wait for this conversation's earlier turns, then for a free slot (the round's turn). */
  async acquire(key: string, signal: Abortable): Promise<Lease> {
    if (signal.aborted) throw new WaitAborted();
    const start = Date.now();
    let state = this.keys.get(key);
    // The common case: the conversation is idle and a slot is free — no waiting, no timer. (The
    // round is then empty: a slot that frees goes to the round at once.)
    if (!state && this.running < this.opts.maxConcurrent && this.round.length === 0) {
      state = { running: true, waiters: [] };
      this.keys.set(key, state);
      this.running++;
      if (this.reservations.size) this.reservations.delete(key);
      return this.lease(key, state, start);
    }
    const queued = state ? state.waiters.length : 0;
    if (queued >= this.perConversation) {
      throw new QueueRejected(
        `this conversation already has ${queued} turn${queued === 1 ? "" : "s"} waiting, the most one conversation may have (server.maxQueuedPerConversation: ${this.perConversation})`,
        this.retryAfter(),
        "conversation",
      );
    }
    // A place is free for this turn when the places kept for conversations refused before it (all
    // the reservations, or those older than its own) leave one.
    const ahead = this.reservedAhead(key, start);
    if (this.waiting + ahead >= this.opts.maxQueue) {
      const retryAfter = this.reserve(key, ahead, start);
      throw new QueueRejected(
        `the bridge is busy: ${this.running} turns running and ${this.waiting} waiting${ahead ? ` (${ahead} more place${ahead === 1 ? "" : "s"} kept for conversations refused earlier)` : ""}`,
        retryAfter,
      );
    }
    if (this.reservations.size) this.reservations.delete(key);
    if (!state) {
      state = { running: false, waiters: [] };
      this.keys.set(key, state);
    }
    await this.wait(key, state, signal);
    return this.lease(key, state, start);
  }

  private lease(key: string, state: KeyState, start: number): Lease {
    const started = Date.now();
    let released = false;
    return {
      waitedMs: started - start,
      release: () => {
        if (released) return;
        released = true;
        this.recordDuration(Date.now() - started);
        this.running--;
        state.running = false;
        // Its next turn waits for a slot behind the conversations already waiting.
        if (state.waiters.length) this.round.push(state);
        else this.keys.delete(key);
        this.grantFree();
      },
    };
  }

  /**
   * Wait in the conversation's queue until this turn is first in it, no turn of the conversation
   * runs and the round gives it a free slot; at most queueTimeoutMs from now, and until the signal
   * aborts. The waiter leaves the queue (and the conversation the round) however it ends.
   */
  private wait(key: string, state: KeyState, signal: Abortable): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      let stopListening = () => {};
      const leave = () => {
        clearTimeout(timer);
        stopListening();
        const i = state.waiters.indexOf(waiter);
        if (i < 0) return;
        state.waiters.splice(i, 1);
        this.waiting--;
        if (state.waiters.length === 0 && !state.running) {
          const r = this.round.indexOf(state);
          if (r >= 0) this.round.splice(r, 1);
          this.keys.delete(key);
        }
      };
      const waiter: Waiter = {
        grant: () => {
          state.running = true; // first: the conversation stays while its turn runs
          leave();
          this.running++;
          resolve();
        },
        fail: (err) => {
          leave();
          reject(err);
        },
      };
      const timer = setTimeout(
        () => waiter.fail(this.timeoutError(state, waiter)),
        Math.max(0, this.opts.queueTimeoutMs),
      );
      state.waiters.push(waiter);
      this.waiting++;
      if (!state.running && state.waiters.length === 1) this.round.push(state);
      // Last: a signal that has already aborted fails the waiter at once.
      stopListening = onAbort(signal, () => waiter.fail(new WaitAborted()));
      this.grantFree();
    });
  }

  /** Free slots go to the conversations of the round, first come first served, one turn each. */
  private grantFree(): void {
    while (this.running < this.opts.maxConcurrent && this.round.length) {
      this.round.shift()!.waiters[0]!.grant();
    }
  }

  /** Why a waiter timed out: behind its own conversation, or for want of a free slot. */
  private timeoutError(state: KeyState, waiter: Waiter): QueueRejected {
    const seconds = Math.round(this.opts.queueTimeoutMs / 1000);
    if (state.running || state.waiters[0] !== waiter) {
      return new QueueRejected(
        `this conversation's previous turn is still running after ${seconds}s`,
        this.retryAfter(),
        "conversation",
      );
    }
    return new QueueRejected(`no free slot within ${seconds}s (${this.running} turns running)`, this.retryAfter());
  }

  /**
   * Drop lapsed reservations, then count the places kept for other conversations ahead of `key`:
   * those refused before it if it holds a reservation, all of them if it does not.
   */
  private reservedAhead(key: string, now: number): number {
    if (this.reservations.size === 0) return 0;
    this.pruneReservations(now);
    let ahead = 0;
    for (const k of this.reservations.keys()) {
      if (k === key) return ahead;
      ahead++;
    }
    return ahead;
  }

  private pruneReservations(now: number): void {
    for (const [k, r] of this.reservations) if (r.until <= now) this.reservations.delete(k);
  }

  /**
   * Keep (or keep holding) a place for `key`, behind the `ahead` reservations before it, and return
   * the seconds after which it will find one: each waiting turn granted frees a place, and a slot
   * frees about every average turn ÷ maxConcurrent. No reservation with no queue at all (maxQueue 0)
   * or too many kept already: then about one average turn, as before.
   */
  private reserve(key: string, ahead: number, now: number): number {
    const held = this.reservations.has(key);
    if (this.opts.maxQueue <= 0 || (!held && this.reservations.size >= MAX_RESERVATIONS)) return this.retryAfter();
    const needed = Math.max(1, this.waiting + ahead + 1 - this.opts.maxQueue);
    const perPlaceMs = this.averageTurnMs() / Math.max(1, this.opts.maxConcurrent);
    const seconds = Math.min(60, Math.max(1, Math.ceil((needed * perPlaceMs) / 1000)));
    const until = now + seconds * 1000 + Math.max(MIN_RESERVATION_GRACE_MS, seconds * 1000);
    const existing = this.reservations.get(key);
    if (existing)
      existing.until = until; // it keeps its place in line
    else this.reservations.set(key, { until });
    return seconds;
  }

  private averageTurnMs(): number {
    const d = this.recentDurations;
    return d.length ? d.reduce((a, b) => a + b, 0) / d.length : 5000;
  }

  private recordDuration(ms: number): void {
    this.recentDurations.push(ms);
    if (this.recentDurations.length > 20) this.recentDurations = this.recentDurations.slice(-20);
  }

  /** Seconds a refused client should wait: about one average turn, between 1 and 60. */
  retryAfter(): number {
    return Math.min(60, Math.max(1, Math.ceil(this.averageTurnMs() / 1000)));
  }
}
