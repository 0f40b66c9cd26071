/**
 * Every run of steps — a system's, and a build (origin `builder`, whose program the builder
 * registers) — with its record: start (written `pending` before anything runs), pause, resume (from
 * the first unfinished step), cancel, and shutdown. The steps are scheduled by the engine
 * (src/workflows/engine/scheduler.ts); the manager's hook handlers write every change to the run
 * store and publish it on the event bus (`run.*`, `step.*` with the run's origin, and `run.output`
 * for the text a step streams). A run belongs to the manager, not to the chat turn that started it: the turn may
 * detach and the run goes on; cancelling it is an explicit act (`cancel`, or the router when the
 * client of an attached turn goes away).
 *
 * A test run (`test`, a dry run) runs model steps for real and gives each step with side effects
 * (a webhook, a command, a destructive MCP tool) the record of what would have been sent as its
 * output instead (executors/index.ts); its secrets are rendered as `[secret NAME]`, never read.
 * A system's run records the system version it runs (src/workflows/systems/versions.ts: the
 * latest, or the one asked for) and executes that version's plan, also when resumed after a deploy.
 *
 * SQLite (one bridge): a run found `running` or `pending` at start-up (the bridge stopped under it)
 * becomes `interrupted` (`recover`) and is never re-run silently: resuming it is somebody's decision.
 * PostgreSQL (`lease`, several instances; the sweep is leases.ts): runs are claimed, not owned. The instance executing a
 * run holds its lease and renews all its leases in one statement every `lease.ms / 3`; a run whose
 * lease lapsed (its instance died) is claimed by another instance on its sweep and goes on from its
 * first unfinished step, as a resume does (completed steps are never run again; the one going when
 * the instance died is). Another instance's live runs are never touched at start; a clean shutdown
 * lets its runs go (`running`, lease lapsed) for another instance to claim at once. Only `pending`
 * and `running` runs need a live owner: paused, waiting and ended runs are rows any instance acts on.
 *
 * Approvals: an `approval` step with no decision yet writes its question (approvals.ts) and stops
 * the run as a pause does, but `waiting`; `decide` records the one decision (a person's, or the
 * timeout's: a timer while the bridge runs, and at start-up for deadlines that passed while it was
 * down) and resumes the run (approved) or ends it `rejected` (the note as its error). A waiting
 * run stays waiting across a restart.
 */
import { existsSync, mkdirSync } from "node:fs";
import path from "node:path";
import type { Logger } from "pino";
import type { EventBus } from "../../ops/events/bus.js";
import type { RunOrigin, RunStatus } from "../../wire/runs.js";
import { Cancellation } from "../../core/util/cancel.js";
import { secretRedactor } from "../../core/secrets/redactor.js";
import { alnumId } from "../../core/util/ids.js";
import type { Lease, RunRecord, RunStore } from "./db.js";
import { RunLeases } from "./leases.js";
import { type ApprovalGate, ExecError, type ExecContext, type ExecResult, type ModelCaller } from "./step-executor.js";
import { executeLeaf } from "./executors/index.js";
import { sandboxDir } from "./paths.js";
import type { SystemsLibrary } from "./library.js";
import { RunHooks, runSteps, type EngineStep, type RunOutcome } from "../engine/scheduler.js";
import { ApprovalDeadlines, ApprovalStore } from "./approvals.js";
import { compileRun, type CompiledPlan, type CompiledStep } from "./plan.js";
import { type VersionStore, versionsOf } from "./versions.js";
import { renderValue, type Scope } from "../engine/template.js";

export interface RunManagerDeps {
  store: RunStore;
  library: SystemsLibrary;
  bus: EventBus;
  callModel: ModelCaller;
  /** Per-run working directories go under `<dataDir>/runs/<runId>`. */
  dataDir: string;
  log: Logger;
  /** A secret's value for `${secrets.NAME}` (src/core/secrets/store.ts); undefined when it is not set. */
  secret?: (name: string) => string | undefined;
  /** First retry delay of a failing step (doubles each time). 1000 ms. */
  retryBaseMs?: number;
  /** Nesting limit for systems that use systems (loops are refused at load; this is a guard). */
  maxDepth?: number;
  /** The systems' versions (the runtime's store); default those in the run store's database. */
  versions?: VersionStore;
  /**
   * PostgreSQL (several instances on one database): this instance's id and the lease of a run it
   * executes (store.leaseSeconds). Runs are then claimed, not owned (see the header); without it
   * (SQLite) a run left going by a stopped bridge is `interrupted` at start.
   */
  lease?: Lease;
}

/** Why a run was stopped from outside. */
export class RunStop {
  /** `lost`: another instance holds the run now (its lease lapsed here, or it was cancelled there); nothing is written. */
  constructor(readonly kind: "paused" | "waiting" | "cancelled" | "shutdown" | "lost") {}
}

export class RunError extends Error {
  constructor(
    readonly code: "not_found" | "conflict" | "unknown_system" | "unknown_version",
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
  /** A test run (dry run): see the header. */
  test?: boolean;
  /** A schedule's (`schedule:<index>`) or a hook's run; `detached`: its conversation is told on its next turn. */
  trigger?: string;
  detached?: boolean;
  /** The system version to run (src/workflows/systems/versions.ts); default its latest. */
  version?: number;
}

/** What a run executes: its steps, one attempt of a step, and the run's output. */
export interface RunProgram {
  steps: readonly EngineStep[];
  maxParallel: number;
  attempt(step: EngineStep, outputs: Record<string, unknown>, cancel: Cancellation): Promise<{ output: unknown }>;
  output(outputs: Record<string, unknown>): unknown;
  /** Let go of what the program holds (a tool connection), whatever the end. */
  close?(): Promise<void>;
}

/** Makes the program of a run of a registered origin (the builder's builds), also when it is resumed. */
export type ProgramSource = (rec: RunRecord) => Promise<RunProgram>;

/** A launch's own program (else its origin's, or its system's) and hook handlers (a chat turn following it). */
export interface LaunchOptions {
  program?: ProgramSource;
  observe?: (hooks: RunHooks) => void;
}

/**
 * How a run stopped here. `handOver` (PostgreSQL): it goes on elsewhere, `running` — `release`d
 * at this instance's shutdown for another to claim at once, or `lost` to another already.
 */
type RunEnd = {
  status: RunStatus;
  output?: unknown;
  error?: string;
  failedStep?: string;
  handOver?: "release" | "lost";
};

/** A decision on the approval a run waits on: `by` http, chat or timeout. */
export interface DecideRequest {
  approve: boolean;
  by: string;
  note?: string;
  /** The approval step (default: the one the run shows, its first). */
  step?: string;
}

interface LiveRun {
  cancel: Cancellation;
  done: Promise<RunRecord>;
}

const ENDED: ReadonlySet<RunStatus> = new Set(["completed", "failed", "rejected", "cancelled", "interrupted"]);
const RESUMABLE: ReadonlySet<RunStatus> = new Set(["paused", "interrupted", "failed"]);

export class RunManager {
  private readonly live = new Map<string, LiveRun>();
  private readonly sources = new Map<RunOrigin, ProgramSource>();
  private readonly approvals: ApprovalStore;
  /** The approvals' deadlines: at each, `onTimeout` is decided (by `timeout`). */
  private readonly deadlines = new ApprovalDeadlines((a) =>
    this.decide(a.runId, { approve: a.onTimeout === "approve", by: "timeout", step: a.step }).catch((err) =>
      // A conflict: decided already (by a person, or by another instance at the same deadline).
      err instanceof RunError && err.code === "conflict"
        ? this.deps.log.debug({ runId: a.runId, step: a.step }, "the approval was decided already")
        : this.deps.log.warn({ err, runId: a.runId, step: a.step }, "the approval's timeout was not applied"),
    ),
  );
  private closed = false;
  /** PostgreSQL: this instance's leases renewed, and lapsed runs claimed (leases.ts). */
  private readonly leases: RunLeases | undefined;
  /** The systems' versions (same database as the runs). */
  readonly versions: VersionStore;

  constructor(private readonly deps: RunManagerDeps) {
    this.approvals = new ApprovalStore(deps.store.sql);
    this.versions = deps.versions ?? versionsOf(deps.store.sql, deps.dataDir);
    this.leases = deps.lease && this.leasesOf(deps.lease);
  }

  get store(): RunStore {
    return this.deps.store;
  }

  /**
   * Start-up: waiting runs stay waiting, their approvals' deadlines watched again (one that passed
   * applies now). SQLite: runs left `running`/`pending` by a bridge that stopped become
   * `interrupted` (returned). PostgreSQL: another instance's runs are left alone; runs whose lease
   * lapsed are claimed and go on here (returned), and from now on every `lease.ms / 3` this
   * instance renews its leases and claims lapsed ones (`sweep`).
   */
  async recover(): Promise<string[]> {
    for (const a of await this.approvals.open()) this.deadlines.watch(a);
    if (this.leases) return this.leases.start();
    const ids = await this.deps.store.interruptLeftovers();
    for (const id of ids) {
      const rec = (await this.deps.store.get(id))!;
      this.deps.bus.emit({ type: "run.interrupted", ...runEvent(rec) });
      this.deps.log.warn(
        { runId: id, system: rec.system },
        "run interrupted by a bridge stop; it will not be re-run unless resumed",
      );
    }
    return ids;
  }

  /**
   * PostgreSQL, every `lease.ms / 3` (leases.ts): a live run not renewed is another instance's now
   * (stopped here, nothing written); a claimed run goes on here from its first unfinished step; and
   * every open approval's deadline is watched (whichever instance is first at a deadline decides
   * it; `decide` takes one decision).
   */
  private leasesOf(lease: Lease): RunLeases {
    const { store, library, log } = this.deps;
    return new RunLeases(lease, {
      store,
      live: () => this.live.keys(),
      lost: (id) => {
        const l = this.live.get(id);
        if (!l || l.cancel.aborted) return;
        log.warn({ runId: id }, "run's lease was lost (another instance holds it, or it ended there); stopped here");
        l.cancel.abort(new RunStop("lost"));
      },
      can: () => ({ systems: library.systems.map((s) => s.id), builds: this.sources.has("builder") }),
      closing: () => this.closed,
      takeOver: async (id) => {
        await store.resetUnfinished(id);
        const rec = await this.launch(id);
        log.info(
          { runId: id, system: rec.system, from: rec.steps.find((s) => s.status !== "completed")?.id },
          "run taken over (its lease lapsed); it goes on from its first unfinished step",
        );
      },
      swept: async () => {
        for (const a of await this.approvals.open()) this.deadlines.watch(a);
      },
      onError: (err) => log.warn({ err }, "run leases were not renewed or claimed (the database did not answer)"),
    });
  }

  get(id: string): Promise<RunRecord | undefined> {
    return this.deps.store.get(id);
  }

  /** Whether the run is executing in this process now. */
  isLive(id: string): boolean {
    return this.live.has(id);
  }

  /** Resolves when the run stops (completed, failed, paused, cancelled, interrupted). */
  async wait(id: string): Promise<RunRecord> {
    const l = this.live.get(id);
    if (l) return l.done;
    const rec = await this.deps.store.get(id);
    if (!rec) throw new RunError("not_found", `no run ${id}`);
    return rec;
  }

  async start(req: StartRequest): Promise<RunRecord> {
    if (this.closed) throw new RunError("conflict", "the bridge is shutting down");
    const system = this.deps.library.get(req.system);
    if (!system) throw new RunError("unknown_system", `no system ${req.system}`);
    // The version as loaded now, or the one asked for.
    const v =
      req.version === undefined ? await this.versions.current(system) : await this.versions.get(system.id, req.version);
    if (!v) {
      const last = (await this.versions.latest(system.id))?.number ?? 0;
      throw new RunError(
        "unknown_version",
        `system ${system.id} has no version ${req.version} (its versions: ${last ? `1 to ${last}` : "none yet"})`,
      );
    }
    const steps = compileRun(v.compiled.run).steps.map((s) => s.id);
    return this.create({ ...req, id: alnumId("run", 16), system: system.id, version: v.number, steps });
  }

  /** The plan a run executes: its version's (a deploy since does not change it), else the system's current one. */
  async planOf(rec: RunRecord): Promise<CompiledPlan> {
    const v = rec.version === undefined ? undefined : await this.versions.get(rec.system, rec.version);
    return v ? compileRun(v.compiled.run) : this.deps.library.plan(rec.system);
  }

  /** Resume a paused, interrupted or failed run from its first unfinished step. */
  async resume(id: string, opts: LaunchOptions = {}): Promise<RunRecord> {
    if (this.closed) throw new RunError("conflict", "the bridge is shutting down");
    const rec = await this.deps.store.get(id);
    if (!rec) throw new RunError("not_found", `no run ${id}`);
    if (this.live.has(id) || !RESUMABLE.has(rec.status))
      throw new RunError(
        "conflict",
        `run ${id} is ${rec.status}; only a paused, interrupted or failed run can be resumed`,
      );
    if (!opts.program && !this.sources.has(rec.origin)) {
      // A build is never re-run as the system deployed from its canvas.
      if (rec.origin === "builder")
        throw new RunError("conflict", `run ${id} is a build; no builder backend is configured to carry it out`);
      if (!this.deps.library.get(rec.system))
        throw new RunError("unknown_system", `run ${id} is of system ${rec.system}, which is no longer configured`);
    }
    await this.deps.store.resetUnfinished(id);
    if (this.deps.lease) await this.deps.store.claim(id, this.deps.lease);
    return this.launch(id, opts);
  }

  async pause(id: string): Promise<RunRecord> {
    const l = this.live.get(id);
    const rec = await this.deps.store.get(id);
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
    const rec = await this.deps.store.get(id);
    if (!rec) throw new RunError("not_found", `no run ${id}`);
    if (ENDED.has(rec.status) && rec.status !== "interrupted")
      throw new RunError("conflict", `run ${id} already ended (${rec.status})`);
    this.deadlines.unwatch(id);
    await this.deps.store.finish(id, { status: "cancelled", error: "cancelled" });
    await this.deps.store.resetUnfinished(id);
    this.deps.bus.emit({ type: "run.cancelled", ...runEvent(rec) });
    return (await this.deps.store.get(id))!;
  }

  /** True once shutdown began: no new run starts, and a chat turn going away no longer cancels its run. */
  get closing(): boolean {
    return this.closed;
  }

  /** First step of shutdown: refuse new runs; running ones go on until `close`. */
  beginClose(): void {
    this.closed = true;
  }

  /** Shutdown: stop every run; they end `interrupted` (resumable), or on PostgreSQL are let go for another instance. */
  async close(): Promise<void> {
    this.closed = true;
    this.leases?.stop();
    this.deadlines.clear();
    const all = [...this.live.values()];
    for (const l of all) l.cancel.abort(new RunStop("shutdown"));
    await Promise.allSettled(all.map((l) => l.done));
  }

  /** Write a run and start it: a system's (`start`), or one of another origin (a build) with its program. */
  async create(run: Parameters<RunStore["create"]>[0], opts: LaunchOptions = {}): Promise<RunRecord> {
    if (this.closed) throw new RunError("conflict", "the bridge is shutting down");
    await this.deps.store.create(run, this.deps.lease);
    return this.launch(run.id, opts);
  }

  /**
   * Approve or reject the approval a `waiting` run waits on, once (a run not waiting, or an
   * approval already decided, is a conflict). Approved, the run goes on from that step (and this
   * resolves once it is launched); rejected, it ends `rejected` with the note as its error.
   */
  async decide(id: string, req: DecideRequest, opts: LaunchOptions = {}): Promise<RunRecord> {
    const { store, bus } = this.deps;
    if (this.closed) throw new RunError("conflict", "the bridge is shutting down");
    const rec = await store.get(id);
    if (!rec) throw new RunError("not_found", `no run ${id}`);
    if (rec.status !== "waiting")
      throw new RunError("conflict", `run ${id} is ${rec.status}, not waiting for an approval`);
    const a = req.step ? await this.approvals.get(id, req.step) : rec.approval;
    const decision = req.approve ? "approved" : "rejected";
    const at = Date.now();
    if (!a || !(await this.approvals.decide(id, a.step, { decision, by: req.by, at, note: req.note })))
      throw new RunError("conflict", `the approval of run ${id} was already decided`);
    this.deadlines.unwatch(id, a.step);
    bus.emit({
      type: "approval.decided",
      runId: id,
      system: rec.system,
      step: a.step,
      decision,
      by: req.by,
      ...(req.note ? { note: req.note } : {}),
    });
    this.deps.log.info({ runId: id, step: a.step, decision, by: req.by }, "approval decided");
    // The stop that made it wait may still be finishing.
    await this.live.get(id)?.done;
    // Told afresh when it ends (or waits again) in the background.
    await store.markDetached(id);
    if (req.approve) {
      await store.resetUnfinished(id);
      if (this.deps.lease) await store.claim(id, this.deps.lease);
      return this.launch(id, opts);
    }
    const step = a.step.split("/")[0]!;
    const error = req.note ?? `rejected by ${req.by}`;
    await store.stepEnded(id, step, "failed", { error: `rejected by ${req.by}${req.note ? `: ${req.note}` : ""}` });
    await store.finish(id, { status: "rejected", error, failedStep: step });
    this.deadlines.unwatch(id);
    bus.emit({ type: "run.rejected", ...runEvent(rec), step, error });
    return (await store.get(id))!;
  }

  /** Where the programs of runs of `origin` come from (the builder registers its builds). */
  register(origin: RunOrigin, source: ProgramSource): void {
    this.sources.set(origin, source);
  }

  /** Execute the run in the background; resolves to its record as it is before it starts. */
  private async launch(id: string, opts: LaunchOptions = {}): Promise<RunRecord> {
    const rec = (await this.deps.store.get(id))!;
    const cancel = new Cancellation();
    // Started on the next macrotask: the caller gets the record and subscribes to the run's events first.
    const done = new Promise<void>((r) => setImmediate(r))
      .then(() => this.execute(id, cancel, opts))
      .catch(async (err: unknown) => {
        // Only the store itself (or a program's set-up) failing gets here; the run is reported failed if it can be.
        this.deps.log.error({ err, runId: id }, "run could not be executed");
        try {
          const rec = await this.deps.store.get(id);
          if (rec) await this.persistEnd(rec, { status: "failed", error: (err as Error).message }, 0);
          return rec ?? ({ id, status: "failed" } as RunRecord);
        } catch {
          /* the store is gone */
          return { id, status: "failed" } as RunRecord;
        }
      })
      .finally(() => this.live.delete(id));
    this.live.set(id, { cancel, done });
    return rec;
  }

  /** The steps a run executes: a system's plan, or what the source of its origin makes. */
  private async program(rec: RunRecord, given?: ProgramSource): Promise<RunProgram> {
    const source = given ?? this.sources.get(rec.origin);
    if (source) return source(rec);
    const plan = await this.planOf(rec);
    return {
      steps: plan.steps,
      maxParallel: plan.maxParallel,
      attempt: (step, outputs, attemptCancel) =>
        this.attempt(rec, step as CompiledStep, rec.inputs, outputs, attemptCancel, 0),
      output: (outputs) => outputs[plan.output],
    };
  }

  private async execute(id: string, cancel: Cancellation, opts: LaunchOptions): Promise<RunRecord> {
    const { store, bus, log } = this.deps;
    const rec = (await store.get(id))!;
    const program = await this.program(rec, opts.program);
    const ev = { runId: id, system: rec.system, origin: rec.origin };
    const started = Date.now();
    await store.markStarted(id);
    const done: Record<string, unknown> = {};
    for (const s of rec.steps) if (s.status === "completed") done[s.id] = s.output;
    let end: RunEnd = { status: "failed", error: "the run did not end" };
    const hooks = new RunHooks()
      .addHandler("runBefore", () =>
        bus.emit({ type: "run.started", ...runEvent(rec), conversation: rec.conversation }),
      )
      .addHandler("stepBefore", (step, attempt) => store.stepStarted(id, step, attempt))
      .addHandler("stepAfter", (step, e) =>
        // A run lost to another instance is that instance's to write.
        cancel.reason instanceof RunStop && cancel.reason.kind === "lost"
          ? undefined
          : store.stepEnded(id, step, e.status === "stopped" ? "pending" : e.status, {
              output: e.status === "completed" ? e.output : undefined,
              error: e.status === "failed" ? e.error.message : e.status === "skipped" ? e.reason : undefined,
            }),
      )
      .addHandler("runAfter", async (res) => {
        end = this.endOf(res, cancel, program);
        await this.persistEnd(rec, end, Date.now() - started);
      });
    publishSteps(hooks, bus, ev);
    opts.observe?.(hooks);
    try {
      await runSteps({
        steps: program.steps,
        maxParallel: program.maxParallel,
        done,
        cancel,
        hooks,
        retryBaseMs: this.deps.retryBaseMs,
        attempt: program.attempt,
      });
    } catch (err) {
      log.error({ err, runId: id }, "run crashed");
      end = { status: "failed", error: (err as Error).message };
      await this.persistEnd(rec, end, Date.now() - started);
    } finally {
      await program.close?.().catch(() => {});
    }
    log.info(
      { runId: id, system: rec.system, origin: rec.origin, status: end.status, failedStep: end.failedStep },
      "run ended",
    );
    return (await store.get(id))!;
  }

  private endOf(res: RunOutcome, cancel: Cancellation, program: RunProgram): RunEnd {
    if (res.outcome === "completed") return { status: "completed", output: program.output(res.outputs) };
    if (res.outcome === "failed") return { status: "failed", error: res.error, failedStep: res.failedStep };
    const stop = cancel.reason instanceof RunStop ? cancel.reason.kind : "cancelled";
    if (stop === "paused") return { status: "paused" };
    if (stop === "waiting") return { status: "waiting" };
    if (stop === "lost") return { status: "running", handOver: "lost" };
    if (stop === "shutdown" && this.deps.lease) return { status: "running", handOver: "release" };
    if (stop === "shutdown") return { status: "interrupted", error: "the bridge stopped while this run was going" };
    return { status: "cancelled", error: "cancelled" };
  }

  /** The run's end written and published (`run.completed|failed|paused|waiting|cancelled|interrupted`). */
  private async persistEnd(rec: RunRecord, end: RunEnd, ms: number): Promise<void> {
    const { store, bus } = this.deps;
    const ev = runEvent(rec);
    if (end.handOver === "release") {
      await this.leases!.release(rec.id);
      this.deps.log.info({ runId: rec.id }, "run let go at shutdown; another instance goes on with it");
    }
    if (end.handOver) return;
    if (end.status === "waiting") return this.persistWaiting(rec);
    if (end.status === "paused") await store.setStatus(rec.id, "paused");
    else await store.finish(rec.id, end);
    if (end.status === "cancelled") await store.resetUnfinished(rec.id);
    if (end.status === "interrupted") await store.markDetached(rec.id);
    if (end.status === "completed") bus.emit({ type: "run.completed", ...ev, ms });
    else if (end.status === "failed")
      bus.emit({ type: "run.failed", ...ev, step: end.failedStep, error: end.error ?? "failed", ms });
    else if (end.status === "paused" || end.status === "cancelled" || end.status === "interrupted")
      bus.emit({ type: `run.${end.status}`, ...ev });
  }

  /** A run stopped at its approvals: their steps `waiting`, their deadlines watched, told in the background. */
  private async persistWaiting(rec: RunRecord): Promise<void> {
    const { store, bus } = this.deps;
    await store.setStatus(rec.id, "waiting");
    await store.markDetached(rec.id);
    for (const a of await this.approvals.open(rec.id)) {
      await store.stepEnded(rec.id, a.step.split("/")[0]!, "waiting");
      this.deadlines.watch(a);
    }
    const first = (await store.get(rec.id))?.approval;
    bus.emit({
      type: "run.waiting",
      ...runEvent(rec),
      step: first?.step ?? "",
      question: first?.question ?? "",
    });
  }

  /** The run's side of an approval step named `stepName` (its question written once; the whole run stops `waiting`). */
  private gate(rec: RunRecord, stepName: string, step: CompiledStep, outputs: Record<string, unknown>): ApprovalGate {
    return {
      decided: async () => (await this.approvals.get(rec.id, stepName))?.decided,
      upstream: Object.fromEntries(step.dependsOn.map((d) => [d, outputs[d]])),
      wait: async (q) => {
        if (!(await this.approvals.get(rec.id, stepName))) {
          const now = Date.now();
          const a = await this.approvals.request({
            runId: rec.id,
            step: stepName,
            question: q.question,
            shown: q.shown,
            createdAt: now,
            deadline: q.timeoutSeconds === undefined ? undefined : now + Math.round(q.timeoutSeconds * 1000),
            onTimeout: q.onTimeout,
          });
          this.deps.bus.emit({
            type: "approval.requested",
            runId: rec.id,
            system: rec.system,
            step: stepName,
            question: a.question,
            ...(a.deadline === undefined ? {} : { deadline: a.deadline }),
          });
        }
        this.live.get(rec.id)?.cancel.abort(new RunStop("waiting"));
      },
    };
  }

  /** One attempt of one step (`outputs`: its plan's steps' so far): a leaf kind, or another system run inline as a nested plan. */
  private async attempt(
    rec: RunRecord,
    step: CompiledStep,
    inputs: Record<string, unknown>,
    outputs: Record<string, unknown>,
    cancel: Cancellation,
    depth: number,
    prefix = "",
  ): Promise<ExecResult> {
    const runId = rec.id;
    const stepName = prefix + step.id;
    const steps = Object.fromEntries(Object.entries(outputs).map(([k, v]) => [k, { output: v }]));
    // A test run never reads a secret: what would have been sent shows where each one goes.
    const secret = rec.test ? (name: string) => `[secret ${name}]` : this.deps.secret;
    const scope: Scope = { inputs, steps, runId, secret };
    if (step.target.kind === "leaf") {
      const sandbox = sandboxDir(this.deps.dataDir, rec.system);
      let held = "";
      const publish = (text: string) => {
        if (text) this.deps.bus.emit({ type: "run.output", runId, step: stepName, text });
      };
      const ctx: ExecContext = {
        step: stepName,
        runId,
        systemId: rec.system,
        conversation: rec.conversation,
        scope,
        cancel,
        output: (text) => {
          // Never a piece that ends inside a secret's value: the bus could not see it whole to redact it.
          const all = held + text;
          const end = secretRedactor.safeEnd(all);
          held = all.slice(end);
          publish(all.slice(0, end));
        },
        log: this.deps.log,
        workDir: () => {
          const dir = path.join(this.deps.dataDir, "runs", runId);
          mkdirSync(dir, { recursive: true, mode: 0o700 });
          return dir;
        },
        callModel: this.deps.callModel,
        sandbox: existsSync(sandbox) ? sandbox : undefined,
        approval: step.target.spec.kind === "approval" ? this.gate(rec, stepName, step, outputs) : undefined,
        test: rec.test,
        listingSecret: rec.test ? this.deps.secret : undefined,
      };
      try {
        return await executeLeaf(step.target.spec, ctx);
      } catch (err) {
        if (cancel.aborted && !(err instanceof ExecError && err.code === "cancelled"))
          throw new ExecError("cancelled", "stopped");
        throw err;
      } finally {
        publish(held);
      }
    }
    if (depth >= (this.deps.maxDepth ?? 8))
      throw new ExecError("invalid", `systems nested more than ${this.deps.maxDepth ?? 8} deep`);
    const sub = this.deps.library.get(step.target.system);
    if (!sub) throw new ExecError("invalid", `system ${step.target.system} is no longer configured`);
    const subInputs = renderValue(step.target.with, scope) as Record<string, unknown>;
    const plan = this.deps.library.plan(sub.id);
    const subPrefix = `${stepName}/`;
    // Its steps are published under `<step>/<sub-step>`; only the top run's steps are stored.
    const hooks = publishSteps(new RunHooks(), this.deps.bus, { runId, origin: rec.origin }, subPrefix);
    const res = await runSteps({
      steps: plan.steps,
      maxParallel: plan.maxParallel,
      done: {},
      cancel,
      retryBaseMs: this.deps.retryBaseMs,
      hooks,
      attempt: (s, subOutputs, c) =>
        this.attempt({ ...rec, system: sub.id }, s, subInputs, subOutputs, c, depth + 1, subPrefix),
    });
    if (res.outcome === "completed") return { output: res.outputs[plan.output] };
    if (res.outcome === "stopped") throw new ExecError("cancelled", "stopped");
    // The nested run already retried its own steps: not retryable as a whole.
    throw new ExecError("invalid", `system ${sub.id} failed at step ${res.failedStep}: ${res.error}`, false);
  }
}

type StepEvent = { runId: string; system?: string; origin: RunOrigin };

/** What every run.* event of a run says of it (`test: true` only on a test run's). */
function runEvent(rec: RunRecord): { runId: string; system: string; origin: RunOrigin; test?: true } {
  return { runId: rec.id, system: rec.system, origin: rec.origin, ...(rec.test ? { test: true as const } : {}) };
}

/**
 * `step.started|retry|completed|failed|skipped` for the steps of `hooks`, named `<prefix><step>`
 * (a stopped step publishes nothing: it is pending again).
 */
function publishSteps(hooks: RunHooks, bus: EventBus, ev: StepEvent, prefix = ""): RunHooks {
  return hooks
    .addHandler("stepBefore", (s, attempt) => bus.emit({ type: "step.started", ...ev, step: prefix + s, attempt }))
    .addHandler("stepRetry", (s, attempt, e, delayMs) =>
      bus.emit({ type: "step.retry", ...ev, step: prefix + s, attempt, error: e.message, delayMs }),
    )
    .addHandler("stepAfter", (s, e) => {
      const step = prefix + s;
      if (e.status === "completed") bus.emit({ type: "step.completed", ...ev, step, ms: e.ms });
      else if (e.status === "failed") bus.emit({ type: "step.failed", ...ev, step, error: e.error.message, ms: e.ms });
      else if (e.status === "skipped") bus.emit({ type: "step.skipped", ...ev, step, reason: e.reason });
    });
}
