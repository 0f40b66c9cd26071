/**
 * Every warm process of this bridge, whatever holds it: the backends' pools and shared servers
 * (`opencode serve`) register here as `WarmSource`s. From here come what `/health`, `clawbridge
 * doctor`, `/metrics` and the dashboard show (`warmSummary`, `warmProcesses`, the counters), the
 * one memory budget over all of them (`warmMemory`, memory.ts), and the bridge-wide `warm:`
 * settings (`configureWarm`). One pool's own work is pool.ts.
 */
import type { Logger } from "pino";
import { WarmMemory, type MemoryItem, type WarmMemoryState } from "./memory.js";
import { groupRss } from "./rss.js";

/** One warm worker as health, doctor and metrics show it. */
export interface WarmProcessInfo {
  backend: string;
  pid: number | undefined;
  busy: boolean;
  /** A standby: started, idle, for no conversation yet. */
  standby?: boolean;
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
  /** Workers ended for being idle too long (standbys of a kind no longer used included). */
  reaped: number;
  /** Workers ended to make room for another conversation (at `maxProcesses`). */
  evicted: number;
  /** Workers ended by the bridge's own shutdown. */
  closed: number;
  /** Workers that ended without being asked to (crash, kill). */
  died: number;
  /** Standbys started. */
  standbyStarted: number;
  /** Standbys taken by a new conversation (its first turn started on one). */
  standbyTaken: number;
  /** Idle processes ended for the memory budget. */
  memoryEvicted: number;
  /** Turns run cold because a new process did not fit the memory budget. */
  memoryOverflow: number;
}

export const NO_STATS: WarmPoolStats = {
  started: 0,
  reused: 0,
  overflow: 0,
  reaped: 0,
  evicted: 0,
  closed: 0,
  died: 0,
  standbyStarted: 0,
  standbyTaken: 0,
  memoryEvicted: 0,
  memoryOverflow: 0,
};

/** Anything holding warm processes: a pool, or a backend's shared server (`opencode serve`). */
export interface WarmSource {
  /** Its processes now; `rss` false: without reading their memory. */
  list(rss: boolean): WarmProcessInfo[];
  /** A pool's backend and what happened to its workers so far. */
  readonly backend?: string;
  readonly stats?: WarmPoolStats;
  /** Its processes for the memory budget, the idle ones with a way to end them (absent: counted, never ended). */
  memoryItems?(): MemoryItem[];
}

const sources = new Set<WarmSource>();

/** Make a source's processes visible to `warmProcesses()`; returns the function that removes it. */
export function registerWarmSource(source: WarmSource): () => void {
  sources.add(source);
  return () => sources.delete(source);
}

/** The memory budget of every warm process in this bridge (configured at start-up: `configureWarm`). */
export const warmMemory = new WarmMemory(() =>
  [...sources].flatMap(
    (s) =>
      s.memoryItems?.() ??
      s.list(false).map((w) => ({
        backend: w.backend,
        pid: w.pid,
        busy: w.busy,
        standby: false,
        startedAt: w.startedAt,
        lastUsedAt: w.lastUsedAt,
      })),
  ),
);

/** Standbys per backend and kind when a backend's own `warm.standby` says nothing (0 until a bridge configures it). */
let standbyDefault = 0;
export const defaultStandby = (): number => standbyDefault;

/** How many sources are registered now (the memory budget's periodic check runs only while any is). */
export const warmSourceCount = (): number => sources.size;

/**
 * The bridge-wide warm settings (the top-level `warm:` section), set when a bridge starts. Until
 * then (a backend made by a test or by `clawbridge doctor`) no standby is started.
 */
export function configureWarm(cfg: { maxMemoryMB?: number; standby: number }, log?: Logger): void {
  warmMemory.configure(cfg.maxMemoryMB);
  if (log) warmMemory.log = log;
  standbyDefault = cfg.standby;
}

/** Every warm process of every source in this process (health, doctor, metrics, dashboard). */
export function warmProcesses(): WarmProcessInfo[] {
  const all = [...sources].flatMap((p) => p.list(false));
  const rss = groupRss(all.map((w) => w.pid).filter((p): p is number => p !== undefined));
  return all.map((w) => (w.pid !== undefined && rss.has(w.pid) ? { ...w, rssBytes: rss.get(w.pid)! } : w));
}

/** What happened to the warm workers so far, per backend (for `/metrics`: started, reused, overflow, reaped, evicted, closed, died, standbys, memory). */
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
    const t = out.get(backend) ?? { ...NO_STATS };
    for (const k of Object.keys(t) as Array<keyof WarmPoolStats>) t[k] += stats[k] ?? 0;
    out.set(backend, t);
  }
  return out;
}

/** What `/health` and `clawbridge doctor` show of the warm processes, and their memory budget. */
export function warmSummary(): {
  processes: number;
  /** Of them, standbys (started for no conversation yet). */
  standby: number;
  rssBytes: number;
  /** The budget of all warm processes (`warm.maxMemoryMB`) and its use now. */
  memory: WarmMemoryState;
  byBackend: Record<string, { processes: number; busy: number; standby: number; rssBytes: number }>;
  list: WarmProcessInfo[];
} {
  const list = warmProcesses();
  const byBackend: Record<string, { processes: number; busy: number; standby: number; rssBytes: number }> = {};
  for (const w of list) {
    const b = (byBackend[w.backend] ??= { processes: 0, busy: 0, standby: 0, rssBytes: 0 });
    b.processes++;
    if (w.busy) b.busy++;
    if (w.standby) b.standby++;
    b.rssBytes += w.rssBytes ?? 0;
  }
  const rssBytes = list.reduce((n, w) => n + (w.rssBytes ?? 0), 0);
  return {
    processes: list.length,
    standby: list.filter((w) => w.standby).length,
    rssBytes,
    memory: {
      maxBytes: warmMemory.maxBytes,
      usedBytes: rssBytes,
      configured: warmMemory.configured,
      backends: warmMemory.peaks(),
    },
    byBackend,
    list,
  };
}
