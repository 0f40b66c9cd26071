/**
 * A system's run spec as the engine's steps (src/workflows/engine/scheduler.ts runs them): a plan's
 * steps with their dependencies and retries, each a leaf kind or another system; a single-kind
 * system is a plan of one step. A failing attempt is retried only when the failure says it may
 * succeed later (timeouts, 5xx, configured exit codes), 1 s, 2 s, 4 s apart.
 */
import type { EngineStep } from "../engine/scheduler.js";
import type { PlanStep, RunSpec } from "./schema.js";
import { isLeafKind } from "./schema.js";

export type LeafSpec = Exclude<RunSpec, { kind: "plan" }>;

export interface CompiledStep extends EngineStep {
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
  if (isLeafKind(s.uses)) {
    // Validated and defaulted at load (src/workflows/systems/library.ts keeps the parsed settings in `with`).
    return { ...base, target: { kind: "leaf", spec: { ...s.with, kind: s.uses } as LeafSpec } };
  }
  return { ...base, target: { kind: "system", system: s.uses, with: s.with } };
}
