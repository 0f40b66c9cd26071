/**
 * What the dashboard (`/dashboard`, packages/dashboard) shows that no other route serves, behind the
 * same bearer keys as every `/v1/*` route:
 *   GET    /v1/admin/turns           running turns and the last ones that ended (a ring of the bus's `turn.*` events), with the queue
 *   GET    /v1/admin/processes       the CLI processes running now (pid, command, label, cwd, since)
 *   GET    /v1/admin/queue           the turn scheduler: running, waiting, limits
 *   GET    /v1/admin/sessions        resume-mode bindings (conversation → backend session) with their heal/reset/error history
 *   DELETE /v1/admin/sessions/:key   forget one binding (the next turn starts a new backend session)
 *   GET    /v1/admin/backends        each backend's health and version, and which coding-agent CLIs are installed: the last
 *                                     background probe (src/backends/health) with its age, at once (`?refresh=1` waits for a new one)
 *   GET    /v1/admin/doctor          `clawbridge doctor`'s findings with their fixes (`?refresh=1`)
 *   GET    /v1/admin/router          open gatherings and confirmations, and the router's recent decisions
 *   GET    /v1/admin/usage           per backend per day (`?days=`, 1..30, default 7): turns, tokens, limit hits,
 *                                     fallbacks, totals, and each backend's last limit message and next reset (src/ops/usage)
 * Live changes come from `GET /v1/events`; these answer what is true now (and what happened before
 * the page was opened). The answers' shapes are declared in src/wire/admin.ts (the dashboard reads
 * the same declarations). Errors are OpenAI-shaped.
 */
import type { FastifyInstance, FastifyRequest } from "fastify";
import type { BackendProbes } from "../../backends/health/probes.js";
import type { EventBus } from "../../ops/events/bus.js";
import type { BridgeEvent, EventOf } from "../../wire/events.js";
import { ApiError } from "../chat-api/errors.js";
import type { TurnScheduler } from "../queue/scheduler.js";
import type {
  BackendsInfo,
  DecisionRow,
  Doctor,
  Finding,
  PendingRow,
  ProcessRow,
  Processes,
  QueueStats,
  RouterInfo,
  SessionRow,
  Sessions,
  Summary,
  TurnRow,
  Turns,
  Usage,
} from "../../wire/admin.js";
import type { UsageSource } from "../../ops/usage/usage.js";
import type { RouterRuntimeHandle } from "../../workflows/router/runtime.js";
import type { SessionStore } from "../../core/store/types.js";
import { liveProcesses } from "../../core/util/process.js";
import { warmSummary } from "../../backends/warm/registry.js";
import { sendApiError } from "./reply.js";

/** `clawbridge doctor` as the running bridge can call it (given by `clawbridge serve`: the doctor sits above the server). */
export type AdminDoctor = () => Promise<{ ok: boolean; summary: Summary; findings: Finding[] }>;

export interface AdminDeps {
  bus: EventBus;
  /** The session store, when a model runs in resume mode. */
  store?: SessionStore;
  doctor?: AdminDoctor;
  /** Usage per backend per day (src/ops/usage), when its ledger opened. */
  usage?: UsageSource;
  /** The backends' health and the CLIs found, probed in the background (src/backends/health). */
  probes?: BackendProbes;
}

export interface AdminRouteDeps {
  scheduler: TurnScheduler;
  systems?: RouterRuntimeHandle;
  admin?: AdminDeps;
}

/** Finished turns and router decisions kept in memory. */
const KEEP_TURNS = 200;
const KEEP_DECISIONS = 100;
/** A turn that never reported its end is dropped from "running" after this many. */
const MAX_RUNNING = 1000;
const DOCTOR_TTL_MS = 30_000;

type TurnEvent = EventOf<"turn.started" | "turn.firstByte" | "turn.completed" | "turn.failed" | "turn.aborted">;
const TURN_EVENTS: ReadonlySet<string> = new Set<TurnEvent["type"]>([
  "turn.started",
  "turn.firstByte",
  "turn.completed",
  "turn.failed",
  "turn.aborted",
]);

/** Running turns and the last KEEP_TURNS that ended, from the bus. */
export class TurnLog {
  private readonly running = new Map<string, TurnRow>();
  /** The turns that ended, oldest first, as a ring (`next`: where the next one goes): no array shifted per turn. */
  private readonly ended: TurnRow[] = [];
  private next = 0;

  onEvent(e: BridgeEvent): void {
    if (!TURN_EVENTS.has(e.type)) return; // not turn.fallback: the turn goes on, on the next model
    const t = e as TurnEvent;
    let row = this.running.get(t.turnId);
    if (!row) {
      if (t.type !== "turn.started" && this.ended.some((r) => r.id === t.turnId)) return;
      row = {
        id: t.turnId,
        conversation: t.conversation,
        model: t.model,
        backend: t.backend,
        mode: null,
        status: "running",
        accepted_at: t.type === "turn.started" ? t.at - t.queuedMs : t.at - t.ms,
        queued_ms: null,
        first_byte_ms: null,
        duration_ms: null,
        prompt_tokens: null,
        completion_tokens: null,
        finish_reason: null,
        error: null,
        ended_at: null,
      };
      if (this.running.size >= MAX_RUNNING) this.running.delete(this.running.keys().next().value!);
      this.running.set(t.turnId, row);
    }
    switch (t.type) {
      case "turn.started":
        row.mode = t.mode;
        row.queued_ms = t.queuedMs;
        return;
      case "turn.firstByte":
        row.first_byte_ms = t.ms;
        return;
      case "turn.completed":
        row.status = "completed";
        row.first_byte_ms = t.firstByteMs ?? row.first_byte_ms;
        row.prompt_tokens = t.promptTokens ?? null;
        row.completion_tokens = t.completionTokens ?? null;
        row.finish_reason = t.finishReason ?? null;
        break;
      case "turn.failed":
        row.status = "failed";
        row.error = { code: t.code, message: t.message };
        break;
      case "turn.aborted":
        row.status = "aborted";
        row.error = { code: "aborted", message: t.reason };
        break;
    }
    row.duration_ms = t.ms;
    row.ended_at = t.at;
    this.running.delete(t.turnId);
    if (this.ended.length < KEEP_TURNS) this.ended.push(row);
    else this.ended[this.next] = row;
    this.next = (this.next + 1) % KEEP_TURNS;
  }

  /** Running oldest first; ended newest first. */
  snapshot(limit = KEEP_TURNS): { running: TurnRow[]; recent: TurnRow[] } {
    const recent: TurnRow[] = [];
    const n = this.ended.length;
    for (let i = 1; i <= Math.min(limit, n); i++) recent.push({ ...this.ended[(this.next - i + n) % n]! });
    return { running: [...this.running.values()].map((r) => ({ ...r })), recent };
  }
}

type DecisionEvent = EventOf<"decision">;

/** The router's last KEEP_DECISIONS decisions, newest first. */
export class DecisionLog {
  private readonly list: DecisionEvent[] = [];

  onEvent(e: BridgeEvent): void {
    if (e.type !== "decision") return;
    this.list.unshift(e);
    if (this.list.length > KEEP_DECISIONS) this.list.length = KEEP_DECISIONS;
  }

  snapshot(limit = KEEP_DECISIONS): DecisionRow[] {
    return this.list.slice(0, limit).map((d) => ({
      at: d.at,
      conversation: d.conversation,
      action: d.action,
      system: d.system ?? null,
      confidence: d.confidence,
      source: d.source,
      reason: d.reason ?? null,
    }));
  }
}

/** One value, computed at most once per `ttlMs` and once at a time; `refresh` recomputes. */
function cached<T>(ttlMs: number, compute: () => Promise<T>): (refresh?: boolean) => Promise<{ value: T; at: number }> {
  let last: { value: T; at: number } | undefined;
  let inFlight: Promise<{ value: T; at: number }> | undefined;
  return (refresh = false) => {
    if (last && !refresh && Date.now() - last.at < ttlMs) return Promise.resolve(last);
    inFlight ??= compute()
      .then((value) => (last = { value, at: Date.now() }))
      .finally(() => (inFlight = undefined));
    return inFlight;
  };
}

const wantsRefresh = (req: FastifyRequest) => {
  const r = (req.query as Record<string, string | undefined>).refresh;
  return r !== undefined && r !== "0" && r !== "false";
};

/** `?limit=` as an integer within [1, max], or the default; undefined when it is not one. */
function limitOf(req: FastifyRequest, dflt: number, max: number): number | undefined {
  const raw = (req.query as Record<string, string | undefined>).limit;
  if (raw === undefined) return dflt;
  const n = Number(raw);
  return Number.isInteger(n) && n >= 1 && n <= max ? n : undefined;
}
/** `?days=` as an integer within [1, 30], or 7; undefined when it is not one. */
function daysOf(req: FastifyRequest): number | undefined {
  const raw = (req.query as Record<string, string | undefined>).days;
  if (raw === undefined || raw === "") return USAGE_DEFAULT_DAYS;
  const n = Number(raw);
  return Number.isInteger(n) && n >= 1 && n <= USAGE_MAX_DAYS ? n : undefined;
}
const USAGE_DEFAULT_DAYS = 7;
const USAGE_MAX_DAYS = 30;

const badLimit = (max: number) =>
  new ApiError(400, "invalid_request_error", "invalid_limit", `limit must be an integer from 1 to ${max}.`, "limit");

export function registerAdminRoutes(app: FastifyInstance, deps: AdminRouteDeps): void {
  const { scheduler, systems } = deps;
  const store = deps.admin?.store;
  const turns = new TurnLog();
  const decisions = new DecisionLog();
  const bus = deps.admin?.bus ?? systems?.bus;
  if (bus) {
    const off = bus.on((e) => {
      turns.onEvent(e);
      decisions.onEvent(e);
    });
    app.addHook("onClose", (_app, done) => {
      off();
      done();
    });
  }

  const queue = (): QueueStats => ({ object: "queue", ...scheduler.stats(), processes: liveProcesses().length });

  app.get("/v1/admin/turns", async (req, reply) => {
    const limit = limitOf(req, KEEP_TURNS, KEEP_TURNS);
    if (limit === undefined) return sendApiError(reply, badLimit(KEEP_TURNS));
    return { object: "list", ...turns.snapshot(limit), queue: queue(), live: !!bus } satisfies Turns;
  });

  app.get("/v1/admin/processes", async (): Promise<Processes> => {
    const summary = warmSummary();
    const warm = new Map(summary.list.map((w) => [w.pid, w]));
    const data = liveProcesses().map((p): ProcessRow => {
      const w = p.pid !== undefined ? warm.get(p.pid) : undefined;
      return {
        pid: p.pid ?? null,
        command: p.command,
        label: p.label ?? null,
        cwd: p.cwd ?? null,
        started_at: p.startedAt,
        warm: !!p.warm,
        ...(w
          ? {
              backend: w.backend,
              busy: w.busy,
              ...(w.standby ? { standby: true } : {}),
              turns: w.turns,
              rss_bytes: w.rssBytes ?? null,
            }
          : {}),
      };
    });
    const m = summary.memory;
    return {
      object: "list",
      data,
      warm_memory: { used_bytes: m.usedBytes, max_bytes: m.maxBytes, configured: m.configured },
    };
  });

  app.get("/v1/admin/queue", async () => queue());

  app.get("/v1/admin/sessions", async (req, reply) => {
    const limit = limitOf(req, 200, 1000);
    if (limit === undefined) return sendApiError(reply, badLimit(1000));
    if (!store) return { object: "list", enabled: false, data: [] } satisfies Sessions;
    const list = await store.list({ limit });
    const data: SessionRow[] = await Promise.all(
      list.map(async (b) => ({
        key: b.key,
        object: "session",
        backend: b.backend,
        model: b.model ?? null,
        backend_session_id: b.backendSessionId,
        cwd: b.cwd,
        turns: b.turns,
        created_at: b.createdAt,
        updated_at: b.updatedAt,
        last_error: b.lastError ?? null,
        events: (await store.listEvents(b.key, { limit: 20 })).map((e) => ({
          at: e.at,
          kind: e.kind,
          reason: e.reason,
        })),
      })),
    );
    return { object: "list", enabled: true, data } satisfies Sessions;
  });

  app.delete<{ Params: { key: string } }>("/v1/admin/sessions/:key", async (req, reply) => {
    const key = req.params.key;
    if (!store)
      return sendApiError(
        reply,
        new ApiError(
          404,
          "not_found_error",
          "no_sessions",
          "No model runs in resume mode on this bridge, so there are no session bindings.",
        ),
      );
    if (!(await store.delete(key)))
      return sendApiError(
        reply,
        new ApiError(404, "not_found_error", "session_not_found", `No session binding for "${key}".`),
      );
    return { id: key, object: "session", deleted: true };
  });

  const probes = deps.admin?.probes;
  app.get("/v1/admin/backends", async (req, reply) => {
    if (!probes)
      return sendApiError(
        reply,
        new ApiError(404, "not_found_error", "no_probes", "Backends are not probed in this process."),
      );
    // The last background probe at once; a refresh, the first request (before any probe ended) and
    // every request when nothing probes in the background (server.backendProbes.enabled: false) wait for one.
    const fresh = wantsRefresh(req) || !probes.latest || !probes.background;
    const p = fresh ? await probes.refresh() : probes.latest!;
    return {
      object: "list",
      data: p.backends,
      clis: p.clis,
      checked_at: p.checkedAt,
      age_ms: Math.max(0, Date.now() - p.checkedAt),
      probing: probes.probing,
    } satisfies BackendsInfo;
  });

  const doctorFn = deps.admin?.doctor;
  const doctor = doctorFn ? cached(DOCTOR_TTL_MS, doctorFn) : undefined;
  app.get("/v1/admin/doctor", async (req, reply) => {
    if (!doctor)
      return sendApiError(
        reply,
        new ApiError(
          404,
          "not_found_error",
          "no_doctor",
          "The doctor is not available in this process; run `clawbridge doctor` on the command line.",
        ),
      );
    const r = await doctor(wantsRefresh(req));
    return {
      object: "doctor",
      ok: r.value.ok,
      summary: r.value.summary,
      findings: r.value.findings,
      checked_at: r.at,
    } satisfies Doctor;
  });

  app.get("/v1/admin/router", async () => {
    const open = ((await systems?.conversations.questions()) ?? []).flatMap((c) =>
      c.question.kind === "gathering" || c.question.kind === "confirm" ? [{ ...c, pending: c.question }] : [],
    );
    const pending = open.map((p): PendingRow => {
      const inputs = systems?.library.get(p.pending.system)?.inputs;
      const collected = Object.keys(p.pending.values);
      return {
        conversation: p.conversation,
        kind: p.pending.kind,
        system: p.pending.system,
        state: p.state,
        values: p.pending.values,
        collected,
        missing: p.pending.kind === "gathering" ? (inputs?.required ?? []).filter((n) => !collected.includes(n)) : [],
        rounds: p.pending.kind === "gathering" ? p.pending.rounds : null,
        resume_run: p.pending.kind === "confirm" ? (p.pending.resumeRun ?? null) : null,
        since: p.pending.since,
        updated_at: p.updatedAt,
      };
    });
    return {
      object: "router",
      enabled: !!systems,
      gatherings: pending.filter((p) => p.kind === "gathering"),
      confirmations: pending.filter((p) => p.kind === "confirm"),
      decisions: decisions.snapshot(),
    } satisfies RouterInfo;
  });
  const usage = deps.admin?.usage;
  app.get("/v1/admin/usage", async (req, reply) => {
    const days = daysOf(req);
    if (days === undefined)
      return sendApiError(
        reply,
        new ApiError(
          400,
          "invalid_request_error",
          "invalid_days",
          `days must be an integer from 1 to ${USAGE_MAX_DAYS}.`,
          "days",
        ),
      );
    if (!usage)
      return sendApiError(
        reply,
        new ApiError(
          404,
          "not_found_error",
          "no_usage",
          "Usage is not recorded by this bridge (its ledger, <dataDir>/usage.db, could not be opened; see the log).",
        ),
      );
    return (await usage.report(days)) satisfies Usage;
  });
}
