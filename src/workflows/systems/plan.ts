/**
 * Runs a plan: steps with dependencies, independent ones in parallel (up to `maxParallel`).
 * - A step starts when every step it depends on has completed.
 * - A failing attempt is retried only when the failure says it may succeed later (timeouts, 5xx,
 *   configured exit codes), at most `retry` more times, 1 s, 2 s, 4 s apart.
 * - A step that fails for good skips its dependants (and theirs); independent branches finish; the
 *   plan then fails naming that step.
 * - Cancelling (pause, cancel, shutdown) stops new steps and aborts running ones; they go back to
 *   `pending`, so a resumed run starts again from its first unfinished step.
 * Steps already completed (a resumed run) are not run again; their outputs feed the rest.
 * A single-kind system is a plan of one step (`compileRun`).
 */
import { Cancellation } from "../../core/util/cancel.js";
import { ExecError, type ExecResult } from "./step-executor.js";
import type { PlanStep, RunSpec } from "./schema.js";
import { LEAF_KINDS, type LeafKind } from "./schema.js";

export type LeafSpec = Exclude<RunSpec, { kind: "plan" }>;

export interface CompiledStep {
  id: string;
  dependsOn: string[];
  retry: number;
  target: { kind: "leaf"; spec: LeafSpec } | { kind: "system"; system: string; with: Record<string, unknown> };
}

export interface CompiledPlan {
  steps: CompiledStep[];
  maxParallel: number;
  /** The step whose output is the plan's output. */
  output: string;
}

/** The step id a single-kind system's one step has. */
export const SINGLE_STEP = "run";

/** A run spec as a plan (`with` of a leaf step is that kind's settings). Shape errors were found at load. */
export function compileRun(run: RunSpec): CompiledPlan {
  if (run.kind !== "plan")
    return {
      steps: [{ id: SINGLE_STEP, dependsOn: [], retry: 3, target: { kind: "leaf", spec: run } }],
      maxParallel: 1,
      output: SINGLE_STEP,
    };
  return {
    steps: run.steps.map((s) => compileStep(s)),
    maxParallel: run.maxParallel,
    output: run.output ?? run.steps[run.steps.length - 1]!.id,
  };
}

function compileStep(s: PlanStep): CompiledStep {
  const base = { id: s.id, dependsOn: s.dependsOn, retry: s.retry };
  if ((LEAF_KINDS as readonly string[]).includes(s.uses)) {
    // Validated and defaulted at load (src/workflows/systems/library.ts keeps the parsed settings in `with`).
    return { ...base, target: { kind: "leaf", spec: { ...s.with, kind: s.uses as LeafKind } as LeafSpec } };
  }
  return { ...base, target: { kind: "system", system: s.uses, with: s.with } };
}

export interface StepHooks {
  started(step: string, attempt: number): void;
  retry(step: string, attempt: number, error: ExecError, delayMs: number): void;
  completed(step: string, output: unknown, ms: number): void;
  failed(step: string, error: ExecError, ms: number): void;
  skipped(step: string, reason: string): void;
  /** A running step was stopped by the cancellation (it goes back to pending). */
  stopped(step: string): void;
}

export interface PlanOutcome {
  outcome: "completed" | "failed" | "stopped";
  failedStep?: string;
  error?: string;
  outputs: Record<string, unknown>;
}

export interface RunPlanArgs {
  plan: CompiledPlan;
  /** Outputs of steps already completed (a resumed run). */
  done: Record<string, unknown>;
  cancel: Cancellation;
  /** One attempt of one step; `outputs` holds every completed step's output so far. */
  attempt(step: CompiledStep, outputs: Record<string, unknown>, cancel: Cancellation): Promise<ExecResult>;
  hooks: StepHooks;
  /** First retry delay (doubles each time). 1000 ms. */
  retryBaseMs?: number;
}

const asExecError = (err: unknown): ExecError =>
  err instanceof ExecError ? err : new ExecError("invalid", err instanceof Error ? err.message : String(err), false);

/** Wait `ms`, or less if `cancel` aborts. */
function pause(ms: number, cancel: Cancellation): Promise<void> {
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

export async function runPlan(args: RunPlanArgs): Promise<PlanOutcome> {
  const { plan, cancel, hooks } = args;
  const base = args.retryBaseMs ?? 1000;
  const outputs: Record<string, unknown> = { ...args.done };
  const state = new Map<string, "pending" | "running" | "completed" | "failed" | "skipped">();
  for (const s of plan.steps) state.set(s.id, s.id in args.done ? "completed" : "pending");
  let firstFailure: { step: string; error: string } | undefined;
  const running = new Map<string, Promise<void>>();

  const runStep = async (step: CompiledStep): Promise<void> => {
    const started = Date.now();
    const maxAttempts = 1 + step.retry;
    for (let attempt = 1; attempt <= maxAttempts; attempt++) {
      if (cancel.aborted) break;
      const attemptCancel = new Cancellation();
      const unlink = cancel.onAbort(() => attemptCancel.abort(cancel.reason));
      hooks.started(step.id, attempt);
      try {
        const res = await args.attempt(step, outputs, attemptCancel);
        // A success is kept even when a pause or cancel came just after it: redoing a step that
        // finished (a webhook that changed something) on resume would do it twice.
        outputs[step.id] = res.output;
        state.set(step.id, "completed");
        hooks.completed(step.id, res.output, Date.now() - started);
        return;
      } catch (err) {
        if (cancel.aborted) break;
        const e = asExecError(err);
        if (e.retryable && attempt < maxAttempts) {
          const delay = base * 2 ** (attempt - 1);
          hooks.retry(step.id, attempt + 1, e, delay);
          await pause(delay, cancel);
          continue;
        }
        state.set(step.id, "failed");
        firstFailure ??= { step: step.id, error: e.message };
        hooks.failed(step.id, e, Date.now() - started);
        return;
      } finally {
        unlink();
      }
    }
    // Stopped by the run's cancellation: back to pending for a later resume.
    state.set(step.id, "pending");
    hooks.stopped(step.id);
  };

  // Bounded: every pass either starts a step, settles one, or ends; each step runs at most 4 attempts.
  for (let pass = 0; pass <= plan.steps.length * 8 + 8; pass++) {
    // Skip what can no longer run.
    let changed = true;
    while (changed) {
      changed = false;
      for (const s of plan.steps) {
        if (state.get(s.id) !== "pending") continue;
        const bad = s.dependsOn.find((d) => state.get(d) === "failed" || state.get(d) === "skipped");
        if (bad) {
          state.set(s.id, "skipped");
          hooks.skipped(s.id, `${bad} ${state.get(bad) === "failed" ? "failed" : "was skipped"}`);
          changed = true;
        }
      }
    }
    if (!cancel.aborted) {
      for (const s of plan.steps) {
        if (running.size >= plan.maxParallel) break;
        if (state.get(s.id) !== "pending" || !s.dependsOn.every((d) => state.get(d) === "completed")) continue;
        state.set(s.id, "running");
        const p = runStep(s).finally(() => running.delete(s.id));
        running.set(s.id, p);
      }
    }
    if (running.size === 0) break;
    await Promise.race(running.values());
  }

  if (cancel.aborted) return { outcome: "stopped", outputs };
  if (firstFailure) return { outcome: "failed", failedStep: firstFailure.step, error: firstFailure.error, outputs };
  return { outcome: "completed", outputs };
}
