/**
 * Turn scheduling: turns of ONE conversation run strictly one at a time in arrival order; turns of
 * different conversations run in parallel up to `maxConcurrent`. Beyond that, turns wait in a
 * bounded queue (`maxQueue` places, `queueTimeoutMs` at most) and are then refused (HTTP 429).
 */

import { onAbort, type Abortable } from "../util/cancel.js";

export class QueueRejected extends Error {
  constructor(
    message: string,
    readonly retryAfterSeconds: number,
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
}

interface Waiter {
  grant: () => void;
  fail: (err: Error) => void;
}

/** A conversation with a turn in progress: the turn that owns it, and its later turns in order. */
interface KeyState {
  waiters: Waiter[];
}

export class TurnScheduler {
  private running = 0;
  private waiting = 0;
  private readonly globalQueue: Waiter[] = [];
  /** Conversations with a turn running or waiting for a slot (the owner); later turns queue here. */
  private readonly keys = new Map<string, KeyState>();
  private recentDurations: number[] = [];

  constructor(private readonly opts: SchedulerOptions) {}

  stats() {
    return { running: this.running, waiting: this.waiting, conversations: this.keys.size, maxConcurrent: this.opts.maxConcurrent, maxQueue: this.opts.maxQueue };
  }

  /** Wait for this conversation's earlier turns, then for a free slot. */
  async acquire(key: string, signal: Abortable): Promise<Lease> {
    if (signal.aborted) throw new WaitAborted();
    const start = Date.now();
    const state = this.keys.get(key);
    if (this.waiting >= this.opts.maxQueue && (this.running >= this.opts.maxConcurrent || state)) {
      throw new QueueRejected(`the bridge is busy: ${this.running} turns running and ${this.waiting} waiting`, this.retryAfter());
    }
    // The common case: the conversation is idle and a slot is free — no waiting, no timer.
    if (!state && this.running < this.opts.maxConcurrent && this.globalQueue.length === 0) {
      this.keys.set(key, { waiters: [] });
      this.running++;
      return this.lease(key, start);
    }
    this.waiting++;
    let owner = false;
    try {
      if (state) await this.waitForKey(state, signal);
      else this.keys.set(key, { waiters: [] });
      owner = true;
      await this.takeSlot(signal, start);
    } catch (err) {
      if (owner) this.handOver(key);
      throw err;
    } finally {
      this.waiting--;
    }
    return this.lease(key, start);
  }

  private lease(key: string, start: number): Lease {
    const started = Date.now();
    let released = false;
    return {
      waitedMs: started - start,
      release: () => {
        if (released) return;
        released = true;
        this.recordDuration(Date.now() - started);
        this.running--;
        this.grantNext();
        this.handOver(key);
      },
    };
  }

  /** The owner of `key` is done (or gave up): its next turn owns the conversation now. */
  private handOver(key: string): void {
    const state = this.keys.get(key);
    if (!state) return;
    const next = state.waiters.shift();
    if (next) next.grant();
    else this.keys.delete(key);
  }

  /** Queue behind the conversation's earlier turns (at most queueTimeoutMs, or until aborted). */
  private waitForKey(state: KeyState, signal: Abortable): Promise<void> {
    return this.enqueue(state.waiters, signal, this.opts.queueTimeoutMs, () => new QueueRejected(`this conversation's previous turn is still running after ${Math.round(this.opts.queueTimeoutMs / 1000)}s`, this.retryAfter()));
  }

  private takeSlot(signal: Abortable, start: number): Promise<void> {
    if (this.running < this.opts.maxConcurrent && this.globalQueue.length === 0) {
      this.running++;
      return Promise.resolve();
    }
    const remaining = this.opts.queueTimeoutMs - (Date.now() - start);
    return this.enqueue(
      this.globalQueue,
      signal,
      remaining,
      () => new QueueRejected(`no free slot within ${Math.round(this.opts.queueTimeoutMs / 1000)}s (${this.running} turns running)`, this.retryAfter()),
      () => this.running++,
    );
  }

  /**
   * Wait in `queue` until granted (`onGrant` runs at that moment), for at most `timeoutMs` and
   * until the signal aborts. The waiter leaves the queue however it ends.
   */
  private enqueue(queue: Waiter[], signal: Abortable, timeoutMs: number, timeoutError: () => Error, onGrant?: () => void): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      let stopListening = () => {};
      const cleanup = () => {
        clearTimeout(timer);
        stopListening();
        const i = queue.indexOf(waiter);
        if (i >= 0) queue.splice(i, 1);
      };
      const waiter: Waiter = {
        grant: () => {
          cleanup();
          onGrant?.();
          resolve();
        },
        fail: (err) => {
          cleanup();
          reject(err);
        },
      };
      const timer = setTimeout(() => waiter.fail(timeoutError()), Math.max(0, timeoutMs));
      queue.push(waiter);
      // Last: a signal that has already aborted fails the waiter at once.
      stopListening = onAbort(signal, () => waiter.fail(new WaitAborted()));
    });
  }

  private grantNext(): void {
    while (this.running < this.opts.maxConcurrent && this.globalQueue.length) {
      this.globalQueue[0]!.grant();
    }
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
