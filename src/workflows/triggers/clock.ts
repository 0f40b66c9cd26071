/** The time and the one timer the schedules use: the real ones, or a test's fake clock. */
export interface Clock {
  now(): number;
  /** Call `fn` after `ms` (a fake clock may wait for the promise it returns); returns what cancels it. */
  setTimer(fn: () => void | Promise<void>, ms: number): () => void;
}

export const realClock: Clock = {
  now: () => Date.now(),
  setTimer(fn, ms) {
    const t = setTimeout(fn, ms);
    // A schedule never keeps the process alive on its own.
    t.unref();
    return () => clearTimeout(t);
  },
};
