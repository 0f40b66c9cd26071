/**
 * Runs systems and keeps their records: start (written `pending` before anything runs), pause,
 * resume (from the first unfinished step), cancel, and shutdown. Every change is written to the
 * run store and published on the event bus (`run.*`, `step.*`, and `run.output` for the text a
 * step streams). A run belongs to the manager, not to the chat turn that started it: the turn may
 * detach and the run goes on; cancelling it is an explicit act (`cancel`, or the router when the
 * client of an attached turn goes away).
 *
 * A run found `running` or `pending` at start-up (the bridge stopped under it) becomes
 * `interrupted` (`recover`) and is never re-run silently: resuming it is somebody's decision.
 */
import { mkdirSync } from "node:fs";
import path from "node:path";
import type { Logger } from "pino";
import type { EventBus } from "../../ops/events/bus.js";
import type { RunStatus } from "../../wire/runs.js";
import { Cancellation } from "../../core/util/cancel.js";
import { alnumId } from "../../core/util/ids.js";
import type { RunRecord, RunStore } from "./db.js";
import { ExecError, type ExecContext, type ExecResult, type ModelCaller } from "./step-executor.js";
import { executeLeaf } from "./executors/index.js";
import { existingDir, sandboxDir } from "./paths.js";
import type { SystemsLibrary } from "./library.js";
import { runPlan, type CompiledStep, type StepHooks } from "./plan.js";
import { renderValue, type Scope } from "../engine/template.js";

export interface RunManagerDeps {
  store: RunStore;
  library: SystemsLibrary;
  bus: EventBus;
  callModel: ModelCaller;
  /** Per-run working directories go under `<dataDir>/runs/<runId>`. */
  dataDir: string;
  log: Logger;
  /** First retry delay of a failing step (doubles each time). 1000 ms. */
  retryBaseMs?: number;
  /** Nesting limit for systems that use systems (loops are refused at load; this is a guard). */
  maxDepth?: number;
}

/** Why a run was stopped from outside. */
export class RunStop {
  constructor(readonly kind: "paused" | "cancelled" | "shutdown") {}
}

export class RunError extends Error {
  constructor(
    readonly code: "not_found" | "conflict" | "unknown_system",
    message: string,
  ) {
    super(message);
    this.name = "RunError";
  }
}

export interface StartRequest {
  system: string;
  /** Already checked against the system's input schema by the caller (router, HTTP, CLI). */
  inputs: Record<string, unknown>;
  conversation?: string;
  origin: RunRecord["origin"];
  messageKey?: string;
}

interface LiveRun {
  cancel: Cancellation;
  done: Promise<RunRecord>;
}

const ENDED: ReadonlySet<RunStatus> = new Set(["completed", "failed", "cancelled", "interrupted"]);
const RESUMABLE: ReadonlySet<RunStatus> = new Set(["paused", "interrupted", "failed"]);

export class RunManager {
  private readonly live = new Map<string, LiveRun>();
  private closed = false;

  constructor(private readonly deps: RunManagerDeps) {}

  get store(): RunStore {
    return this.deps.store;
  }

  /** Start-up: runs left `running`/`pending` by a bridge that stopped become `interrupted`. */
  recover(): string[] {
    const ids = this.deps.store.interruptLeftovers();
    for (const id of ids) {
      const rec = this.deps.store.get(id)!;
      this.deps.bus.emit({ type: "run.interrupted", runId: id, system: rec.system });
      this.deps.log.warn(
        { runId: id, system: rec.system },
        "run interrupted by a bridge stop; it will not be re-run unless resumed",
      );
    }
    return ids;
  }

  get(id: string): RunRecord | undefined {
    return this.deps.store.get(id);
  }

  /** Whether the run is executing in this process now. */
  isLive(id: string): boolean {
    return this.live.has(id);
  }

  /** Resolves when the run stops (completed, failed, paused, cancelled, interrupted). */
  wait(id: string): Promise<RunRecord> {
    const l = this.live.get(id);
    if (l) return l.done;
    const rec = this.deps.store.get(id);
    if (!rec) return Promise.reject(new RunError("not_found", `no run ${id}`));
    return Promise.resolve(rec);
  }

  start(req: StartRequest): RunRecord {
    if (this.closed) throw new RunError("conflict", "the bridge is shutting down");
    const system = this.deps.library.get(req.system);
    if (!system) throw new RunError("unknown_system", `no system ${req.system}`);
    const id = alnumId("run", 16);
    const plan = this.deps.library.plan(system.id);
    this.deps.store.create({
      id,
      system: system.id,
      conversation: req.conversation,
      inputs: req.inputs,
      origin: req.origin,
      messageKey: req.messageKey,
      steps: plan.steps.map((s) => s.id),
    });
    this.launch(id);
    return this.deps.store.get(id)!;
  }

  /** Resume a paused, interrupted or failed run from its first unfinished step. */
  resume(id: string): RunRecord {
    if (this.closed) throw new RunError("conflict", "the bridge is shutting down");
    const rec = this.deps.store.get(id);
    if (!rec) throw new RunError("not_found", `no run ${id}`);
    if (this.live.has(id) || !RESUMABLE.has(rec.status))
      throw new RunError(
        "conflict",
        `run ${id} is ${rec.status}; only a paused, interrupted or failed run can be resumed`,
      );
    if (!this.deps.library.get(rec.system))
      throw new RunError("unknown_system", `run ${id} is of system ${rec.system}, which is no longer configured`);
    this.deps.store.resetUnfinished(id);
    this.launch(id);
    return this.deps.store.get(id)!;
  }

  async pause(id: string): Promise<RunRecord> {
    const l = this.live.get(id);
    const rec = this.deps.store.get(id);
    if (!rec) throw new RunError("not_found", `no run ${id}`);
    if (!l) throw new RunError("conflict", `run ${id} is ${rec.status}; only a running run can be paused`);
    l.cancel.abort(new RunStop("paused"));
    return l.done;
  }

  async cancel(id: string): Promise<RunRecord> {
    const l = this.live.get(id);
    if (l) {
      l.cancel.abort(new RunStop("cancelled"));
      return l.done;
    }
    const rec = this.deps.store.get(id);
    if (!rec) throw new RunError("not_found", `no run ${id}`);
    if (ENDED.has(rec.status) && rec.status !== "interrupted")
      throw new RunError("conflict", `run ${id} already ended (${rec.status})`);
    this.deps.store.finish(id, { status: "cancelled", error: "cancelled" });
    this.deps.store.resetUnfinished(id);
    this.deps.bus.emit({ type: "run.cancelled", runId: id, system: rec.system });
    return this.deps.store.get(id)!;
  }

  /** True once shutdown began: no new run starts, and a chat turn going away no longer cancels its run. */
  get closing(): boolean {
    return this.closed;
  }

  /** First step of shutdown: refuse new runs; running ones go on until `close`. */
  beginClose(): void {
    this.closed = true;
  }

  /** Shutdown: stop every run; they end `interrupted` (resumable). */
  async close(): Promise<void> {
    this.closed = true;
    const all = [...this.live.values()];
    for (const l of all) l.cancel.abort(new RunStop("shutdown"));
    await Promise.allSettled(all.map((l) => l.done));
  }

  private launch(id: string): void {
    const cancel = new Cancellation();
    // Started on the next microtask: the caller subscribes to the run's events first.
    const done = Promise.resolve()
      .then(() => this.execute(id, cancel))
      .catch((err: unknown) => {
        // Only the store itself failing gets here; the run is reported failed if it can be.
        this.deps.log.error({ err, runId: id }, "run could not be executed");
        try {
          this.deps.store.finish(id, { status: "failed", error: (err as Error).message });
        } catch {
          /* the store is gone */
        }
        return this.deps.store.get(id) ?? ({ id, status: "failed" } as RunRecord);
      })
      .finally(() => this.live.delete(id));
    this.live.set(id, { cancel, done });
  }

  private async execute(id: string, cancel: Cancellation): Promise<RunRecord> {
    const { store, bus, log } = this.deps;
    const rec = store.get(id)!;
    const system = this.deps.library.get(rec.system)!;
    const started = Date.now();
    store.markStarted(id);
    bus.emit({ type: "run.started", runId: id, system: system.id, conversation: rec.conversation });
    const done: Record<string, unknown> = {};
    for (const s of rec.steps) if (s.status === "completed") done[s.id] = s.output;
    const hooks: StepHooks = {
      started: (step, attempt) => {
        store.stepStarted(id, step, attempt);
        bus.emit({ type: "step.started", runId: id, step, attempt });
      },
      retry: (step, attempt, error, delayMs) =>
        bus.emit({ type: "step.retry", runId: id, step, attempt, error: error.message, delayMs }),
      completed: (step, output, ms) => {
        store.stepEnded(id, step, "completed", { output });
        bus.emit({ type: "step.completed", runId: id, step, ms });
      },
      failed: (step, error, ms) => {
        store.stepEnded(id, step, "failed", { error: error.message });
        bus.emit({ type: "step.failed", runId: id, step, error: error.message, ms });
      },
      skipped: (step, reason) => {
        store.stepEnded(id, step, "skipped", { error: reason });
        bus.emit({ type: "step.skipped", runId: id, step, reason });
      },
      stopped: (step) => store.stepEnded(id, step, "pending"),
    };
    let end: { status: RunStatus; output?: unknown; error?: string; failedStep?: string };
    try {
      const plan = this.deps.library.plan(system.id);
      const res = await runPlan({
        plan,
        done,
        cancel,
        hooks,
        retryBaseMs: this.deps.retryBaseMs,
        attempt: (step, outputs, attemptCancel) =>
          this.attempt(id, rec, step, { inputs: rec.inputs, steps: wrap(outputs), runId: id }, attemptCancel, 0),
      });
      if (res.outcome === "completed") end = { status: "completed", output: res.outputs[plan.output] };
      else if (res.outcome === "failed") end = { status: "failed", error: res.error, failedStep: res.failedStep };
      else {
        const stop = cancel.reason instanceof RunStop ? cancel.reason.kind : "cancelled";
        end =
          stop === "paused"
            ? { status: "paused" }
            : stop === "shutdown"
              ? { status: "interrupted", error: "the bridge stopped while this run was going" }
              : { status: "cancelled", error: "cancelled" };
      }
    } catch (err) {
      log.error({ err, runId: id }, "run crashed");
      end = { status: "failed", error: (err as Error).message };
    }
    if (end.status === "paused") store.setStatus(id, "paused");
    else store.finish(id, end);
    if (end.status === "cancelled") store.resetUnfinished(id);
    const ms = Date.now() - started;
    switch (end.status) {
      case "completed":
        bus.emit({ type: "run.completed", runId: id, system: system.id, ms });
        break;
      case "failed":
        bus.emit({
          type: "run.failed",
          runId: id,
          system: system.id,
          step: end.failedStep,
          error: end.error ?? "failed",
          ms,
        });
        break;
      case "paused":
        bus.emit({ type: "run.paused", runId: id, system: system.id });
        break;
      case "cancelled":
        bus.emit({ type: "run.cancelled", runId: id, system: system.id });
        break;
      case "interrupted":
        store.markDetached(id);
        bus.emit({ type: "run.interrupted", runId: id, system: system.id });
        break;
    }
    log.info({ runId: id, system: system.id, status: end.status, ms, failedStep: end.failedStep }, "run ended");
    return store.get(id)!;
  }

  /** One attempt of one step: a leaf kind, or another system run inline as a nested plan. */
  private async attempt(
    runId: string,
    rec: RunRecord,
    step: CompiledStep,
    scope: Scope,
    cancel: Cancellation,
    depth: number,
    prefix = "",
  ): Promise<ExecResult> {
    const stepName = prefix + step.id;
    if (step.target.kind === "leaf") {
      const ctx: ExecContext = {
        step: stepName,
        runId,
        systemId: rec.system,
        conversation: rec.conversation,
        scope,
        cancel,
        output: (text) => this.deps.bus.emit({ type: "run.output", runId, step: stepName, text }),
        log: this.deps.log,
        workDir: () => {
          const dir = path.join(this.deps.dataDir, "runs", runId);
          mkdirSync(dir, { recursive: true, mode: 0o700 });
          return dir;
        },
        callModel: this.deps.callModel,
        sandbox: existingDir(sandboxDir(this.deps.dataDir, rec.system)),
      };
      try {
        return await executeLeaf(step.target.spec, ctx);
      } catch (err) {
        if (cancel.aborted && !(err instanceof ExecError && err.code === "cancelled"))
          throw new ExecError("cancelled", "stopped");
        throw err;
      }
    }
    if (depth >= (this.deps.maxDepth ?? 8))
      throw new ExecError("invalid", `systems nested more than ${this.deps.maxDepth ?? 8} deep`);
    const sub = this.deps.library.get(step.target.system);
    if (!sub) throw new ExecError("invalid", `system ${step.target.system} is no longer configured`);
    const subInputs = renderValue(step.target.with, scope) as Record<string, unknown>;
    const plan = this.deps.library.plan(sub.id);
    const subPrefix = `${stepName}/`;
    const bus = this.deps.bus;
    const res = await runPlan({
      plan,
      done: {},
      cancel,
      retryBaseMs: this.deps.retryBaseMs,
      hooks: {
        started: (s, attempt) => bus.emit({ type: "step.started", runId, step: subPrefix + s, attempt }),
        retry: (s, attempt, e, delayMs) =>
          bus.emit({ type: "step.retry", runId, step: subPrefix + s, attempt, error: e.message, delayMs }),
        completed: (s, _o, ms) => bus.emit({ type: "step.completed", runId, step: subPrefix + s, ms }),
        failed: (s, e, ms) => bus.emit({ type: "step.failed", runId, step: subPrefix + s, error: e.message, ms }),
        skipped: (s, reason) => bus.emit({ type: "step.skipped", runId, step: subPrefix + s, reason }),
        stopped: () => {},
      },
      attempt: (s, outputs, c) =>
        this.attempt(
          runId,
          { ...rec, system: sub.id },
          s,
          { inputs: subInputs, steps: wrap(outputs), runId },
          c,
          depth + 1,
          subPrefix,
        ),
    });
    if (res.outcome === "completed") return { output: res.outputs[plan.output] };
    if (res.outcome === "stopped") throw new ExecError("cancelled", "stopped");
    // The nested run already retried its own steps: not retryable as a whole.
    throw new ExecError("invalid", `system ${sub.id} failed at step ${res.failedStep}: ${res.error}`, false);
  }
}

const wrap = (outputs: Record<string, unknown>) =>
  Object.fromEntries(Object.entries(outputs).map(([k, v]) => [k, { output: v }]));
