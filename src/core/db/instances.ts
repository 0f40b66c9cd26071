/**
 * The bridges on one PostgreSQL: each instance writes a heartbeat row (`clawbridge_instances`:
 * id, host, pid, version, start, last seen on the DATABASE's clock, and its own clock's offset from
 * the database's) every `everyMs`, and removes it when it stops cleanly. `clawbridge doctor` reads
 * them: which instances are alive, and the clock skew between them (leases are measured on the
 * database's clock, but schedules fire on each instance's own: a clock that is off fires late).
 *
 * The offset is measured as local midpoint − database time over one round trip, so the network's
 * delay does not count as skew.
 */
import { hostname } from "node:os";
import type { PostgresDb } from "./postgres.js";

export interface InstanceRow {
  id: string;
  host: string;
  pid: number;
  version: string;
  startedAt: number;
  /** Last heartbeat, on the database's clock. */
  seenAt: number;
  /** This instance's clock minus the database's, at its last heartbeat (ms). */
  skewMs: number;
}

/** This machine's clock minus the database's (ms), and the round trip it was measured over. */
export async function measureSkew(db: Pick<PostgresDb, "now">): Promise<{ skewMs: number; rttMs: number }> {
  const t0 = Date.now();
  const server = await db.now();
  const t1 = Date.now();
  return { skewMs: Math.round((t0 + t1) / 2 - server), rttMs: t1 - t0 };
}

export class InstanceHeartbeat {
  private timer: NodeJS.Timeout | undefined;
  private readonly startedAt = Date.now();

  constructor(
    private readonly db: PostgresDb,
    private readonly opts: { version: string; everyMs?: number; onError?: (err: Error) => void },
  ) {}

  /** Writes the first beat (rejects when the database refuses it), then one every `everyMs`. */
  async start(): Promise<void> {
    await this.beat();
    this.timer = setInterval(() => {
      this.beat().catch((err: Error) => this.opts.onError?.(err));
    }, this.opts.everyMs ?? 10_000);
    this.timer.unref();
  }

  private async beat(): Promise<void> {
    const { skewMs } = await measureSkew(this.db);
    await this.db.run(
      `INSERT INTO clawbridge_instances (id, host, pid, version, started_at, seen_at, skew_ms)
       VALUES (?, ?, ?, ?, ?, (extract(epoch from clock_timestamp()) * 1000)::bigint, ?)
       ON CONFLICT (id) DO UPDATE SET seen_at = excluded.seen_at, skew_ms = excluded.skew_ms, version = excluded.version`,
      [this.db.instanceId, hostname(), process.pid, this.opts.version, this.startedAt, skewMs],
    );
  }

  /** Stops beating and removes this instance's row (best effort: the database may be gone). */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await this.db.run("DELETE FROM clawbridge_instances WHERE id = ?", [this.db.instanceId]).catch(() => {});
  }
}

/** The instances seen within `withinMs` (database clock), newest first. */
export async function liveInstances(db: Pick<PostgresDb, "all">, withinMs: number): Promise<InstanceRow[]> {
  return db.all<InstanceRow>(
    `SELECT id, host, pid, version, started_at AS "startedAt", seen_at AS "seenAt", skew_ms AS "skewMs"
       FROM clawbridge_instances
      WHERE seen_at >= (extract(epoch from clock_timestamp()) * 1000)::bigint - ?
      ORDER BY seen_at DESC`,
    [withinMs],
  );
}
