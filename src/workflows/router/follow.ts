/**
 * A run as a chat answer: `Running **X**…`, one line per step as it completes, retries, fails or is
 * skipped, then the output, then `stop`. Text streams as it is written: a one-step run's output,
 * and a plan's model steps' text under the step's name (the output is not printed again when it is
 * the text of such a step; the run record keeps the whole text). A run that stops at an approval
 * ends the answer with its question and the data shown (the conversation was told: the router
 * opens the question, so the next "yes" or "no" decides). After
 * `detachAfterMs` the answer ends with the run id and the run goes on; the conversation hears the
 * result on its next turn. A client that goes away cancels the run it was attached to (not while
 * the bridge shuts down: then the run ends `interrupted`, to be resumed).
 */
import type { BackendEvent } from "../../backends/contract/backend.js";
import type { EventBus } from "../../ops/events/bus.js";
import type { BridgeEvent, ConversationState } from "../../wire/events.js";
import type { RunRecord } from "../systems/db.js";
import type { SystemsLibrary } from "../systems/library.js";
import { isWouldSend } from "../systems/step-executor.js";
import type { CompiledPlan } from "../systems/plan.js";
import type { RunManager } from "../systems/runner.js";
import type { Cancellation } from "../../core/util/cancel.js";
import { seconds, stepLine } from "./messages.js";

export interface FollowArgs {
  run: RunRecord;
  name: string;
  /** One-step runs stream their output live; plans show step lines and their `streams` steps' text, then the output. */
  single: boolean;
  /** A plan's steps whose text streams to the chat under their name (`textSteps`). */
  streams: ReadonlySet<string>;
  /** The step whose text is the run's output (`textSteps`). */
  outputStep: string;
  runs: RunManager;
  bus: EventBus;
  cancel: Cancellation;
  detachAfterMs: number;
  head: string;
  onEnd(state: ConversationState, run: RunRecord): Promise<void>;
}

const MAX_OUTPUT_CHARS = 6000;
/** Nesting deeper than the runner allows is not looked into. */
const MAX_DEPTH = 8;

/**
 * A plan's steps whose text streams to the chat: its `model` steps, and those of the systems it
 * uses as `<step>/<sub-step>` (as the runner names them); `output`, the step whose text is the
 * run's output (through a used system to its own output step).
 */
export function textSteps(
  library: SystemsLibrary,
  plan: CompiledPlan,
  prefix = "",
  depth = 0,
): { streams: string[]; output: string } {
  const streams: string[] = [];
  let output = prefix + plan.output;
  for (const s of plan.steps) {
    const t = s.target;
    if (t.kind === "leaf") {
      if (t.spec.kind === "model") streams.push(prefix + s.id);
    } else if (depth < MAX_DEPTH && library.get(t.system)) {
      const sub = textSteps(library, library.plan(t.system), `${prefix}${s.id}/`, depth + 1);
      streams.push(...sub.streams);
      if (s.id === plan.output) output = sub.output;
    }
  }
  return { streams, output };
}

/** A run's output for a chat: text as it is (clipped), anything else as a JSON block. */
export function formatOutput(output: unknown): string {
  if (output === undefined || output === null || output === "") return "";
  const text = typeof output === "string" ? output : "```json\n" + JSON.stringify(output, null, 2) + "\n```";
  return text.length > MAX_OUTPUT_CHARS
    ? `${text.slice(0, MAX_OUTPUT_CHARS)}\n…(clipped; the whole output is in the run record)`
    : text;
}

/** A completed test run: what each step with side effects would have sent, and the output. */
function testRunText(r: RunRecord, head: string, took: string): string {
  const notSent = r.steps.filter((s) => isWouldSend(s.output));
  const sent = notSent.map((s) => `**${s.id}**:\n${formatOutput(s.output)}`).join("\n\n");
  const out = isWouldSend(r.output) ? "" : formatOutput(r.output);
  return `${head} finished${took}: nothing was sent; ${
    notSent.length ? `this is what would have been sent:\n\n${sent}` : "none of its steps has side effects."
  }${out ? `\n\nOutput:\n\n${out}` : ""}`;
}

/** One run's state, in words. */
export function runStatusText(r: RunRecord, name: string): string {
  const head = `${r.test ? "Test run of " : ""}**${name}** (run \`${r.id}\`)`;
  const took = r.startedAt && r.endedAt ? ` in ${seconds(r.endedAt - r.startedAt)}` : "";
  const doneSteps = r.steps.filter((s) => s.status === "completed").length;
  switch (r.status) {
    case "completed": {
      if (r.test) return testRunText(r, head, took);
      const out = formatOutput(r.output);
      return `${head} finished${took}.${out ? `\n\n${out}` : ""}`;
    }
    case "failed":
      return `${head} failed${r.failedStep ? ` at step \`${r.failedStep}\`` : ""}: ${r.error ?? "unknown error"}`;
    case "waiting":
      return waitingText(r, head);
    case "rejected":
      return `${head} was rejected${r.failedStep ? ` at step \`${r.failedStep}\`` : ""}: ${r.error ?? "rejected"}`;
    case "cancelled":
      return `${head} was cancelled (${doneSteps} of ${r.steps.length} steps done).`;
    case "paused":
      return `${head} is paused after ${doneSteps} of ${r.steps.length} steps. Say \`resume run ${r.id}\` to go on.`;
    case "interrupted":
      return `${head} was interrupted when the bridge stopped (${doneSteps} of ${r.steps.length} steps done). Say \`resume run ${r.id}\` to go on from there.`;
    default: {
      const running = r.steps.filter((s) => s.status === "running").map((s) => `\`${s.id}\``);
      return `${head} is ${r.status}: ${doneSteps} of ${r.steps.length} steps done${running.length ? `, now ${running.join(", ")}` : ""}.`;
    }
  }
}

/** A waiting run's approval: its question, the data shown, and what its deadline does. */
function waitingText(r: RunRecord, head: string): string {
  const a = r.approval;
  if (!a) return `${head} is waiting for an approval.`;
  const data = formatOutput(a.shown);
  const deadline = a.deadline
    ? ` Without an answer by ${new Date(a.deadline).toISOString()}, it is ${a.onTimeout === "approve" ? "approved" : "rejected"}.`
    : "";
  return `${head} is waiting for your approval: ${a.question}${data ? `\n\n${data}` : ""}\n\nApprove? (yes / no)${deadline}`;
}

/** The conversation's state once the run is where it is now. */
export function endState(rec: RunRecord): ConversationState {
  switch (rec.status) {
    case "completed":
      return "completed";
    case "paused":
    case "waiting":
      return "paused";
    case "cancelled":
    case "rejected":
      return "idle";
    case "pending":
    case "running":
      return "executing";
    default:
      return "error";
  }
}

export function runsListText(runs: RunRecord[], nameOf: (system: string) => string): string {
  if (!runs.length) return "No runs in this conversation yet.";
  return [
    "Recent runs:",
    "",
    ...runs.map(
      (r) =>
        `- \`${r.id}\` **${nameOf(r.system)}**${r.test ? " (test)" : ""}: ${r.status}${r.failedStep ? ` at \`${r.failedStep}\`` : ""}`,
    ),
  ].join("\n");
}

const TERMINAL = new Set([
  "run.completed",
  "run.failed",
  "run.cancelled",
  "run.paused",
  "run.waiting",
  "run.rejected",
  "run.interrupted",
]);

export async function* follow(a: FollowArgs): AsyncGenerator<BackendEvent> {
  const id = a.run.id;
  const queue: BridgeEvent[] = [];
  let wake: (() => void) | undefined;
  const poke = () => {
    const w = wake;
    wake = undefined;
    w?.();
  };
  const off = a.bus.onRun(id, (e) => {
    queue.push(e);
    poke();
  });
  let detach = false;
  const timer = setTimeout(() => {
    detach = true;
    poke();
  }, a.detachAfterMs);
  const offCancel = a.cancel.onAbort(poke);
  let ended = false;
  let detached = false;
  try {
    yield { type: "text", text: `${a.head}\n\n` };
    if (!a.runs.isLive(id)) {
      // It ended between the decision and now.
      const rec = (await a.runs.get(id)) ?? a.run;
      ended = true;
      yield { type: "text", text: runStatusText(rec, a.name) };
      yield { type: "done", finishReason: "stop" };
      return;
    }
    let streamed = false;
    /** The plan step whose text was streamed last (its name is written again when another's comes between). */
    let writing: string | undefined;
    const wrote = new Set<string>();
    // Bounded: the loop ends when the run ends, at detach time, or when the client goes away.
    for (;;) {
      while (queue.length) {
        const e = queue.shift()!;
        const line = lineOf(e, a.single);
        if (line !== undefined) {
          yield { type: "text", text: writing ? `\n\n${line}` : line };
          writing = undefined;
          continue;
        }
        if (e.type === "run.output" && a.single) {
          streamed = true;
          yield { type: "text", text: e.text };
          continue;
        }
        if (e.type === "run.output" && e.step && a.streams.has(e.step)) {
          wrote.add(e.step);
          yield {
            type: "text",
            text: writing === e.step ? e.text : `${writing ? "\n\n" : ""}**${e.step}**: ${e.text}`,
          };
          writing = e.step;
          continue;
        }
        if (TERMINAL.has(e.type)) {
          ended = true;
          const rec = (await a.runs.get(id))!;
          // Its question is told here, not again on the next turn.
          if (rec.status === "waiting") await a.runs.store.markReported(id);
          await a.onEnd(endState(rec), rec);
          streamed ||= wrote.has(a.outputStep);
          let text: string;
          if (rec.status === "completed" && streamed && !rec.test)
            text = `\n\n✓ **${a.name}** finished${rec.startedAt && rec.endedAt ? ` in ${seconds(rec.endedAt - rec.startedAt)}` : ""}.`;
          else text = `${streamed ? "\n\n" : "\n"}${runStatusText(rec, a.name)}`;
          yield { type: "text", text };
          yield { type: "done", finishReason: "stop" };
          return;
        }
      }
      if (a.cancel.aborted) return; // finally cancels the run
      if (detach) {
        detached = true;
        await a.runs.store.markDetached(id);
        yield {
          type: "text",
          text: `\n\n⏳ **${a.name}** is still running (run \`${id}\`). I will tell you the result in this conversation when it is done; \`/status ${id}\` shows where it is.`,
        };
        yield { type: "done", finishReason: "stop" };
        return;
      }
      await new Promise<void>((resolve) => (wake = resolve));
    }
  } finally {
    off();
    offCancel();
    clearTimeout(timer);
    // The client went away while the run was attached to its turn: the run is cancelled.
    if (!ended && !detached && a.cancel.aborted && !a.runs.closing && a.runs.isLive(id))
      void a.runs.cancel(id).catch(() => {});
  }
}

function lineOf(e: BridgeEvent, single: boolean): string | undefined {
  switch (e.type) {
    case "step.completed":
      return single ? undefined : `${stepLine({ kind: "completed", step: e.step, ms: e.ms })}\n`;
    case "step.retry":
      return `${stepLine({ kind: "retry", step: e.step, attempt: e.attempt, error: e.error, delayMs: e.delayMs })}\n`;
    case "step.failed":
      return single ? undefined : `${stepLine({ kind: "failed", step: e.step, ms: e.ms, error: e.error })}\n`;
    case "step.skipped":
      return `${stepLine({ kind: "skipped", step: e.step, error: e.reason })}\n`;
    default:
      return undefined;
  }
}
