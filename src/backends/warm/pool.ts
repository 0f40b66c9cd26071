/**
 * The warm pool of one backend: long-lived CLI processes ("workers"), at most one per conversation
 * key, reused turn after turn — and standbys, started processes that belong to no conversation yet.
 *
 * - A turn leases its conversation's worker if it fits (same session, same bootstrap and model —
 *   the backend decides), else the old one is ended first and a new one started: one conversation
 *   never has two processes, also while the old one is still closing.
 * - A conversation that needs a new worker takes a standby of its kind (`StandbyKind`: what the
 *   standbys share, e.g. the CLI and its model) when there is one: the backend's `adopt` gives it
 *   what differs per conversation (its bootstrap, working directory, session), or refuses it (it
 *   stays a standby). A standby is never offered twice: taken, it is the conversation's alone. The
 *   taken standby is replaced in the background once the turn that took it ends (or after
 *   `REFILL_AFTER_MS`, whichever comes first), so the CLI's start never competes with that turn for
 *   the CPU. Standbys are started lazily: a kind gets one only after a turn of that kind came
 *   (so a backend nobody uses holds no memory), up to `standby` per kind, for the `MAX_KINDS` kinds
 *   used most recently; a kind unused for `idleSeconds` loses its standbys.
 * - At most `maxProcesses` processes (standbys and starting ones included). A new conversation at
 *   the limit ends a standby first, then the least recently used idle worker; when every worker is
 *   busy the turn runs cold (the caller gets no lease), so the pool never makes a turn wait for
 *   another conversation.
 * - The memory budget of all warm processes of all backends (`WarmMemory`, memory.ts): a new
 *   worker starts only if it fits, idle processes of any backend being ended to make room
 *   (standbys first); if it cannot fit, the turn runs cold. A standby starts only if it fits
 *   without ending anything.
 * - A worker idle for `idleSeconds` is ended; a worker that dies is forgotten at once (its turn, if
 *   any, sees the end itself); `close()` ends all of them, standbys included (bridge shutdown).
 * Workers are `CliProcess`es underneath, so the orphan watcher and the start-up reaper know them.
 */
import type { Logger } from "pino";
import { groupRss } from "./rss.js";
import type { MemoryItem, WarmMemory } from "./memory.js";
import {
  defaultStandby,
  NO_STATS,
  registerWarmSource,
  warmMemory,
  warmSourceCount,
  type WarmPoolStats,
  type WarmProcessInfo,
  type WarmSource,
} from "./registry.js";

export interface WarmWorker {
  readonly pid: number | undefined;
  /** Still able to serve a turn (running, not broken by an earlier one). */
  readonly usable: boolean;
  /** Resolves once the process has ended, for whatever reason. */
  readonly ended: Promise<void>;
  /** End it (politely, then its process group); resolves once it is reaped. */
  close(): Promise<void>;
}

export interface WarmLease<W> {
  worker: W;
  /**
   * The worker was started for this turn (its first turn), rather than reused or taken from the
   * standbys: its failure before any output is the CLI's answer, not a reason to run the turn cold.
   */
  fresh: boolean;
  /** Hand the worker back. `keep: false` ends it (the turn left it unfit for another). */
  release(keep: boolean): void;
}

/**
 * Standbys of one kind, as a turn that could take one describes them. A turn passes it to
 * `acquire` when a standby could serve it (a new session without per-conversation start-up parts).
 */
export interface StandbyKind<W> {
  /** What the standbys share (the CLI, its model and options): a turn takes only one of its own kind. */
  kind: string;
  /** Start a standby: a process for no conversation yet. */
  start(): Promise<W>;
  /**
   * Give a standby this turn's conversation — what could not be given at its start — or refuse it
   * (false: it stays a standby, the turn starts a worker of its own). Called once per standby taken.
   */
  adopt(worker: W): boolean;
}

interface Entry<W> {
  key: string;
  worker?: W;
  busy: boolean;
  turns: number;
  startedAt: number;
  lastUsedAt: number;
  idleTimer?: NodeJS.Timeout;
  /** Resolved when the current lease is released. */
  released?: Promise<void>;
  release?: () => void;
  /** We asked it to end (reap, evict, replace, shutdown): its end is not a death. */
  ending: boolean;
  /** It was a standby, taken by this conversation: its replacement starts once this turn ends. */
  fromStandby?: boolean;
}

interface Standby<W> {
  kind: string;
  worker?: W;
  /** Resolves with the worker once started (undefined when the start failed). */
  starting: Promise<W | undefined>;
  startedAt: number;
  /** A turn is taking it (waiting for its start, or adopting it): nobody else may. */
  taken: boolean;
  ending: boolean;
  idleTimer?: NodeJS.Timeout;
}

/** The most kinds of standby one pool keeps (each kind is a model and options of the backend seen recently). */
export const MAX_KINDS = 3;
/** A taken standby's replacement starts at the latest this long after it was taken (sooner if its turn ends). */
export const REFILL_AFTER_MS = 1500;
/**
 * After a standby failed to start (or was ended for the memory budget), its kind gets none for this
 * long: no spawn loop on a broken CLI, no start-and-end loop at the edge of the budget.
 */
const START_FAILED_BACKOFF_MS = 60_000;

export interface WarmPoolOptions {
  idleSeconds: number;
  maxProcesses: number;
  /** Standbys per kind (undefined: the bridge-wide `warm.standby`). */
  standby?: number;
}

export class WarmPool<W extends WarmWorker> implements WarmSource {
  private readonly entries = new Map<string, Entry<W>>();
  /** Workers being ended, by key: a new worker for the key waits for the old one to be gone. */
  private readonly closing = new Map<string, Promise<void>>();
  private readonly standbys: Standby<W>[] = [];
  /** The kinds of standby wanted, least recently used first, with when a turn of that kind last came. */
  private readonly kinds = new Map<
    string,
    {
      spec: StandbyKind<W>;
      usedAt: number;
      /** Its standby failed to start, or was ended for the memory budget: none for a while (no start-and-end loop). */
      failedAt?: number;
    }
  >();
  private fillTimer: NodeJS.Timeout | undefined;
  private filling: Promise<void> | undefined;
  private fillAgain = false;
  private closed = false;
  private readonly unregister: () => void;
  readonly stats: WarmPoolStats = { ...NO_STATS };

  constructor(
    readonly backend: string,
    private readonly opts: WarmPoolOptions,
    private readonly log: Logger,
    private readonly memory: WarmMemory = warmMemory,
  ) {
    this.unregister = registerWarmSource(this);
    memory.watch(() => warmSourceCount() > 0);
  }

  /** Standbys per kind now. */
  private get standbyCount(): number {
    return this.opts.standby ?? defaultStandby();
  }

  /**
   * The worker for conversation `key`: the current one if `fits` it, else a standby of
   * `standby.kind` it adopts, else a new one from `start`. Undefined when the pool is closed, full
   * of busy workers, or the memory budget has no room (run the turn cold). Waits while the
   * conversation's worker is serving another turn (an aborted turn still winding down), bounded by
   * `signal`. `start` failing removes the reservation and rethrows.
   */
  async acquire(
    key: string,
    fits: (w: W) => boolean,
    start: () => Promise<W>,
    signal?: AbortSignal,
    standby?: StandbyKind<W>,
  ): Promise<WarmLease<W> | undefined> {
    for (let round = 0; round < 1000; round++) {
      if (this.closed || signal?.aborted) return undefined;
      const pending = this.closing.get(key);
      if (pending) {
        await pending;
        continue;
      }
      const e = this.entries.get(key);
      if (e?.busy) {
        await untilAborted(e.released!, signal);
        continue;
      }
      if (e?.worker?.usable && fits(e.worker)) {
        this.stats.reused++;
        return this.lease(e, false);
      }
      if (e) {
        await this.end(e, "replaced");
        continue;
      }
      const useStandby = !!standby && this.standbyCount > 0;
      if (useStandby) this.wantKind(standby);
      const ready = useStandby ? this.standbyOf(standby.kind) : undefined;
      if (!ready && this.entries.size + this.liveStandbys().length >= this.opts.maxProcesses) {
        // Room for a conversation: a standby goes first (of another kind: this one's would have been taken).
        const spare = this.liveStandbys().sort((a, b) => this.kindUsedAt(a.kind) - this.kindUsedAt(b.kind))[0];
        if (spare) {
          this.stats.evicted++;
          await this.endStandby(spare, "evicted");
          continue;
        }
        const idle = [...this.entries.values()].filter((x) => !x.busy).sort((a, b) => a.lastUsedAt - b.lastUsedAt)[0];
        if (!idle) {
          this.stats.overflow++;
          return undefined;
        }
        this.stats.evicted++;
        await this.end(idle, "evicted");
        continue;
      }
      // The conversation's entry, busy from now on: another turn of the key waits for it.
      const entry: Entry<W> = {
        key,
        busy: true,
        turns: 0,
        startedAt: Date.now(),
        lastUsedAt: Date.now(),
        ending: false,
      };
      entry.released = new Promise<void>((r) => (entry.release = r));
      this.entries.set(key, entry);
      const giveUp = () => {
        if (this.entries.get(key) === entry) this.entries.delete(key);
        entry.busy = false;
        entry.release?.();
      };
      let worker: W | undefined;
      if (ready) {
        worker = await this.take(ready, standby!, entry);
        if (worker) {
          entry.fromStandby = true;
          entry.startedAt = ready.startedAt;
          this.stats.standbyTaken++;
          this.scheduleFill(REFILL_AFTER_MS);
        } else if (this.entries.size + this.liveStandbys().length > this.opts.maxProcesses) {
          // The standby could not serve this conversation and there is no room for both.
          const spare = this.liveStandbys()[0];
          if (spare) await this.endStandby(spare, "evicted");
        }
      }
      if (!worker) {
        const room = await this.memory.admit(this.backend);
        if (!room) {
          giveUp();
          this.stats.memoryOverflow++;
          return undefined;
        }
        try {
          worker = await start();
          this.memory.watchStart(this.backend, worker.pid);
        } catch (err) {
          giveUp();
          throw err;
        } finally {
          room.settle();
        }
        this.stats.started++;
      }
      entry.worker = worker;
      void worker.ended.then(() => this.onEnded(entry));
      if (this.closed || this.entries.get(key) !== entry) {
        // Shut down while it was starting.
        giveUp();
        void this.end(entry, "shutdown");
        return undefined;
      }
      return this.lease(entry, !entry.fromStandby);
    }
    return undefined;
  }

  private lease(e: Entry<W>, fresh: boolean): WarmLease<W> {
    if (e.idleTimer) clearTimeout(e.idleTimer);
    e.idleTimer = undefined;
    if (!e.busy || !e.released) {
      e.busy = true;
      e.released = new Promise<void>((r) => (e.release = r));
    }
    e.lastUsedAt = Date.now();
    let done = false;
    return {
      worker: e.worker as W,
      fresh,
      release: (keep: boolean) => {
        if (done) return;
        done = true;
        e.busy = false;
        e.turns++;
        e.lastUsedAt = Date.now();
        e.release?.();
        // A kind that has fewer standbys than wanted (the first turn of a kind, a taken standby) gets them now.
        if (this.kinds.size && !this.closed) this.scheduleFill(0);
        if (!keep || !e.worker?.usable || this.closed) {
          if (this.entries.get(e.key) === e) void this.end(e, "unfit");
          return;
        }
        e.idleTimer = setTimeout(() => {
          if (e.busy || this.entries.get(e.key) !== e) return;
          this.stats.reaped++;
          this.log.debug({ pid: e.worker?.pid }, "warm process idle too long; ending it");
          void this.end(e, "idle");
        }, this.opts.idleSeconds * 1000);
        e.idleTimer.unref();
      },
    };
  }

  /** Forget the entry and end its worker; the key is "closing" until the process is reaped. */
  private end(e: Entry<W>, why: string): Promise<void> {
    if (this.entries.get(e.key) === e) this.entries.delete(e.key);
    if (e.idleTimer) clearTimeout(e.idleTimer);
    e.ending = true;
    const worker = e.worker;
    if (!worker) return Promise.resolve();
    this.log.debug({ pid: worker.pid, why }, "ending warm process");
    if (why === "shutdown") this.stats.closed++;
    const p = worker.close().finally(() => {
      if (this.closing.get(e.key) === p) this.closing.delete(e.key);
    });
    this.closing.set(e.key, p);
    return p;
  }

  private onEnded(e: Entry<W>): void {
    if (e.ending) return;
    this.stats.died++;
    this.log.warn({ pid: e.worker?.pid, busy: e.busy }, "warm process ended unexpectedly");
    if (this.entries.get(e.key) === e && !e.busy) this.entries.delete(e.key);
    if (e.idleTimer) clearTimeout(e.idleTimer);
  }

  // ---- standbys ----

  /** Standbys not being ended nor taken (starting ones included). */
  private liveStandbys(): Standby<W>[] {
    return this.standbys.filter((s) => !s.ending && !s.taken);
  }

  private kindUsedAt(kind: string): number {
    return this.kinds.get(kind)?.usedAt ?? 0;
  }

  /** A turn of this kind came: its standbys are wanted (the `MAX_KINDS` most recent kinds). */
  private wantKind(spec: StandbyKind<W>): void {
    const had = this.kinds.get(spec.kind);
    this.kinds.delete(spec.kind);
    this.kinds.set(spec.kind, { spec, usedAt: Date.now(), ...(had?.failedAt ? { failedAt: had.failedAt } : {}) });
    for (const [kind] of this.kinds) {
      if (this.kinds.size <= MAX_KINDS) break;
      this.kinds.delete(kind);
      for (const s of this.liveStandbys()) if (s.kind === kind) void this.endStandby(s, "kind no longer used");
    }
  }

  /** The standby a turn of `kind` would take: a started one (the oldest), else one still starting. */
  private standbyOf(kind: string): Standby<W> | undefined {
    const mine = this.liveStandbys().filter((s) => s.kind === kind);
    return mine.find((s) => s.worker?.usable) ?? mine.find((s) => !s.worker);
  }

  /**
   * Take a standby for a conversation's `entry` (waiting for its start if needed): its worker,
   * adopted and set on the entry (in the same step as it leaves the standbys, so the memory budget
   * never misses it); undefined if it cannot serve.
   */
  private async take(s: Standby<W>, spec: StandbyKind<W>, entry: Entry<W>): Promise<W | undefined> {
    s.taken = true;
    const w = s.worker ?? (await s.starting);
    if (!w?.usable || s.ending || this.closed) {
      this.dropStandby(s);
      return undefined;
    }
    let adopted = false;
    try {
      adopted = spec.adopt(w);
    } catch (err) {
      this.log.warn({ err, pid: w.pid }, "a standby could not be given its conversation; ending it");
      void this.endStandby(s, "adopt failed");
      return undefined;
    }
    if (!adopted) {
      s.taken = false;
      return undefined;
    }
    entry.worker = w;
    this.dropStandby(s);
    this.log.debug({ pid: w.pid, kind: s.kind.slice(0, 12) }, "standby taken by a new conversation");
    return w;
  }

  private dropStandby(s: Standby<W>): void {
    const i = this.standbys.indexOf(s);
    if (i >= 0) this.standbys.splice(i, 1);
    if (s.idleTimer) clearTimeout(s.idleTimer);
  }

  private endStandby(s: Standby<W>, why: string): Promise<void> {
    s.ending = true;
    this.dropStandby(s);
    this.log.debug({ pid: s.worker?.pid, why }, "ending a standby");
    if (why === "shutdown") this.stats.closed++;
    return s.starting.then((w) => w?.close());
  }

  /** Check the standbys in `ms` (one timer at a time; a sooner request wins). */
  private scheduleFill(ms: number): void {
    if (this.closed || this.standbyCount <= 0) return;
    if (this.fillTimer) {
      if (ms > 0) return;
      clearTimeout(this.fillTimer);
    }
    this.fillTimer = setTimeout(() => {
      this.fillTimer = undefined;
      void this.fill();
    }, ms);
    this.fillTimer.unref();
  }

  /** Start the standbys the recent kinds lack, while there is room (processes and memory). */
  private fill(): Promise<void> {
    if (this.filling) {
      this.fillAgain = true;
      return this.filling;
    }
    this.filling = (async () => {
      for (let pass = 0; pass < 4; pass++) {
        this.fillAgain = false;
        await this.fillOnce();
        if (!this.fillAgain) break;
      }
    })()
      .catch((err) => this.log.warn({ err }, "could not start a standby"))
      .finally(() => (this.filling = undefined));
    return this.filling;
  }

  private async fillOnce(): Promise<void> {
    const now = Date.now();
    const recent = [...this.kinds.values()].reverse();
    for (const k of recent) {
      if (this.closed) return;
      if (now - k.usedAt > this.opts.idleSeconds * 1000) continue;
      if (k.failedAt && now - k.failedAt < START_FAILED_BACKOFF_MS) continue;
      for (let n = 0; n < this.standbyCount; n++) {
        if (this.liveStandbys().filter((s) => s.kind === k.spec.kind).length >= this.standbyCount) break;
        if (this.entries.size + this.liveStandbys().length >= this.opts.maxProcesses) return;
        const room = await this.memory.admit(this.backend, false);
        if (!room) {
          this.log.debug({ backend: this.backend }, "no standby started: the warm memory budget has no room");
          return;
        }
        if (this.closed) {
          room.settle();
          return;
        }
        this.startStandby(k.spec, room.settle);
      }
    }
  }

  private startStandby(spec: StandbyKind<W>, settle: () => void): void {
    const s: Standby<W> = {
      kind: spec.kind,
      startedAt: Date.now(),
      taken: false,
      ending: false,
      starting: Promise.resolve(undefined),
    };
    s.starting = spec
      .start()
      .then(
        (w) => {
          s.worker = w;
          this.memory.watchStart(this.backend, w.pid);
          this.stats.standbyStarted++;
          void w.ended.then(() => this.onStandbyEnded(s));
          this.log.debug({ pid: w.pid, kind: spec.kind.slice(0, 12) }, "standby started");
          if (this.closed && !s.taken) void this.endStandby(s, "shutdown");
          return w;
        },
        (err: unknown) => {
          const k = this.kinds.get(spec.kind);
          if (k) k.failedAt = Date.now();
          this.log.warn({ err }, "a standby did not start; none of its kind for a while");
          this.dropStandby(s);
          return undefined;
        },
      )
      .finally(settle);
    this.standbys.push(s);
    this.armStandbyTimer(s);
  }

  /** A standby of a kind no turn used for `idleSeconds` is ended. */
  private armStandbyTimer(s: Standby<W>): void {
    const idleMs = this.opts.idleSeconds * 1000;
    const due = Math.max(s.startedAt, this.kindUsedAt(s.kind)) + idleMs - Date.now();
    s.idleTimer = setTimeout(
      () => {
        if (s.taken || s.ending || !this.standbys.includes(s)) return;
        if (Date.now() - this.kindUsedAt(s.kind) < idleMs) return this.armStandbyTimer(s);
        this.stats.reaped++;
        void this.endStandby(s, "idle");
      },
      Math.max(1000, due),
    );
    s.idleTimer.unref();
  }

  private onStandbyEnded(s: Standby<W>): void {
    if (s.ending || s.taken) return;
    this.stats.died++;
    this.log.warn({ pid: s.worker?.pid }, "a standby ended unexpectedly");
    this.dropStandby(s);
  }

  // ---- what others see ----

  /** The workers and standbys now (with their group's memory unless `rss` is false). */
  list(rss = true): WarmProcessInfo[] {
    const out: WarmProcessInfo[] = [...this.entries.values()]
      .filter((e) => e.worker)
      .map((e) => ({
        backend: this.backend,
        pid: e.worker!.pid,
        busy: e.busy,
        turns: e.turns,
        startedAt: e.startedAt,
        lastUsedAt: e.lastUsedAt,
      }));
    for (const s of this.standbys)
      if (s.worker && !s.ending)
        out.push({
          backend: this.backend,
          pid: s.worker.pid,
          busy: false,
          standby: true,
          turns: 0,
          startedAt: s.startedAt,
          lastUsedAt: s.startedAt,
        });
    if (!rss) return out;
    const mem = groupRss(out.map((w) => w.pid).filter((p): p is number => p !== undefined));
    return out.map((w) => (w.pid !== undefined && mem.has(w.pid) ? { ...w, rssBytes: mem.get(w.pid)! } : w));
  }

  /** The processes for the memory budget; the idle ones can be ended by it. */
  memoryItems(): MemoryItem[] {
    const out: MemoryItem[] = [];
    for (const e of this.entries.values()) {
      if (!e.worker) continue;
      out.push({
        backend: this.backend,
        pid: e.worker.pid,
        busy: e.busy,
        standby: false,
        startedAt: e.startedAt,
        lastUsedAt: e.lastUsedAt,
        turns: e.turns,
        end: () => {
          if (e.busy || this.entries.get(e.key) !== e) return Promise.resolve();
          this.stats.memoryEvicted++;
          return this.end(e, "memory");
        },
      });
    }
    for (const s of this.standbys) {
      if (!s.worker || s.ending) continue;
      out.push({
        backend: this.backend,
        pid: s.worker.pid,
        busy: s.taken,
        standby: true,
        startedAt: s.startedAt,
        lastUsedAt: s.startedAt,
        end: () => {
          if (s.taken || s.ending) return Promise.resolve();
          this.stats.memoryEvicted++;
          const k = this.kinds.get(s.kind);
          if (k) k.failedAt = Date.now();
          return this.endStandby(s, "memory");
        },
      });
    }
    return out;
  }

  /** Conversation workers now (standbys not counted). */
  get size(): number {
    return this.entries.size;
  }

  /** Standbys now (started or starting). */
  get standbySize(): number {
    return this.liveStandbys().length;
  }

  /** Resolves once no standby is starting or about to be (tests, the bench). */
  async settled(): Promise<void> {
    for (let i = 0; i < 100; i++) {
      if (!this.fillTimer && !this.filling && this.standbys.every((s) => s.worker || s.ending)) return;
      await Promise.all([this.filling, ...this.standbys.map((s) => s.starting)]);
      if (this.fillTimer) await new Promise((r) => setTimeout(r, 20));
    }
  }

  /** End every worker and standby (bridge shutdown). Turns still running see their process end. */
  async close(): Promise<void> {
    this.closed = true;
    this.unregister();
    if (this.fillTimer) clearTimeout(this.fillTimer);
    this.fillTimer = undefined;
    await Promise.all([
      ...[...this.entries.values()].map((e) => this.end(e, "shutdown")),
      ...[...this.standbys].map((s) => this.endStandby(s, "shutdown")),
    ]);
    await this.filling;
    await Promise.all([...this.closing.values()]);
  }
}

function untilAborted(p: Promise<void>, signal: AbortSignal | undefined): Promise<void> {
  if (!signal) return p;
  return new Promise<void>((resolve) => {
    const done = () => {
      signal.removeEventListener("abort", done);
      resolve();
    };
    signal.addEventListener("abort", done, { once: true });
    void p.then(done);
  });
}
