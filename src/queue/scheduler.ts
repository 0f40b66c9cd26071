/**
 * Turn scheduling: turns of ONE conversation run strictly one at a time in arrival order; turns of
 * different conversations run in parallel up to `maxConcurrent`. Beyond that, turns wait in a
 * bounded queue (`maxQueue` places, `queueTimeoutMs` at most) and are then refused (HTTP 429).
 */

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

export class TurnScheduler {
  private running = 0;
  private waiting = 0;
  private readonly globalQueue: Waiter[] = [];
  private readonly tails = new Map<string, Promise<void>>();
  private recentDurations: number[] = [];

  constructor(private readonly opts: SchedulerOptions) {}

  stats() {
    return { running: this.running, waiting: this.waiting, conversations: this.tails.size, maxConcurrent: this.opts.maxConcurrent, maxQueue: this.opts.maxQueue };
  }

  /** Wait for this conversation's earlier turns, then for a free slot. */
  async acquire(key: string, signal: AbortSignal): Promise<Lease> {
    if (signal.aborted) throw new WaitAborted();
    const start = Date.now();
    if (this.waiting >= this.opts.maxQueue && (this.running >= this.opts.maxConcurrent || this.tails.has(key))) {
      throw new QueueRejected(`the bridge is busy: ${this.running} turns running and ${this.waiting} waiting`, this.retryAfter());
    }
    // Per-conversation FIFO: chain onto the previous turn of the same key.
    const prev = this.tails.get(key) ?? Promise.resolve();
    let releaseKey!: () => void;
    const mine = new Promise<void>((r) => (releaseKey = r));
    const tail = prev.then(() => mine);
    this.tails.set(key, tail);
    const dropKey = () => {
      releaseKey();
      if (this.tails.get(key) === tail) this.tails.delete(key);
    };

    this.waiting++;
    try {
      await abortable(prev, signal, this.opts.queueTimeoutMs, () => new QueueRejected(`this conversation's previous turn is still running after ${Math.round(this.opts.queueTimeoutMs / 1000)}s`, this.retryAfter()));
      await this.takeSlot(signal, start);
    } catch (err) {
      dropKey();
      throw err;
    } finally {
      this.waiting--;
    }
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
        dropKey();
      },
    };
  }

  private takeSlot(signal: AbortSignal, start: number): Promise<void> {
    if (this.running < this.opts.maxConcurrent && this.globalQueue.length === 0) {
      this.running++;
      return Promise.resolve();
    }
    const remaining = this.opts.queueTimeoutMs - (Date.now() - start);
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter = {
        grant: () => {
          cleanup();
          this.running++;
          resolve();
        },
        fail: (err) => {
          cleanup();
          reject(err);
        },
      };
      const timer = setTimeout(
        () => waiter.fail(new QueueRejected(`no free slot within ${Math.round(this.opts.queueTimeoutMs / 1000)}s (${this.running} turns running)`, this.retryAfter())),
        Math.max(0, remaining),
      );
      const onAbort = () => waiter.fail(new WaitAborted());
      const cleanup = () => {
        clearTimeout(timer);
        signal.removeEventListener("abort", onAbort);
        const i = this.globalQueue.indexOf(waiter);
        if (i >= 0) this.globalQueue.splice(i, 1);
      };
      signal.addEventListener("abort", onAbort, { once: true });
      this.globalQueue.push(waiter);
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

/** Wait for `p`, unless the signal aborts or `timeoutMs` passes first. */
function abortable(p: Promise<void>, signal: AbortSignal, timeoutMs: number, onTimeout: () => Error): Promise<void> {
  if (signal.aborted) return Promise.reject(new WaitAborted());
  return new Promise<void>((resolve, reject) => {
    const done = (fn: () => void) => {
      clearTimeout(timer);
      signal.removeEventListener("abort", onAbort);
      fn();
    };
    const onAbort = () => done(() => reject(new WaitAborted()));
    const timer = setTimeout(() => done(() => reject(onTimeout())), timeoutMs);
    signal.addEventListener("abort", onAbort, { once: true });
    p.then(
      () => done(resolve),
      (e) => done(() => reject(e)),
    );
  });
}
