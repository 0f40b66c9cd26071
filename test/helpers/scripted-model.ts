/**
 * A scripted `ModelCaller` (src/workflows/systems/step-executor.ts) for the workflow engines' unit
 * tests: no HTTP, no process. Every call is recorded (model, system text, prompt), so a test can
 * assert what a model was asked, and that no call was made where none should be. A call is
 * answered by the reply queued for its model (first in, first out), else by the model's standing
 * rule, else with an error event that names the model (the engine then takes its no-model path).
 *
 * A reply is text (one string, or chunks), `{ chunks, delayMs }` (chunks paced apart, as a model
 * streams), `{ error }` (an error event, as a backend that failed sends), `{ throws }` (the call
 * itself fails), or `{ hold: true }` (nothing until the call is cancelled: a run to cancel, pause
 * or detach from).
 */
import type { BackendEvent } from "../../src/backends/contract/backend.js";
import type { ModelCaller } from "../../src/workflows/systems/step-executor.js";

export type ScriptedReply =
  | string
  | string[]
  | { chunks: string[]; delayMs: number }
  | { error: string }
  | { throws: string }
  | { hold: true };

export interface ModelCall {
  model: string;
  system?: string;
  prompt: string;
}

type Rule = (call: ModelCall) => ScriptedReply | undefined;

export class ScriptedModel {
  /** Every call, in order. */
  readonly calls: ModelCall[] = [];
  private readonly queued = new Map<string, ScriptedReply[]>();
  private readonly rules = new Map<string, Rule>();

  /** The caller the engines are given. */
  readonly caller: ModelCaller = (req) => {
    const call: ModelCall = { model: req.model, system: req.system, prompt: req.prompt };
    this.calls.push(call);
    const reply = this.queued.get(req.model)?.shift() ??
      this.rules.get(req.model)?.(call) ?? { error: `no reply scripted for model ${req.model}` };
    return replay(reply, req.cancel);
  };

  /** Replies for the next calls to `model`, in order (before its standing rule). */
  queue(model: string, ...replies: ScriptedReply[]): this {
    this.queued.set(model, [...(this.queued.get(model) ?? []), ...replies]);
    return this;
  }

  /** The standing answer of `model` (a function of the call, or one reply for every call). */
  on(model: string, rule: Rule | ScriptedReply): this {
    this.rules.set(model, typeof rule === "function" ? rule : () => rule);
    return this;
  }

  /** The calls made to `model`. */
  to(model: string): ModelCall[] {
    return this.calls.filter((c) => c.model === model);
  }
}

async function* replay(
  reply: ScriptedReply,
  cancel: { aborted: boolean; onAbort(fn: () => void): () => void },
): AsyncGenerator<BackendEvent> {
  if (typeof reply === "string" || Array.isArray(reply)) {
    for (const text of typeof reply === "string" ? [reply] : reply) yield { type: "text", text };
    yield { type: "done", finishReason: "stop" };
    return;
  }
  if ("chunks" in reply) {
    for (const text of reply.chunks) {
      await new Promise((resolve) => setTimeout(resolve, reply.delayMs));
      yield { type: "text", text };
    }
    yield { type: "done", finishReason: "stop" };
    return;
  }
  if ("throws" in reply) throw new Error(reply.throws);
  if ("hold" in reply) {
    // Bounded by the caller: it ends when the call is cancelled (a run stopped, a turn gone).
    await new Promise<void>((resolve) => cancel.onAbort(resolve));
    yield { type: "error", error: { code: "aborted", message: "cancelled" } };
    return;
  }
  yield { type: "error", error: { code: "backend_unavailable", message: reply.error } };
}
