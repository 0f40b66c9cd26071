/** An executor's context built by hand, for tests of one executor (src/workflows/systems/step-executor.ts). */
import pino from "pino";
import type { ExecContext } from "../../src/workflows/systems/step-executor.js";
import { Cancellation } from "../../src/core/util/cancel.js";

export function execContext(
  inputs: Record<string, unknown>,
  extra: Partial<ExecContext> & Pick<ExecContext, "workDir">,
): { ctx: ExecContext; pieces: string[] } {
  const pieces: string[] = [];
  const ctx: ExecContext = {
    runId: "run-1",
    systemId: "sys",
    scope: { inputs, runId: "run-1" },
    cancel: new Cancellation(),
    output: (t) => pieces.push(t),
    log: pino({ level: "silent" }),
    // biome-ignore lint/correctness/useYield: a model that fails before its first token
    callModel: async function* () {
      throw new Error("unused");
    },
    ...extra,
  };
  return { ctx, pieces };
}
