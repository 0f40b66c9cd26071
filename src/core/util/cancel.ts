/**
 * A turn's cancellation, cheaper than an AbortController for the common turn that is never
 * cancelled (an AbortController per turn, and EventTarget listeners on it, showed in the
 * per-request CPU profile):
 * - listeners are plain functions in an array (`onAbort` returns the function that removes one);
 * - the standard `AbortSignal` is made only when something asks for it (`signal`: CLI backends
 *   hand it to their process, tools to `fetch`), and it follows this cancellation;
 * - it has the EventEmitter-like shape undici accepts as a request's `signal` (`aborted`,
 *   `reason`, `once`/`removeListener` of "abort"), so an upstream request can be stopped by it.
 */
export class Cancellation {
  aborted = false;
  reason: unknown = undefined;
  private listeners: Array<() => void> = [];
  private ctl?: AbortController;

  /** A standard signal that aborts with this cancellation (made on first use). */
  get signal(): AbortSignal {
    if (!this.ctl) {
      this.ctl = new AbortController();
      if (this.aborted) this.ctl.abort(this.reason);
    }
    return this.ctl.signal;
  }

  /** Call `fn` once when cancelled (at once if it already is). Returns the function that removes it. */
  onAbort(fn: () => void): () => void {
    if (this.aborted) {
      fn();
      return noop;
    }
    this.listeners.push(fn);
    return () => this.remove(fn);
  }

  abort(reason: unknown = new DOMException("This operation was aborted", "AbortError")): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    const fns = this.listeners;
    this.listeners = [];
    this.ctl?.abort(reason);
    for (const fn of fns) fn();
  }

  /** A cancellation that follows `signal` (and the function that stops following it). */
  static follow(signal: AbortSignal): { cancel: Cancellation; dispose: () => void } {
    const cancel = new Cancellation();
    if (signal.aborted) {
      cancel.abort(signal.reason);
      return { cancel, dispose: noop };
    }
    const onAbort = () => cancel.abort(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    return { cancel, dispose: () => signal.removeEventListener("abort", onAbort) };
  }

  // --- the EventEmitter-like interface undici uses for a request's `signal`: it requires `on`,
  // then listens with `once` and stops with `removeListener` ---
  once(event: string, fn: () => void): this {
    if (event === "abort") this.listeners.push(fn);
    return this;
  }
  on(event: string, fn: () => void): this {
    return this.once(event, fn);
  }
  removeListener(event: string, fn: () => void): this {
    if (event === "abort") this.remove(fn);
    return this;
  }

  private remove(fn: () => void): void {
    const i = this.listeners.indexOf(fn);
    if (i >= 0) this.listeners.splice(i, 1);
  }
}

/** Something that can be cancelled: a standard signal or a `Cancellation`. */
export type Abortable = AbortSignal | Cancellation;

/** Run `fn` once when `a` aborts (at once if it has); returns the function that removes it. */
export function onAbort(a: Abortable, fn: () => void): () => void {
  if (a instanceof Cancellation) return a.onAbort(fn);
  if (a.aborted) {
    fn();
    return noop;
  }
  a.addEventListener("abort", fn, { once: true });
  return () => a.removeEventListener("abort", fn);
}

const noop = () => {};

/**
 * The reason a turn is cancelled when its deadline passes. The pipeline owns the one turn
 * deadline (`src/request/pipeline/enforce-contract.ts`); a backend that sees its cancellation's reason is a
 * `TurnDeadline` reports `backend_timeout` instead of `aborted`.
 */
export class TurnDeadline extends Error {
  constructor(readonly seconds: number) {
    super(`the turn did not finish within ${seconds}s`);
    this.name = "TurnDeadline";
  }
}
