/**
 * The one scheduler of steps, for system runs and builds alike: a DAG of steps run by an `attempt`
 * function, with lifecycle hooks in the idiom of n8n's execution-lifecycle-hooks (handlers added
 * per hook name, run in the order added, awaited) through which the callers publish events and
 * persist state.
 * - A step starts when every step it depends on has completed; up to `maxParallel` at once.
 * - A failing attempt is retried only when its error says `retryable: true`, at most `retry` more
 *   times, `retryDelayMs` (default `retryBaseMs`, 1000) doubling each time.
 * - A step that fails for good skips its dependants (and theirs); independent branches finish; the
 *   run then fails naming that step.
 * - Cancelling (pause, cancel, shutdown) starts no more steps and aborts running attempts; those
 *   steps end `stopped` (back to pending: a resumed run starts again from its first unfinished step).
 *   A success that lands after the cancel is kept (redoing a finished step would do it twice).
 * Steps in `done` (a resumed run) are not run again; their outputs feed the rest.
 */
import { Cancellation } from "../../core/util/cancel.js";

export interface EngineStep {
  id: string;
  dependsOn: string[];
  /** Retries after the first attempt, for retryable errors. */
  retry: number;
  /** First retry delay of this step (doubles each time); default the run's `retryBaseMs`. */
  retryDelayMs?: number;
}

/** How a step ended. `stopped`: the run was cancelled under it (it goes back to pending). */
export type StepEnd =
  | { status: "completed"; output: unknown; ms: number }
  | { status: "failed"; error: Error; ms: number }
  | { status: "skipped"; reason: string }
  | { status: "stopped" };

export interface RunOutcome {
  outcome: "completed" | "failed" | "stopped";
  failedStep?: string;
  error?: string;
  outputs: Record<string, unknown>;
}

/** The hooks and their arguments. */
export interface RunHookMap {
  runBefore: [];
  stepBefore: [step: string, attempt: number];
  stepRetry: [step: string, attempt: number, error: Error, delayMs: number];
  stepAfter: [step: string, end: StepEnd];
  runAfter: [outcome: RunOutcome];
}
export type RunHookName = keyof RunHookMap;
type Handler<K extends RunHookName> = (...args: RunHookMap[K]) => unknown;

/** Handlers per hook, run in the order they were added. A throwing handler fails the run (a store gone). */
export class RunHooks {
  private readonly handlers = new Map<RunHookName, Array<(...args: never[]) => unknown>>();

  addHandler<K extends RunHookName>(name: K, ...fns: Array<Handler<K>>): this {
    this.handlers.set(name, [...(this.handlers.get(name) ?? []), ...(fns as Array<(...args: never[]) => unknown>)]);
    return this;
  }

  async runHook<K extends RunHookName>(name: K, ...args: RunHookMap[K]): Promise<void> {
    for (const fn of this.handlers.get(name) ?? []) await (fn as Handler<K>)(...args);
  }
}

export interface RunStepsArgs<S extends EngineStep> {
  steps: readonly S[];
  maxParallel: number;
  /** Outputs of steps already completed (a resumed run). */
  done: Record<string, unknown>;
  cancel: Cancellation;
  /** One attempt of one step; `outputs` holds every completed step's output so far. Throws to fail. */
  attempt(step: S, outputs: Record<string, unknown>, cancel: Cancellation): Promise<{ output: unknown }>;
  hooks: RunHooks;
  /** First retry delay of steps without their own (doubles each time). 1000 ms. */
  retryBaseMs?: number;
}

const asError = (err: unknown): Error => (err instanceof Error ? err : new Error(String(err)));
const retryable = (err: Error) => (err as { retryable?: unknown }).retryable === true;

/** Wait `ms`, or less if `cancel` aborts. */
export function sleep(ms: number, cancel: Cancellation): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      off();
      resolve();
    }, ms);
    const off = cancel.onAbort(() => {
      clearTimeout(timer);
      resolve();
    });
  });
}

export async function runSteps<S extends EngineStep>(args: RunStepsArgs<S>): Promise<RunOutcome> {
  const { steps, cancel, hooks } = args;
  const base = args.retryBaseMs ?? 1000;
  const outputs: Record<string, unknown> = { ...args.done };
  const state = new Map<string, "pending" | "running" | "completed" | "failed" | "skipped">();
  for (const s of steps) state.set(s.id, s.id in args.done ? "completed" : "pending");
  let firstFailure: { step: string; error: string } | undefined;
  const running = new Map<string, Promise<void>>();

  const runStep = async (step: S): Promise<void> => {
    const started = Date.now();
    const maxAttempts = 1 + step.retry;
    for (let attempt = 1; attempt <= maxAttempts; attempt++) {
      if (cancel.aborted) break;
      const attemptCancel = new Cancellation();
      const unlink = cancel.onAbort(() => attemptCancel.abort(cancel.reason));
      try {
        await hooks.runHook("stepBefore", step.id, attempt);
        const res = await args.attempt(step, outputs, attemptCancel);
        outputs[step.id] = res.output;
        state.set(step.id, "completed");
        await hooks.runHook("stepAfter", step.id, {
          status: "completed",
          output: res.output,
          ms: Date.now() - started,
        });
        return;
      } catch (err) {
        if (cancel.aborted) break;
        const e = asError(err);
        if (retryable(e) && attempt < maxAttempts) {
          const delay = (step.retryDelayMs ?? base) * 2 ** (attempt - 1);
          await hooks.runHook("stepRetry", step.id, attempt + 1, e, delay);
          await sleep(delay, cancel);
          continue;
        }
        state.set(step.id, "failed");
        firstFailure ??= { step: step.id, error: e.message };
        await hooks.runHook("stepAfter", step.id, { status: "failed", error: e, ms: Date.now() - started });
        return;
      } finally {
        unlink();
      }
    }
    state.set(step.id, "pending");
    await hooks.runHook("stepAfter", step.id, { status: "stopped" });
  };

  await hooks.runHook("runBefore");
  // Bounded: every pass either starts a step, settles one, or ends; each step runs at most 1 + retry attempts.
  for (let pass = 0; pass <= steps.length * 8 + 8; pass++) {
    let changed = true;
    while (changed) {
      changed = false;
      for (const s of steps) {
        if (state.get(s.id) !== "pending") continue;
        const bad = s.dependsOn.find((d) => state.get(d) === "failed" || state.get(d) === "skipped");
        if (bad) {
          state.set(s.id, "skipped");
          const reason = `${bad} ${state.get(bad) === "failed" ? "failed" : "was skipped"}`;
          await hooks.runHook("stepAfter", s.id, { status: "skipped", reason });
          changed = true;
        }
      }
    }
    if (!cancel.aborted) {
      for (const s of steps) {
        if (running.size >= args.maxParallel) break;
        if (state.get(s.id) !== "pending" || !s.dependsOn.every((d) => state.get(d) === "completed")) continue;
        state.set(s.id, "running");
        running.set(
          s.id,
          runStep(s).finally(() => running.delete(s.id)),
        );
      }
    }
    if (running.size === 0) break;
    await Promise.race(running.values());
  }

  const outcome: RunOutcome = cancel.aborted
    ? { outcome: "stopped", outputs }
    : firstFailure
      ? { outcome: "failed", failedStep: firstFailure.step, error: firstFailure.error, outputs }
      : { outcome: "completed", outputs };
  await hooks.runHook("runAfter", outcome);
  return outcome;
}
