/**
 * Usage per backend per day, fed only by the event bus (src/ops/events/bus.ts) into the usage
 * ledger (`<dataDir>/usage.db`, or the shared PostgreSQL's `usage` table: src/core/store/usage-ledger.ts),
 * and read by `GET /v1/admin/usage` (src/request/http/admin-routes.ts), `clawbridge usage` and the
 * dashboard. On a shared database the rows and totals are the whole cluster's (every instance adds
 * to the same rows); `recent` (the last limits and fallbacks) is what this instance saw.
 *
 * What counts:
 * - `turn.completed`: a turn, its prompt tokens in and completion tokens out (a replayed answer
 *   has none); `turn.failed`: a turn and a failed one. Aborted turns (the client went away) are
 *   not counted. The backend is the one that answered: the last `toBackend` of the turn's
 *   `turn.fallback` events, else the backend of a router's `answeredBy` model, else the event's `backend`.
 * - a limit hit: `backend.limited` (the backend answered with a limit: its message, its reset), or
 *   a `turn.failed` with code `limit_reached` when no `backend.limited` for that backend came just
 *   before it (the same limit is counted once).
 * - `turn.fallback`: one more turn handed away from `fromBackend` (and its `resetAt`, if it gave one).
 *
 * The bus listener adds to counts in memory and never throws; a timer writes them every
 * `flushMs` (and every read writes them first), so turns never wait for the store.
 */
import type { Logger } from "pino";
import type { Sql } from "../../core/db/sql.js";
import type { EventBus } from "../events/bus.js";
import type { BridgeEvent, EventOf } from "../../wire/events.js";
import type { Usage, UsageBackendState, UsageEventRow, UsageRow, UsageTotals } from "../../wire/admin.js";
import { clipMessage, defaultUsageLedgerPath, KEEP_DAYS, UsageLedger, utcDay } from "../../core/store/usage-ledger.js";

export { KEEP_DAYS } from "../../core/store/usage-ledger.js";
export const DEFAULT_DAYS = 7;
/** Limits and fallbacks kept in memory for `recent`. */
export const KEEP_RECENT = 50;

/**
 * A `turn.failed` limit_reached and a `backend.limited` of the same backend this close together
 * (either first) are the same hit: the pipeline publishes both for one limited answer.
 */
const SAME_LIMIT_MS = 5_000;

export interface UsageOptions {
  bus: EventBus;
  /** The ledger's directory (`<dataDir>/usage.db`), or `file` itself; or `sql`, the shared PostgreSQL. */
  dataDir?: string;
  file?: string;
  sql?: Sql;
  logger?: Pick<Logger, "warn">;
  /** How often counts are written (default 1000 ms). */
  flushMs?: number;
  now?: () => number;
  /** Backends to list even on days they did nothing (the configured ones). */
  backends?: Iterable<string>;
  /** Model id → its backend (the configured models), for a turn a router handed to another model (`answeredBy`). */
  modelBackends?: Iterable<readonly [string, string]>;
}

/** What the admin route reads. */
export interface UsageSource {
  report(days?: number): Promise<Usage>;
}

const emptyTotals = (): UsageTotals => ({
  turns: 0,
  failed: 0,
  tokens_in: 0,
  tokens_out: 0,
  limit_hits: 0,
  fallbacks: 0,
});

function addTo(t: UsageTotals, r: UsageRow): void {
  t.turns += r.turns;
  t.failed += r.failed;
  t.tokens_in += r.tokens_in;
  t.tokens_out += r.tokens_out;
  t.limit_hits += r.limit_hits;
  t.fallbacks += r.fallbacks;
}

export class UsageRecorder implements UsageSource {
  private readonly off: () => void;
  private readonly timer: NodeJS.Timeout;
  private readonly now: () => number;
  /** The last limit hit counted per backend, by which event, not yet paired with the other kind. */
  private readonly unpaired = new Map<string, { at: number; by: "limited" | "failed" }>();
  private readonly configured: string[];
  private readonly modelBackends: Map<string, string>;
  /** Turns handed along a fallback chain: turn id → the backend that now answers it (until the turn ends). */
  private readonly handedTo = new Map<string, string>();
  /** The last KEEP_RECENT limits and fallbacks, oldest first. */
  private readonly recent: UsageEventRow[] = [];
  private closed = false;

  private constructor(
    readonly ledger: UsageLedger,
    private readonly opts: UsageOptions,
  ) {
    this.now = opts.now ?? Date.now;
    this.configured = [...(opts.backends ?? [])];
    this.modelBackends = new Map(opts.modelBackends ?? []);
    this.off = opts.bus.on((e) => {
      try {
        this.observe(e);
      } catch (err) {
        this.warn(err, "usage: an event was not counted");
      }
    });
    this.timer = setInterval(() => void this.flush(), opts.flushMs ?? 1000);
    this.timer.unref();
  }

  /** Open the ledger and listen to the bus. */
  static async open(opts: UsageOptions): Promise<UsageRecorder> {
    const where = opts.sql ?? opts.file ?? defaultUsageLedgerPath(opts.dataDir ?? ".");
    return new UsageRecorder(await UsageLedger.open(where, { now: opts.now }), opts);
  }

  private warn(err: unknown, msg: string): void {
    try {
      this.opts.logger?.warn({ err: (err as Error)?.message ?? String(err) }, msg);
    } catch {
      /* a logger that throws is not our problem */
    }
  }

  /** Write pending counts (errors logged, never thrown). */
  async flush(): Promise<void> {
    try {
      await this.ledger.flush();
    } catch (err) {
      this.warn(err, "usage: could not write the usage ledger");
    }
  }

  /** Whether a limit seen by one kind of event is a new hit, or the other kind's report of the one just counted. */
  private newHit(backend: string, at: number, by: "limited" | "failed"): boolean {
    const prev = this.unpaired.get(backend);
    if (prev && prev.by !== by && Math.abs(at - prev.at) < SAME_LIMIT_MS) {
      this.unpaired.delete(backend);
      return false;
    }
    if (this.unpaired.size > 1000) this.unpaired.clear();
    this.unpaired.set(backend, { at, by });
    return true;
  }

  /**
   * The backend that answered a turn that ended: the last one a fallback handed it to, else the
   * backend of the model a router handed it to, else the one the client's model runs on.
   */
  private answeredOn(e: EventOf<"turn.completed" | "turn.failed" | "turn.aborted">): string {
    const handed = this.handedTo.get(e.turnId);
    if (handed !== undefined) {
      this.handedTo.delete(e.turnId);
      return handed;
    }
    return (e.answeredBy !== undefined ? this.modelBackends.get(e.answeredBy) : undefined) ?? e.backend;
  }

  private remember(row: UsageEventRow): void {
    this.recent.push(row);
    if (this.recent.length > KEEP_RECENT) this.recent.splice(0, this.recent.length - KEEP_RECENT);
  }

  private observe(e: BridgeEvent): void {
    const at = e.at ?? this.now();
    switch (e.type) {
      case "turn.completed":
        this.ledger.add(this.answeredOn(e), { turns: 1, tokensIn: e.promptTokens, tokensOut: e.completionTokens }, at);
        return;
      case "turn.aborted":
        this.answeredOn(e);
        return;
      case "turn.failed": {
        const backend = this.answeredOn(e);
        const limit = e.code === "limit_reached";
        const hit = limit && this.newHit(backend, at, "failed");
        this.ledger.add(
          backend,
          { turns: 1, failed: 1, ...(hit ? { limitHits: 1, limit: { message: e.message, at } } : {}) },
          at,
        );
        return;
      }
      case "backend.limited": {
        // Its message and reset win over a failed turn's: they are the backend's own words.
        const hit = this.newHit(e.backend, at, "limited");
        this.remember({
          at,
          kind: "limited",
          backend: e.backend,
          from_model: null,
          to_model: null,
          to_backend: null,
          reason: null,
          message: clipMessage(String(e.message ?? "")),
          reset_at: e.resetAt ?? null,
        });
        this.ledger.add(
          e.backend,
          { ...(hit ? { limitHits: 1 } : {}), limit: { message: e.message, at, resetAt: e.resetAt } },
          at,
        );
        return;
      }
      case "turn.fallback":
        if (this.handedTo.size >= 10_000) this.handedTo.clear(); // turns that never ended
        this.handedTo.set(e.turnId, e.toBackend);
        this.remember({
          at,
          kind: "fallback",
          backend: e.fromBackend,
          from_model: e.fromModel,
          to_model: e.to,
          to_backend: e.toBackend,
          reason: e.reason,
          message: null,
          reset_at: e.resetAt ?? null,
        });
        this.ledger.add(e.fromBackend, { fallbacks: 1, ...(e.resetAt ? { resetAt: e.resetAt } : {}) }, at);
        return;
      default:
        return;
    }
  }

  /** The last `days` days (1..KEEP_DAYS, default 7): per backend per day, totals, and each backend's state. */
  async report(days = DEFAULT_DAYS): Promise<Usage> {
    const n = Math.min(KEEP_DAYS, Math.max(1, Math.floor(days)));
    await this.flush();
    const now = this.now();
    const rows: UsageRow[] = (await this.ledger.days(n)).map((r) => ({
      day: r.day,
      backend: r.backend,
      turns: r.turns,
      failed: r.failed,
      tokens_in: r.tokensIn,
      tokens_out: r.tokensOut,
      limit_hits: r.limitHits,
      fallbacks: r.fallbacks,
      last_limit_message: r.lastLimitMessage,
      last_limit_at: r.lastLimitAt,
      reset_at: r.resetAt,
    }));
    const totals = emptyTotals();
    const perBackend = new Map<string, { today: UsageTotals; total: UsageTotals }>();
    const today = utcDay(now);
    const entry = (b: string) => {
      let t = perBackend.get(b);
      if (!t) perBackend.set(b, (t = { today: emptyTotals(), total: emptyTotals() }));
      return t;
    };
    for (const b of this.configured) entry(b);
    for (const r of rows) {
      addTo(totals, r);
      const t = entry(r.backend);
      addTo(t.total, r);
      if (r.day === today) addTo(t.today, r);
    }
    const limits = new Map((await this.ledger.limits()).map((l) => [l.backend, l]));
    for (const b of limits.keys()) entry(b);
    const backends: UsageBackendState[] = [...perBackend.entries()]
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([backend, t]) => {
        const l = limits.get(backend);
        return {
          backend,
          today: t.today,
          total: t.total,
          last_limit_message: l?.message ?? null,
          last_limit_at: l?.at ?? null,
          next_reset_at: l?.resetAt !== null && l?.resetAt !== undefined && l.resetAt > now ? l.resetAt : null,
        };
      });
    return {
      object: "usage",
      days: n,
      from: this.ledger.firstDay(n),
      to: today,
      now,
      data: rows,
      totals,
      backends,
      recent: [...this.recent].reverse(),
    };
  }

  /** Stop listening, write what is pending, close the file. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.off();
    clearInterval(this.timer);
    try {
      await this.ledger.close();
    } catch (err) {
      this.warn(err, "usage: could not close the usage ledger");
    }
  }
}
