/**
 * Turn scheduling: turns of ONE conversation run strictly one at a time in arrival order; turns of
 * different conversations run in parallel up to `maxConcurrent`. Beyond that, turns wait in a
 * bounded queue (`maxQueue` places in all, `maxQueuedPerConversation` of them per conversation,
 * `queueTimeoutMs` at most) and are then refused (HTTP 429).
 *
 * Fairness: a free slot goes to the conversations that have a waiting turn in turn (round-robin),
 * not to the turns in global arrival order. A conversation whose turn ends and that has another
 * turn waiting joins the end of that round, behind the conversations already waiting. Since a
 * conversation runs one turn at a time, its backlog only holds places other conversations could
 * use: `maxQueuedPerConversation` bounds it (a flooding conversation is refused, the others are
 * not).
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
    if (this.waiting >= this.opts.maxQueue) {
      throw new QueueRejected(
        `the bridge is busy: ${this.running} turns running and ${this.waiting} waiting`,
        this.retryAfter(),
      );
    }
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

  private recordDuration(ms: number): void {
    this.recentDurations.push(ms);
    if (this.recentDurations.length > 20) this.recentDurations = this.recentDurations.slice(-20);
  }

  /** Seconds a refused client should wait: about one average turn, between 1 and 60. */
  retryAfter(): number {
    const d = this.recentDurations;
    const avg = d.length ? d.reduce((a, b) => a + b, 0) / d.length : 5000;
    return Math.min(60, Math.max(1, Math.ceil(avg / 1000)));
  }
}
