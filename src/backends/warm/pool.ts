/**
 * The warm pool of one backend: long-lived CLI processes ("workers"), at most one per conversation
 * key, reused turn after turn.
 *
 * - A turn leases its conversation's worker if it fits (same session, same bootstrap and model —
 *   the backend decides), else the old one is ended first and a new one started: one conversation
 *   never has two processes, also while the old one is still closing.
 * - At most `maxProcesses` workers (starting ones included). A new conversation at the limit ends
 *   the least recently used idle worker; when every worker is busy the turn runs cold (the caller
 *   gets no lease), so the pool never makes a turn wait for another conversation.
 * - A worker idle for `idleSeconds` is ended; a worker that dies is forgotten at once (its turn, if
 *   any, sees the end itself); `close()` ends all of them (bridge shutdown).
 * Workers are `CliProcess`es underneath, so the orphan watcher and the start-up reaper know them.
 */
import type { Logger } from "pino";
import { groupRss } from "./rss.js";

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
  /** The worker was started for this turn (its first turn), rather than reused. */
  fresh: boolean;
  /** Hand the worker back. `keep: false` ends it (the turn left it unfit for another). */
  release(keep: boolean): void;
}

/** One warm worker as health, doctor and metrics show it. */
export interface WarmProcessInfo {
  backend: string;
  pid: number | undefined;
  busy: boolean;
  /** Turns it has served. */
  turns: number;
  startedAt: number;
  lastUsedAt: number;
  /** Resident memory of its process group, when readable. */
  rssBytes?: number;
}

export interface WarmPoolStats {
  started: number;
  reused: number;
  /** Turns run cold because every worker was busy at the limit. */
  overflow: number;
  /** Workers ended for being idle too long. */
  reaped: number;
  /** Workers ended to make room for another conversation. */
  evicted: number;
  /** Workers ended by the bridge's own shutdown. */
  closed: number;
  /** Workers that ended without being asked to (crash, kill). */
  died: number;
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
}

/** Anything holding warm processes: a pool, or a backend's shared server (`opencode serve`). */
export interface WarmSource {
  /** Its processes now; `rss` false: without reading their memory. */
  list(rss: boolean): WarmProcessInfo[];
  /** A pool's backend and what happened to its workers so far. */
  readonly backend?: string;
  readonly stats?: WarmPoolStats;
}

const sources = new Set<WarmSource>();

/** Make a source's processes visible to `warmProcesses()`; returns the function that removes it. */
export function registerWarmSource(source: WarmSource): () => void {
  sources.add(source);
  return () => sources.delete(source);
}

/** Every warm process of every source in this process (health, doctor, metrics, dashboard). */
export function warmProcesses(): WarmProcessInfo[] {
  const all = [...sources].flatMap((p) => p.list(false));
  const rss = groupRss(all.map((w) => w.pid).filter((p): p is number => p !== undefined));
  return all.map((w) => (w.pid !== undefined && rss.has(w.pid) ? { ...w, rssBytes: rss.get(w.pid)! } : w));
}

/** What happened to the warm workers so far, per backend (for `/metrics`: started, reused, overflow, reaped, evicted, closed, died). */
export function warmEventTotals(): Map<string, WarmPoolStats> {
  return sumWarmStats(warmEventSources());
}

/**
 * The live counters of the pools registered now (not copies): the bridge's shutdown takes them
 * before it closes the backends, whose pools then unregister, and sums them after.
 */
export function warmEventSources(): Array<{ backend: string; stats: WarmPoolStats }> {
  return [...sources].flatMap((src) => (src.stats && src.backend ? [{ backend: src.backend, stats: src.stats }] : []));
}

/** The counters summed per backend. */
export function sumWarmStats(list: Array<{ backend: string; stats: WarmPoolStats }>): Map<string, WarmPoolStats> {
  const out = new Map<string, WarmPoolStats>();
  for (const { backend, stats } of list) {
    const t = out.get(backend) ?? { started: 0, reused: 0, overflow: 0, reaped: 0, evicted: 0, closed: 0, died: 0 };
    for (const k of Object.keys(t) as Array<keyof WarmPoolStats>) t[k] += stats[k];
    out.set(backend, t);
  }
  return out;
}

/** What `/health` and `clawbridge doctor` show of the warm processes. */
export function warmSummary(): {
  processes: number;
  rssBytes: number;
  byBackend: Record<string, { processes: number; busy: number; rssBytes: number }>;
  list: WarmProcessInfo[];
} {
  const list = warmProcesses();
  const byBackend: Record<string, { processes: number; busy: number; rssBytes: number }> = {};
  for (const w of list) {
    const b = (byBackend[w.backend] ??= { processes: 0, busy: 0, rssBytes: 0 });
    b.processes++;
    if (w.busy) b.busy++;
    b.rssBytes += w.rssBytes ?? 0;
  }
  return { processes: list.length, rssBytes: list.reduce((n, w) => n + (w.rssBytes ?? 0), 0), byBackend, list };
}

export class WarmPool<W extends WarmWorker> implements WarmSource {
  private readonly entries = new Map<string, Entry<W>>();
  /** Workers being ended, by key: a new worker for the key waits for the old one to be gone. */
  private readonly closing = new Map<string, Promise<void>>();
  private closed = false;
  private readonly unregister: () => void;
  readonly stats: WarmPoolStats = { started: 0, reused: 0, overflow: 0, reaped: 0, evicted: 0, closed: 0, died: 0 };

  constructor(
    readonly backend: string,
    private readonly opts: { idleSeconds: number; maxProcesses: number },
    private readonly log: Logger,
  ) {
    this.unregister = registerWarmSource(this);
  }

  /**
   * The worker for conversation `key`: the current one if `fits` it, else a new one from `start`.
   * Undefined when the pool is closed or full of busy workers (run the turn cold). Waits while the
   * conversation's worker is serving another turn (an aborted turn still winding down), bounded by
   * `signal`. `start` failing removes the reservation and rethrows.
   */
  async acquire(
    key: string,
    fits: (w: W) => boolean,
    start: () => Promise<W>,
    signal?: AbortSignal,
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
      if (this.entries.size >= this.opts.maxProcesses) {
        const idle = [...this.entries.values()].filter((x) => !x.busy).sort((a, b) => a.lastUsedAt - b.lastUsedAt)[0];
        if (!idle) {
          this.stats.overflow++;
          return undefined;
        }
        this.stats.evicted++;
        await this.end(idle, "evicted");
        continue;
      }
      const entry: Entry<W> = {
        key,
        busy: false,
        turns: 0,
        startedAt: Date.now(),
        lastUsedAt: Date.now(),
        ending: false,
      };
      this.entries.set(key, entry);
      const lease = this.lease(entry, true);
      let worker: W;
      try {
        worker = await start();
      } catch (err) {
        this.entries.delete(key);
        entry.release?.();
        throw err;
      }
      entry.worker = worker;
      this.stats.started++;
      void worker.ended.then(() => this.onEnded(entry));
      if (this.closed) {
        // Shut down while it was starting.
        lease.release(false);
        return undefined;
      }
      return { ...lease, worker };
    }
    return undefined;
  }

  private lease(e: Entry<W>, fresh: boolean): WarmLease<W> {
    if (e.idleTimer) clearTimeout(e.idleTimer);
    e.idleTimer = undefined;
    e.busy = true;
    e.lastUsedAt = Date.now();
    e.released = new Promise<void>((r) => (e.release = r));
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

  /** The workers now (with their group's memory unless `rss` is false). */
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
    if (!rss) return out;
    const mem = groupRss(out.map((w) => w.pid).filter((p): p is number => p !== undefined));
    return out.map((w) => (w.pid !== undefined && mem.has(w.pid) ? { ...w, rssBytes: mem.get(w.pid)! } : w));
  }

  get size(): number {
    return this.entries.size;
  }

  /** End every worker (bridge shutdown). Turns still running see their process end. */
  async close(): Promise<void> {
    this.closed = true;
    this.unregister();
    await Promise.all([...this.entries.values()].map((e) => this.end(e, "shutdown")));
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
