/**
 * Builds as runs: a build is written as a run of origin `builder` (the intent and plan as its
 * inputs, one run step per plan step) and carried out by the run manager (src/workflows/systems/
 * runner.ts) on the engine, like any run: paused, resumed and cancelled through it, `interrupted`
 * by a restart and resumable. Its program (`program`) opens a fresh MCP connection to the canvas
 * and sandbox tools; its end lays a new canvas out and commits a canvas version (undo goes back to
 * before the plan). A chat turn follows a build (`follow`): one line per step as it completes,
 * retries, fails or is skipped, then what comes next — or, after `detachAfterMs`, the build goes on
 * alone and the turn ends with its id.
 */
import type { BackendEvent } from "../../backends/contract/backend.js";
import type { Cancellation } from "../../core/util/cancel.js";
import { alnumId } from "../../core/util/ids.js";
import type { RunHooks } from "../engine/scheduler.js";
import type { RunRecord } from "../systems/db.js";
import type { RunManager, RunProgram } from "../systems/runner.js";
import { type BuildInputs, type BuildIntent, type BuildRecord, buildOf } from "./build-store.js";
import type { CanvasStore } from "./canvas-store.js";
import type { ToolCaller } from "./mcp-client.js";
import { attemptBuildStep, type BuildEngineStep, compileBuild } from "./plan-executor.js";
import type { ExecutionPlan } from "./types.js";

export interface BuildRunnerDeps {
  canvases: CanvasStore;
  manager: RunManager;
  /** A fresh MCP connection to the canvas and sandbox tools (closed after each build). */
  connect(): Promise<ToolCaller>;
  maxParallel: number;
  retryDelayScale: number;
  /** A build stopped (completed, failed, paused, cancelled, interrupted). */
  ended(rec: BuildRecord): Promise<void>;
}

export class BuildRunner {
  constructor(private readonly d: BuildRunnerDeps) {}

  /** Write a new build (a run of origin `builder`) and start it; `observe` hears its steps. */
  async begin(
    b: { conversation: string; intent: BuildIntent; plan: ExecutionPlan },
    observe?: (hooks: RunHooks) => void,
  ): Promise<BuildRecord> {
    const run = await this.d.manager.create(
      {
        id: alnumId("build_", 16),
        system: b.plan.metadata.system,
        conversation: b.conversation,
        inputs: { intent: b.intent, plan: b.plan } satisfies BuildInputs as unknown as Record<string, unknown>,
        origin: "builder",
        steps: b.plan.steps.map((s) => s.id),
      },
      { observe, program: (rec) => this.program(rec) },
    );
    return buildOf(run);
  }

  /** Go on with a paused or interrupted build from its first unfinished step. */
  async resume(id: string, observe?: (hooks: RunHooks) => void): Promise<BuildRecord> {
    return buildOf(await this.d.manager.resume(id, { observe, program: (rec) => this.program(rec) }));
  }

  /** A build's steps on the engine, through a fresh tool connection; its end commits a canvas version. */
  async program(run: RunRecord): Promise<RunProgram> {
    const { plan } = buildOf(run);
    // Unreachable tools fail the build at its first steps (said in their error), and end it as any build.
    const tools = await this.d.connect().catch((err: Error) => err);
    return {
      steps: compileBuild(plan, this.d.retryDelayScale),
      maxParallel: this.d.maxParallel,
      attempt: (step, outputs) => attemptBuildStep(tools, plan, step as BuildEngineStep, outputs),
      output: () => undefined,
      close: async () => {
        const out = buildOf((await this.d.manager.store.get(run.id))!);
        try {
          if (!(tools instanceof Error) && (out.status === "completed" || out.status === "failed")) {
            // Laid out for the eye, then a version: undo goes back to before this plan.
            if (out.status === "completed" && out.intent === "BUILD")
              await tools.call("canvas_apply_layout", { system: out.system, layout: "layered" });
            if (await this.d.canvases.get(out.system))
              await this.d.canvases.commitVersion(
                out.system,
                `${out.intent.toLowerCase()} ${out.id}: ${out.plan.metadata.summary || out.status}`.slice(0, 200),
              );
          }
        } finally {
          if (!(tools instanceof Error)) await tools.close().catch(() => {});
          await this.d.ended(out);
        }
      },
    };
  }

  /**
   * Start (or resume) a build with `launch` and stream its lines to this turn until it ends or
   * detaches; `endText` says what comes next.
   */
  async *follow(
    launch: (observe: (hooks: RunHooks) => void) => Promise<BuildRecord>,
    head: (id: string) => string,
    turnCancel: Cancellation,
    detachAfterMs: number,
    endText: (b: BuildRecord) => Promise<string>,
  ): AsyncGenerator<BackendEvent> {
    const lines: string[] = [];
    let wake: (() => void) | undefined;
    const push = (line: string) => {
      lines.push(line);
      const w = wake;
      wake = undefined;
      w?.();
    };
    let plan: ExecutionPlan | undefined;
    /** One chat line for a step: `- ✓ \`id\` Name → \`node\``. */
    const say = (step: string, mark: string, text: string) => {
      const name = plan?.steps.find((s) => s.id === step)?.name;
      push(`- ${mark} \`${step}\` ${name && name !== step ? `${name} ` : ""}${text}`);
    };
    const rec = await launch((hooks) =>
      hooks
        .addHandler("stepRetry", (step, attempt, e) => say(step, "↻", `attempt ${attempt}: ${e.message}`))
        .addHandler("stepAfter", (step, e) => {
          if (e.status === "completed")
            say(step, "✓", typeof e.output === "string" && e.output ? `→ \`${e.output}\`` : "");
          else if (e.status === "failed") say(step, "✗", `failed: ${e.error.message}`);
          else if (e.status === "skipped") say(step, "–", `not run: ${e.reason}`);
        }),
    );
    plan = rec.plan;
    let ended: BuildRecord | undefined;
    // The build's end: the run's end, then its program's (canvas version, conversation state).
    void this.d.manager.wait(rec.id).then((r) => {
      ended = buildOf(r);
      push("");
    });
    yield { type: "text", text: head(rec.id) };
    let detached = false;
    const timer = setTimeout(() => {
      detached = true;
      push("");
    }, detachAfterMs);
    const offCancel = turnCancel.onAbort(() => push(""));
    try {
      // Bounded by the detach time; each wait ends on a line, the end, the client leaving, or the deadline.
      for (;;) {
        const stop = ended || turnCancel.aborted || detached;
        const out = lines.splice(0).filter(Boolean);
        if (out.length) yield { type: "text", text: `${out.join("\n")}\n` };
        if (stop) break;
        if (!lines.length) await new Promise<void>((resolve) => (wake = resolve));
      }
    } finally {
      clearTimeout(timer);
      offCancel();
    }
    if (!ended) {
      yield {
        type: "text",
        text: `\nThe build goes on in the background (build \`${rec.id}\`). Say **status** to see where it is, **pause** to stop it between steps.`,
      };
      yield { type: "done", finishReason: "stop" };
      return;
    }
    yield { type: "text", text: `\n${await endText(ended)}` };
    yield { type: "done", finishReason: "stop" };
  }
}
