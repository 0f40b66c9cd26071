/**
 * The bridge's Prometheus metrics (`GET /metrics`, src/request/http/metrics-route.ts), with prom-client.
 *
 * Counters and histograms are fed ONLY by the event bus (src/ops/events/bus.ts): the pipeline, the
 * router, the run manager and the builder publish, this room listens; nothing else calls into it.
 * Gauges are read at scrape time through callbacks: the scheduler's `stats()` (turns running and
 * waiting), the live CLI process count, the version.
 *
 * Our families are named `clawbridge_*` and live in this instance's own `Registry` (never
 * prom-client's global one, so two bridges in one process never share counters); Node's process
 * metrics (`process_*`, `nodejs_*`, prom-client's names) are collected once per process in a
 * registry of their own and appended to every scrape.
 *
 * Cardinality is bounded: a model or backend label is one configured id or `other`; decision
 * actions, run, step and turn outcomes come from closed lists; error codes are accepted until
 * `MAX_ERROR_CODES` distinct ones were seen (fallback reasons until `MAX_REASONS`), then `other`. No conversation, run, turn or system id
 * is ever a label.
 */
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from "prom-client";
import { CellCounter, CellHistogram } from "./cells.js";
import type { EventBus } from "../events/bus.js";
import type { BridgeEvent, DecisionAction, EventOf } from "../../wire/events.js";
import type { TurnScheduler } from "../../request/queue/scheduler.js";
import { liveProcessCount } from "../../core/util/process.js";
import { warmEventTotals, warmMemory, warmSummary } from "../../backends/warm/registry.js";
import { VERSION } from "../../core/version.js";

/** What the labels may name: configured ids only. */
export interface MetricsLabels {
  /** Model ids clients may be served under (configured models and remap targets). */
  models: Iterable<string>;
  /** Backend names from the config. */
  backends: Iterable<string>;
}

export interface BridgeMetricsOptions extends MetricsLabels {
  bus: EventBus;
  /** The turn queue; its `stats()` is read at scrape time. */
  scheduler?: Pick<TurnScheduler, "stats">;
  /** Running CLI processes (default: src/core/util/process.ts `liveProcessCount`). */
  processes?: () => number;
}

/** The label lists from a resolved config (`models`, remap targets, `backends`). */
export function metricsLabels(config: {
  models: ReadonlyArray<{ id: string }>;
  backends: Record<string, unknown>;
  remapTargets?: Record<string, unknown>;
}): MetricsLabels {
  return {
    models: [...config.models.map((m) => m.id), ...Object.keys(config.remapTargets ?? {})],
    backends: Object.keys(config.backends),
  };
}

export const OTHER = "other";
/** Distinct `code` label values kept before the rest become `other`. */
export const MAX_ERROR_CODES = 40;
/** Distinct fallback `reason` label values kept before the rest become `other`. */
export const MAX_REASONS = 20;

// Closed lists, checked against the event types: a new action or source fails to compile here.
const DECISION_ACTIONS: Record<DecisionAction, true> = {
  answer: true,
  clarify: true,
  confirm: true,
  run: true,
  cancel: true,
  status: true,
  list: true,
  decline: true,
  give_up: true,
  resume: true,
  build: true,
  ask: true,
};
const DECISION_SOURCES: Record<EventOf<"decision">["source"], true> = {
  classifier: true,
  fallback: true,
  slash: true,
  reply: true,
  state: true,
  rule: true,
};
const QUEUE_SCOPES = new Set(["bridge", "conversation"]);

const seconds = (ms: number) => Math.max(0, ms) / 1000;

/** Seconds to the first byte of an answer: local servers answer in milliseconds, CLIs in seconds. */
const FIRST_BYTE_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120];
/** Whole turns: a quick proxied answer up to a CLI at its 300 s deadline and beyond. */
const DURATION_BUCKETS = [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600];
/** Waiting for a slot: most turns wait 0 s; the queue timeout is 60 s by default. */
const QUEUE_WAIT_BUCKETS = [0.005, 0.025, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];
/** Intent pre-execution (web search, page fetch) and runs of systems. */
const WORK_BUCKETS = [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600];

/** Node's process metrics, once per process (their observers live as long as the process). */
let processRegistry: Registry | undefined;
function processMetrics(): Registry {
  if (!processRegistry) {
    processRegistry = new Registry();
    collectDefaultMetrics({ register: processRegistry });
  }
  return processRegistry;
}

export class BridgeMetrics {
  /** This bridge's own families (`clawbridge_*`). */
  readonly registry = new Registry();
  private readonly models: Set<string>;
  private readonly backends: Set<string>;
  private readonly codes = new Set<string>();
  private readonly unsubscribe: () => void;

  // Observed on every turn: cells.ts (the same text as prom-client's, without its per-call label checks).
  private readonly turns: CellCounter;
  private readonly turnErrors: Counter<"backend" | "code">;
  private readonly firstByte: CellHistogram;
  private readonly duration: CellHistogram;
  private readonly tokens: CellCounter;
  private readonly queueWait: CellHistogram;
  private readonly rejected: Counter<"model" | "scope">;
  private readonly heals: Counter<"backend">;
  private readonly resets: Counter<"backend">;
  private readonly toolcalls: Counter<"model" | "backend">;
  private readonly intents: Counter<"model" | "outcome">;
  private readonly intentDuration: Histogram<"outcome">;
  private readonly decisions: Counter<"action" | "source">;
  private readonly runsStarted: Counter;
  private readonly runs: Counter<"outcome">;
  private readonly runDuration: Histogram<"outcome">;
  private readonly steps: Counter<"outcome">;
  private readonly stepRetries: Counter;
  private readonly builds: Counter<"outcome">;
  private readonly buildSteps: Counter<"outcome">;
  private readonly backendUp: Gauge<"backend">;
  private readonly fallbacks: Counter<"from" | "to" | "reason">;
  private readonly limitHits: Counter<"backend">;
  private readonly reasons = new Set<string>();

  constructor(opts: BridgeMetricsOptions) {
    this.models = new Set(opts.models);
    this.backends = new Set(opts.backends);
    const registers = [this.registry];
    const stats = () => opts.scheduler?.stats();
    const processes = opts.processes ?? liveProcessCount;

    // Read at scrape time.
    new Gauge({
      name: "clawbridge_info",
      help: "Always 1; the bridge's version as a label.",
      labelNames: ["version"],
      registers,
    }).set({ version: VERSION }, 1);
    new Gauge({
      name: "clawbridge_turns_in_flight",
      help: "Turns holding a slot (running) right now.",
      registers,
      collect() {
        this.set(stats()?.running ?? 0);
      },
    });
    new Gauge({
      name: "clawbridge_queue_depth",
      help: "Turns waiting for a slot or for their conversation's running turn.",
      registers,
      collect() {
        this.set(stats()?.waiting ?? 0);
      },
    });
    new Gauge({
      name: "clawbridge_queue_conversations",
      help: "Conversations with a turn running or waiting.",
      registers,
      collect() {
        this.set(stats()?.conversations ?? 0);
      },
    });
    new Gauge({
      name: "clawbridge_queue_limit",
      help: "The queue's limits: server.maxConcurrent (limit=concurrent) and server.maxQueue (limit=queue).",
      labelNames: ["limit"],
      registers,
      collect() {
        const s = stats();
        if (!s) return;
        this.set({ limit: "concurrent" }, s.maxConcurrent);
        this.set({ limit: "queue" }, s.maxQueue);
      },
    });
    new Gauge({
      name: "clawbridge_cli_processes",
      help: "CLI processes the bridge runs right now (warm ones included).",
      registers,
      collect() {
        this.set(processes());
      },
    });
    // Warm CLI processes (src/backends/warm), read at scrape time: how many per backend, busy or idle, and
    // their memory (resident set of each process group).
    new Gauge({
      name: "clawbridge_warm_processes",
      help: "Warm CLI processes kept between turns, by backend and state (busy, idle, standby: started for no conversation yet).",
      labelNames: ["backend", "state"],
      registers,
      collect() {
        this.reset();
        for (const [backend, b] of Object.entries(warmSummary().byBackend)) {
          this.set({ backend, state: "busy" }, b.busy);
          this.set({ backend, state: "idle" }, b.processes - b.busy - b.standby);
          this.set({ backend, state: "standby" }, b.standby);
        }
      },
    });
    // Counted by the pools themselves; a scrape adds what happened since the last one (a pool that
    // closed keeps what it had counted).
    const seen = new Map<string, number>();
    new Counter({
      name: "clawbridge_warm_events_total",
      help: "What happened to warm CLI processes, by backend and event: started, reused, overflow (a turn ran cold: all busy), reaped (idle), evicted (room for another conversation), closed (the bridge's shutdown), died (crash or kill), standbyStarted, standbyTaken (a new conversation started on a standby), memoryEvicted (ended for the memory budget), memoryOverflow (a turn ran cold: the memory budget had no room).",
      labelNames: ["backend", "event"],
      registers,
      collect() {
        for (const [backend, stats] of warmEventTotals()) {
          for (const [event, n] of Object.entries(stats)) {
            const key = `${backend}\u0000${event}`;
            const delta = n - (seen.get(key) ?? 0);
            if (delta > 0) this.inc({ backend, event }, delta);
            else this.inc({ backend, event }, 0);
            seen.set(key, Math.max(n, seen.get(key) ?? 0));
          }
        }
      },
    });
    new Gauge({
      name: "clawbridge_warm_memory_bytes",
      help: "Resident memory of the warm CLI processes (their whole process groups), by backend.",
      labelNames: ["backend"],
      registers,
      collect() {
        this.reset();
        for (const [backend, b] of Object.entries(warmSummary().byBackend)) this.set({ backend }, b.rssBytes);
      },
    });
    new Gauge({
      name: "clawbridge_warm_memory_budget_bytes",
      help: "The memory budget of all warm CLI processes together (warm.maxMemoryMB, default 40% of the machine's memory); past it idle ones are ended, standbys first, and new turns run cold.",
      registers,
      collect() {
        this.set(warmMemory.maxBytes);
      },
    });

    // Fed by events.
    const registry = this.registry;
    this.turns = new CellCounter(
      "clawbridge_turns_total",
      "Turns ended, by model, backend and outcome (completed, failed, aborted).",
      ["model", "backend", "outcome"],
      registry,
    );
    this.turnErrors = new Counter({
      name: "clawbridge_turn_errors_total",
      help: "Failed turns by backend and error code.",
      labelNames: ["backend", "code"],
      registers,
    });
    this.firstByte = new CellHistogram(
      "clawbridge_turn_first_byte_seconds",
      "Seconds from a turn's acceptance to the first byte of its answer.",
      ["model", "backend"],
      FIRST_BYTE_BUCKETS,
      registry,
    );
    this.duration = new CellHistogram(
      "clawbridge_turn_duration_seconds",
      "Seconds from a turn's acceptance to its end, by outcome.",
      ["model", "backend", "outcome"],
      DURATION_BUCKETS,
      registry,
    );
    this.tokens = new CellCounter(
      "clawbridge_tokens_total",
      "Tokens of completed turns (kind=prompt|completion), as reported or counted.",
      ["model", "backend", "kind"],
      registry,
    );
    this.queueWait = new CellHistogram(
      "clawbridge_queue_wait_seconds",
      "Seconds a turn waited in the queue before it started.",
      [],
      QUEUE_WAIT_BUCKETS,
      registry,
    );
    this.rejected = new Counter({
      name: "clawbridge_queue_rejected_total",
      help: "Turns refused by the queue (HTTP 429), by model and scope (bridge or conversation).",
      labelNames: ["model", "scope"],
      registers,
    });
    this.heals = new Counter({
      name: "clawbridge_session_heals_total",
      help: "Resume mode: dead backend sessions replaced by a new one seeded from the request.",
      labelNames: ["backend"],
      registers,
    });
    this.resets = new Counter({
      name: "clawbridge_session_resets_total",
      help: "Resume mode: retried messages started as a new session instead of asking the CLI twice.",
      labelNames: ["backend"],
      registers,
    });
    this.toolcalls = new Counter({
      name: "clawbridge_toolcalls_extracted_total",
      help: "Tool calls found written as text and turned into real tool calls.",
      labelNames: ["model", "backend"],
      registers,
    });
    this.intents = new Counter({
      name: "clawbridge_intent_executions_total",
      help: "Intent pre-executions (live web data before the answer), by outcome (ok, failed).",
      labelNames: ["model", "outcome"],
      registers,
    });
    this.intentDuration = new Histogram({
      name: "clawbridge_intent_duration_seconds",
      help: "Seconds an intent pre-execution took.",
      labelNames: ["outcome"],
      buckets: WORK_BUCKETS,
      registers,
    });
    this.decisions = new Counter({
      name: "clawbridge_router_decisions_total",
      help: "The router's decisions, by action and by what decided (classifier, fallback, slash, reply, state).",
      labelNames: ["action", "source"],
      registers,
    });
    this.runsStarted = new Counter({
      name: "clawbridge_runs_started_total",
      help: "Runs of systems started.",
      registers,
    });
    this.runs = new Counter({
      name: "clawbridge_runs_total",
      help: "Runs of systems that ended or stopped, by outcome (completed, failed, cancelled, paused, interrupted).",
      labelNames: ["outcome"],
      registers,
    });
    this.runDuration = new Histogram({
      name: "clawbridge_run_duration_seconds",
      help: "Seconds a run took, by outcome (completed, failed).",
      labelNames: ["outcome"],
      buckets: WORK_BUCKETS,
      registers,
    });
    this.steps = new Counter({
      name: "clawbridge_steps_total",
      help: "Steps of runs, by outcome (completed, failed, skipped).",
      labelNames: ["outcome"],
      registers,
    });
    this.stepRetries = new Counter({
      name: "clawbridge_step_retries_total",
      help: "Steps of runs retried after a retryable failure.",
      registers,
    });
    this.builds = new Counter({
      name: "clawbridge_builds_total",
      help: "The builder's builds (runs of origin builder) that stopped, by outcome (completed, failed, paused, cancelled, interrupted); also counted in runs_total.",
      labelNames: ["outcome"],
      registers,
    });
    this.buildSteps = new Counter({
      name: "clawbridge_build_steps_total",
      help: "The steps of builds, by outcome (completed, failed, skipped); also counted in steps_total.",
      labelNames: ["outcome"],
      registers,
    });
    this.backendUp = new Gauge({
      name: "clawbridge_backend_up",
      help: "1 when a backend was usable at its last health check, else 0.",
      labelNames: ["backend"],
      registers,
    });
    this.fallbacks = new Counter({
      name: "clawbridge_fallbacks_total",
      help: "Turns handed to the next model of a fallback chain, by the backend that failed or was skipped (from), the one that took the turn (to) and why (limit_reached, auth_failed, backend_unavailable, exhausted...).",
      labelNames: ["from", "to", "reason"],
      registers,
    });
    this.limitHits = new Counter({
      name: "clawbridge_backend_limit_hits_total",
      help: "Times a backend answered with a limit (usage, rate, quota): backend.limited events.",
      labelNames: ["backend"],
      registers,
    });

    // Known label values show at 0 from the first scrape (rate() needs the series to exist).
    for (const backend of this.backends) {
      this.heals.inc({ backend }, 0);
      this.resets.inc({ backend }, 0);
      this.limitHits.inc({ backend }, 0);
    }
    for (const model of this.models) for (const scope of QUEUE_SCOPES) this.rejected.inc({ model, scope }, 0);
    this.runsStarted.inc(0);
    this.stepRetries.inc(0);

    this.unsubscribe = opts.bus.on((e) => this.observe(e));
    // Node's event-loop and GC observers start with the first bridge, not at the first scrape.
    processMetrics();
  }

  /** The exposition text: ours, then Node's process metrics. */
  async text(): Promise<string> {
    const [ours, node] = await Promise.all([this.registry.metrics(), processMetrics().metrics()]);
    return `${ours}\n${node}`;
  }

  /** `text/plain; version=0.0.4; charset=utf-8`. */
  get contentType(): string {
    return this.registry.contentType;
  }

  /** Stop listening to the bus (the bridge is closing). */
  close(): void {
    this.unsubscribe();
  }

  private model(id: string | undefined): string {
    return id !== undefined && this.models.has(id) ? id : OTHER;
  }

  private backend(name: string | undefined): string {
    return name !== undefined && this.backends.has(name) ? name : OTHER;
  }

  private code(code: string | undefined): string {
    if (!code || !/^[A-Za-z0-9_.:-]{1,64}$/.test(code)) return OTHER;
    if (this.codes.has(code)) return code;
    if (this.codes.size >= MAX_ERROR_CODES) return OTHER;
    this.codes.add(code);
    return code;
  }

  /** A fallback's reason: a code-like word, `MAX_REASONS` distinct ones, then `other`. */
  private reason(reason: string | undefined): string {
    if (!reason || !/^[A-Za-z0-9_.:-]{1,64}$/.test(reason)) return OTHER;
    if (this.reasons.has(reason)) return reason;
    if (this.reasons.size >= MAX_REASONS) return OTHER;
    this.reasons.add(reason);
    return reason;
  }

  private observe(e: BridgeEvent): void {
    switch (e.type) {
      case "turn.started":
        this.queueWait.observe(seconds(e.queuedMs));
        return;
      case "turn.firstByte":
        this.firstByte.observe(seconds(e.ms), this.model(e.model), this.backend(e.backend));
        return;
      case "turn.completed":
      case "turn.failed":
      case "turn.aborted": {
        const outcome = e.type === "turn.completed" ? "completed" : e.type === "turn.failed" ? "failed" : "aborted";
        const model = this.model(e.model);
        const backend = this.backend(e.backend);
        this.turns.inc(1, model, backend, outcome);
        this.duration.observe(seconds(e.ms), model, backend, outcome);
        if (e.type === "turn.failed") this.turnErrors.inc({ backend, code: this.code(e.code) });
        if (e.type === "turn.completed") {
          if (e.promptTokens) this.tokens.inc(e.promptTokens, model, backend, "prompt");
          if (e.completionTokens) this.tokens.inc(e.completionTokens, model, backend, "completion");
        }
        return;
      }
      case "queue.rejected":
        this.rejected.inc({ model: this.model(e.model), scope: QUEUE_SCOPES.has(e.scope) ? e.scope : OTHER });
        return;
      case "session.healed":
        this.heals.inc({ backend: this.backend(e.backend) });
        return;
      case "session.reset":
        this.resets.inc({ backend: this.backend(e.backend) });
        return;
      case "toolcalls.extracted":
        if (e.count > 0) this.toolcalls.inc({ model: this.model(e.model), backend: this.backend(e.backend) }, e.count);
        return;
      case "intent.executed": {
        const outcome = e.ok ? "ok" : "failed";
        this.intents.inc({ model: this.model(e.model), outcome });
        this.intentDuration.observe({ outcome }, seconds(e.ms));
        return;
      }
      case "decision":
        this.decisions.inc({
          action: Object.hasOwn(DECISION_ACTIONS, e.action) ? e.action : OTHER,
          source: Object.hasOwn(DECISION_SOURCES, e.source) ? e.source : OTHER,
        });
        return;
      case "run.started":
        this.runsStarted.inc();
        return;
      case "run.completed":
      case "run.failed": {
        const outcome = e.type === "run.completed" ? "completed" : "failed";
        this.runs.inc({ outcome });
        this.runDuration.observe({ outcome }, seconds(e.ms));
        if (e.origin === "builder") this.builds.inc({ outcome });
        return;
      }
      case "run.cancelled":
      case "run.paused":
      case "run.waiting":
      case "run.rejected":
      case "run.interrupted": {
        const outcome = e.type.slice("run.".length);
        this.runs.inc({ outcome });
        if (e.origin === "builder") this.builds.inc({ outcome });
        return;
      }
      case "step.completed":
      case "step.failed":
      case "step.skipped": {
        const outcome = e.type.slice("step.".length);
        this.steps.inc({ outcome });
        if (e.origin === "builder") this.buildSteps.inc({ outcome });
        return;
      }
      case "step.retry":
        this.stepRetries.inc();
        return;
      case "turn.fallback":
        this.fallbacks.inc({
          from: this.backend(e.fromBackend),
          to: this.backend(e.toBackend),
          reason: this.reason(e.reason),
        });
        return;
      case "backend.limited":
        this.limitHits.inc({ backend: this.backend(e.backend) });
        return;
      case "backend.health":
        this.backendUp.set({ backend: this.backend(e.backend) }, e.usable ? 1 : 0);
        return;
      default:
        return;
    }
  }
}
