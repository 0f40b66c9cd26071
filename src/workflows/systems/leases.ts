/**
 * Runs are claimed, not owned (PostgreSQL, several instances; the run manager's header says why):
 * every `lease.ms / 3` this instance renews the leases of the runs it executes in one statement,
 * stops (writing nothing) a run of its own that was not renewed — another instance holds it now,
 * or it ended there — and claims runs whose lease lapsed (their instance died, or let them go at
 * shutdown) for the run manager to continue from their first unfinished step. `RunLeases` is the
 * timer and that sweep; the run manager (runner.ts) says what running a run means.
 */
import type { Lease, RunStore } from "./db.js";

/** Lapsed runs claimed per sweep (the rest at the next one, or by another instance). */
const CLAIM_BATCH = 20;

/** What the sweep asks of the run manager. */
export interface LeaseHolder {
  store: RunStore;
  /** Ids of the runs executing here. */
  live(): Iterable<string>;
  /** Stop a run executing here: another instance holds it now. */
  lost(id: string): void;
  /** The systems (and whether builds) this instance can carry out: only those are claimed. */
  can(): { systems: string[]; builds: boolean };
  /** Shutdown began: a run claimed meanwhile is let go again. */
  closing(): boolean;
  /** Continue a claimed run here from its first unfinished step. */
  takeOver(id: string): Promise<void>;
  /** After each sweep (the run manager watches the open approvals' deadlines again). */
  swept(): Promise<void>;
  onError(err: unknown): void;
}

export class RunLeases {
  private timer: NodeJS.Timeout | undefined;
  private sweeping = false;

  constructor(
    private readonly lease: Lease,
    private readonly holder: LeaseHolder,
  ) {}

  /** The first sweep (its claimed ids), then one every `lease.ms / 3`. */
  async start(): Promise<string[]> {
    const taken = await this.sweep();
    this.timer = setInterval(
      () => void this.sweep().catch((err: unknown) => this.holder.onError(err)),
      Math.max(Math.round(this.lease.ms / 3), 50),
    );
    this.timer.unref();
    return taken;
  }

  stop(): void {
    clearInterval(this.timer);
  }

  /** Lets a run go at once (this instance's shutdown): another instance claims it at its next sweep. */
  release(id: string): Promise<void> {
    return this.holder.store.release(id, this.lease.owner);
  }

  private async sweep(): Promise<string[]> {
    const { store } = this.holder;
    if (this.sweeping || this.holder.closing()) return [];
    this.sweeping = true;
    try {
      const kept = new Set(await store.renew(this.lease));
      for (const id of this.holder.live()) if (!kept.has(id)) this.holder.lost(id);
      const live = new Set(this.holder.live());
      const taken = (await store.claimLapsed(this.lease, CLAIM_BATCH, this.holder.can())).filter((id) => !live.has(id));
      for (const id of taken) {
        if (this.holder.closing()) await this.release(id);
        else await this.holder.takeOver(id);
      }
      await this.holder.swept();
      return taken;
    } finally {
      this.sweeping = false;
    }
  }
}
