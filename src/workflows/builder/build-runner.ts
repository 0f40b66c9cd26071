/**
 * Builds running in this process: each runs in the background (`start`) through a fresh MCP
 * connection, and a chat turn follows it (`follow`): one line per step as it completes, retries,
 * fails or is skipped, then what comes next — or, after `detachAfterMs`, the build goes on alone and
 * the turn ends with its id. A build's end lays a new canvas out and commits a canvas version (undo
 * goes back to before the plan). Pause stops it between steps; shutdown pauses every live build.
 */
import type { BackendEvent } from "../../backends/contract/backend.js";
import type { EventBus } from "../../ops/events/bus.js";
import { Cancellation } from "../../core/util/cancel.js";
import type { BuildRecord, BuildStore } from "./build-store.js";
import type { CanvasStore } from "./canvas-store.js";
import { executeBuild, type StepReport } from "./plan-executor.js";
import type { ToolCaller } from "./mcp-client.js";

export interface BuildRunnerDeps {
  canvases: CanvasStore;
  builds: BuildStore;
  /** A fresh MCP connection to the canvas and sandbox tools (closed after each build). */
  connect(): Promise<ToolCaller>;
  bus: EventBus;
  maxParallel: number;
  retryDelayScale: number;
  /** A build stopped (completed, failed or paused). */
  ended(rec: BuildRecord): void;
}

export class BuildRunner {
  private readonly live = new Map<string, { pause: Cancellation; done: Promise<BuildRecord> }>();

  constructor(private readonly d: BuildRunnerDeps) {}

  /** Start (or resume) a build in the background and stream its lines to this turn until it ends or detaches. */
  async *follow(
    rec: BuildRecord,
    head: string,
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
    const done = this.start(rec, (r) => {
      const line = stepLine(r);
      if (line) push(line);
    });
    let ended: BuildRecord | undefined;
    void done.then((b) => {
      ended = b;
      push("");
    });
    yield { type: "text", text: head };
    const detachAt = Date.now() + detachAfterMs;
    // Bounded by the detach time; each wait ends on a line, the end, the client leaving, or the deadline.
    while (!ended && !turnCancel.aborted && Date.now() < detachAt) {
      if (!lines.length) {
        await new Promise<void>((resolve) => {
          const finish = () => {
            clearTimeout(t);
            off();
            wake = undefined;
            resolve();
          };
          const t = setTimeout(finish, Math.max(1, detachAt - Date.now()));
          const off = turnCancel.onAbort(finish);
          wake = finish;
        });
      }
      const out = lines.splice(0).filter(Boolean);
      if (out.length) yield { type: "text", text: `${out.join("\n")}\n` };
    }
    const rest = lines.splice(0).filter(Boolean);
    if (rest.length) yield { type: "text", text: `${rest.join("\n")}\n` };
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

  /** Run a build (fresh or resumed) in the background; its end commits a canvas version and sets the state. */
  start(rec: BuildRecord, report: (r: StepReport) => void): Promise<BuildRecord> {
    const pause = new Cancellation();
    const done = (async () => {
      let tools: ToolCaller | undefined;
      try {
        tools = await this.d.connect();
        const out = await executeBuild(
          {
            tools,
            store: this.d.builds,
            bus: this.d.bus,
            maxParallel: this.d.maxParallel,
            delayScale: this.d.retryDelayScale,
          },
          rec,
          pause,
          report,
        );
        if (out.status !== "paused") {
          // Laid out for the eye, then a version: undo goes back to before this plan.
          if (out.status === "completed" && out.intent === "BUILD")
            await tools.call("canvas_apply_layout", { system: out.system, layout: "layered" });
          if (this.d.canvases.get(out.system))
            this.d.canvases.commitVersion(
              out.system,
              `${out.intent.toLowerCase()} ${out.id}: ${out.plan.metadata.summary || out.status}`.slice(0, 200),
            );
        }
        return out;
      } catch (err) {
        rec.status = "failed";
        rec.error = `the tools could not be reached: ${(err as Error).message}`;
        this.d.builds.save(rec);
        this.d.bus.emit({
          type: "execution:planComplete",
          buildId: rec.id,
          system: rec.system,
          status: "failed",
          error: rec.error,
          ms: 0,
        });
        return rec;
      } finally {
        await tools?.close().catch(() => {});
        this.live.delete(rec.id);
        this.d.ended(rec);
      }
    })();
    this.live.set(rec.id, { pause, done });
    return done;
  }

  isLive(buildId: string): boolean {
    return this.live.has(buildId);
  }

  /** Ask a running build to stop between steps. False when it is not running here. */
  pause(buildId: string): boolean {
    const live = this.live.get(buildId);
    if (!live) return false;
    live.pause.abort(new Error("paused"));
    return true;
  }

  /** Resume a paused build in the background. */
  resume(buildId: string): BuildRecord | undefined {
    const b = this.d.builds.get(buildId);
    if (b?.status !== "paused" || this.live.has(buildId)) return undefined;
    void this.start(b, () => {});
    return b;
  }

  /** Its end when it is live, else its record. */
  async settled(buildId: string): Promise<BuildRecord | undefined> {
    return (await this.live.get(buildId)?.done) ?? this.d.builds.get(buildId);
  }

  /** Pause every live build (shutdown): they resume from their unfinished steps. */
  async close(): Promise<void> {
    for (const id of [...this.live.keys()]) this.pause(id);
    await Promise.all([...this.live.values()].map((l) => l.done.catch(() => undefined)));
  }
}

function stepLine(r: StepReport): string | undefined {
  const what = `\`${r.step.id}\` ${r.step.name && r.step.name !== r.step.id ? `${r.step.name} ` : ""}`;
  switch (r.status) {
    case "completed":
      return `- ✓ ${what}${r.detail ? `→ \`${r.detail}\`` : ""}`;
    case "failed":
      return `- ✗ ${what}failed: ${r.detail ?? ""}`;
    case "skipped":
      return `- – ${what}${r.detail ?? "skipped"}`;
    case "retry":
      return `- ↻ ${what}attempt ${r.attempt}: ${r.detail ?? ""}`;
    default:
      return undefined;
  }
}
