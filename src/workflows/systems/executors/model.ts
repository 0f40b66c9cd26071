/**
 * The `model` kind: ask any configured clawbridge model (a CLI agent, a local model, an upstream)
 * with a prompt template, and stream its answer. The model is reached through `ctx.callModel`,
 * which the bridge wires to its own backends (one stateless turn under the backend contract).
 */
import { ExecError, type Executor } from "../step-executor.js";
import type { ModelRun } from "../schema.js";
import { renderString } from "../../engine/template.js";

export const runModel: Executor<ModelRun> = async (spec, ctx) => {
  const prompt = renderString(spec.prompt, ctx.scope);
  const system = spec.system === undefined ? undefined : renderString(spec.system, ctx.scope);
  let text = "";
  for await (const ev of ctx.callModel({
    model: spec.model,
    prompt,
    system,
    cancel: ctx.cancel,
    timeoutSeconds: spec.timeoutSeconds,
    cwd: ctx.sandbox,
  })) {
    if (ev.type === "text") {
      text += ev.text;
      ctx.output(ev.text);
    } else if (ev.type === "error") {
      if (ctx.cancel.aborted) throw new ExecError("cancelled", "stopped");
      const code = ev.error.code === "backend_timeout" ? "timeout" : "model_error";
      throw new ExecError(code, `${spec.model}: ${ev.error.message}`, ev.error.retryable ?? false);
    } else if (ev.type === "done") {
      return { output: text };
    }
  }
  throw new ExecError("model_error", `${spec.model} ended without an answer`, true);
};
