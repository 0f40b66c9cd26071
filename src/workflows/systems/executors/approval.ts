/**
 * The `approval` kind: a person decides whether the run goes on. Decided yes, the step's output is
 * `{approved: true, by, at, note?}`; not decided yet, the question and the data shown are written
 * and the run stops `waiting` (the run manager keeps the approval and resumes the run on a yes;
 * a no ends it `rejected` without running this step again).
 */
import { ExecError, type Executor } from "../step-executor.js";
import type { ApprovalRun } from "../schema.js";
import { renderString, renderValue } from "../../engine/template.js";

export const runApproval: Executor<ApprovalRun> = async (spec, ctx) => {
  const gate = ctx.approval;
  if (!gate) throw new ExecError("invalid", "an approval step needs a run that can wait for the decision");
  const d = await gate.decided();
  if (d?.decision === "approved")
    return { output: { approved: true, by: d.by, at: d.at, ...(d.note ? { note: d.note } : {}) } };
  if (d) throw new ExecError("invalid", `rejected by ${d.by}${d.note ? `: ${d.note}` : ""}`);
  await gate.wait({
    question: renderString(spec.question, ctx.scope),
    shown: spec.show === undefined ? gate.upstream : renderValue(spec.show, ctx.scope),
    timeoutSeconds: spec.timeoutSeconds,
    onTimeout: spec.onTimeout,
  });
  throw new ExecError("cancelled", "waiting for approval");
};
