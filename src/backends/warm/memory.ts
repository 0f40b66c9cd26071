/**
 * The memory budget of the warm processes of every backend together (`warm.maxMemoryMB`, the
 * top-level `warm:` section): what a warm CLI holds between turns is counted, and kept under it.
 *
 * - Measured, not guessed: the resident set of each warm process's whole process group
 *   (`groupRss`, one /proc scan for all), read when a process is to start, every
 *   `ENFORCE_EVERY_MS`, and for `/health`. Never on a warm turn's path: a scan costs 2-9 ms of CPU
 *   on a loaded machine.
 * - A CLI holds most while it starts: Claude Code 2.1.197 climbs to ~280 MB in its first ~2 s (with
 *   its bundled ripgrep, a second copy of itself, beside it for a moment), then settles at ~150 MB
 *   idle, ~190-205 MB after a turn. So every start is watched (`treeRss` of the new process every
 *   `START_SAMPLE_MS` for `WARMUP_MS`, ~0.2 ms each) and each backend's start-up peak is kept; a new
 *   process needs room for that peak, a process still starting (in its first `WARMUP_MS` and no turn
 *   finished yet) is counted at it,
 *   and any other at least at the largest size one of its backend settled at (a standby grows
 *   when it is taken; a process grows with its turns). Before a backend's first start was watched:
 *   `DEFAULT_START_BYTES`. The budget errs on the safe side: it is never passed by what it admitted.
 * - Before a warm process starts (`admit`): if it does not fit, idle processes are ended to make
 *   room — standbys first, then the least recently used — across every backend, and only when
 *   that is enough. Otherwise nothing is ended and the caller runs its turn cold (a turn never waits
 *   for memory). A standby is only started when it fits without ending anything.
 * - Every `ENFORCE_EVERY_MS` (processes grow with their turns): past the budget, idle processes
 *   are ended in the same order until it holds again. Busy ones are never ended: a turn is never
 *   cut for memory.
 * RSS counts the pages a process shares with others once per process, so the sum is an upper
 * bound of what the processes really hold together: the budget errs on the safe side.
 */
import os from "node:os";
import type { Logger } from "pino";
import { groupRss, treeRss } from "./rss.js";

/** One warm process as the budget sees it. */
export interface MemoryItem {
  backend: string;
  pid: number | undefined;
  busy: boolean;
  /** A standby: started for no conversation yet (the first to go). */
  standby: boolean;
  startedAt: number;
  lastUsedAt: number;
  /** Turns it has finished (one that has finished a turn is past its start-up). */
  turns?: number;
  /** End it to free its memory (an idle process of a pool; absent: the budget cannot end it). */
  end?(): Promise<void>;
}

/** Where the items come from (every registered warm source, see pool.ts). */
export type MemoryItems = () => MemoryItem[];

/** Resident bytes per process-group leader (replaceable in tests). */
export type RssReader = (pids: number[]) => Map<number, number>;

/** What a starting process of a backend is counted at before one was watched (Claude Code peaks at ~280 MB, Gemini CLI and Qwen Code settle at 320-480 MB). */
export const DEFAULT_START_BYTES = 384 * 1024 * 1024;
/** A process younger than this is still starting: counted at its backend's start-up peak, and watched. */
const WARMUP_MS = 10_000;
/** How often a starting process's memory is read. */
const START_SAMPLE_MS = 100;
/** How often the budget is checked while warm processes exist. */
export const ENFORCE_EVERY_MS = 5_000;
/** The default budget's share of the machine's memory (see `defaultWarmMemoryBytes`). */
export const DEFAULT_MEMORY_SHARE = 0.4;

/**
 * The default budget: 40% of the machine's memory, or of the container's limit when it has a
 * smaller one. On a 2 GB VPS that is ~800 MB — four idle Claude Code processes, or two of Qwen
 * Code — which leaves the rest for the system (~200 MB), OpenClaw's gateway (~300-400 MB), the
 * bridge (~100 MB) and the cold turns that run when the budget is full (~200 MB each); on 4 GB,
 * ~1.6 GB.
 */
export function defaultWarmMemoryBytes(): number {
  const total = os.totalmem();
  const limit = (process as { constrainedMemory?: () => number | undefined }).constrainedMemory?.() ?? 0;
  const mem = limit > 0 && limit < total ? limit : total;
  return Math.floor(mem * DEFAULT_MEMORY_SHARE);
}

/** What `/health`, the dashboard and `/metrics` show of the budget. */
export interface WarmMemoryState {
  maxBytes: number;
  /** Resident memory of every warm process now (their process groups). */
  usedBytes: number;
  /** Whether the budget was configured (`warm.maxMemoryMB`) or is the default share of the machine's memory. */
  configured: boolean;
  /** Per backend seen so far: what a new process needs room for (its start-up peak) and the most a started one held. */
  backends?: Record<string, { startBytes: number; settledBytes: number }>;
}

export class WarmMemory {
  maxBytes: number;
  configured = false;
  /** The most one process of a backend held while starting (its first `WARMUP_MS`). */
  private readonly startPeak = new Map<string, number>();
  /** The most one process of a backend held after it started. */
  private readonly settled = new Map<string, number>();
  /** Starting processes being watched: backend and when each started. */
  private readonly starting = new Map<number, { backend: string; until: number }>();
  private startTimer: NodeJS.Timeout | undefined;
  /** Processes admitted but not started yet: their expected bytes. */
  private readonly reserved = new Map<symbol, { backend: string; bytes: number }>();
  /** Admissions one at a time (two at once could both fit alone and not together). */
  private queue: Promise<unknown> = Promise.resolve();
  private timer: NodeJS.Timeout | undefined;
  private enforcing = false;
  log: Logger | undefined;

  constructor(
    private readonly items: MemoryItems,
    private readonly rss: RssReader = groupRss,
    maxBytes = defaultWarmMemoryBytes(),
    /** One process tree's resident bytes (the start watch; replaceable in tests). */
    private readonly tree: (pid: number) => number | undefined = treeRss,
  ) {
    this.maxBytes = maxBytes;
  }

  /** Set the budget (`warm.maxMemoryMB`; undefined: the default share of the machine's memory). */
  configure(maxMemoryMB: number | undefined): void {
    this.configured = maxMemoryMB !== undefined;
    this.maxBytes = maxMemoryMB !== undefined ? maxMemoryMB * 1024 * 1024 : defaultWarmMemoryBytes();
  }

  /** What a new process of `backend` needs room for: its start-up peak. */
  expected(backend: string): number {
    return this.startPeak.get(backend) ?? Math.max(DEFAULT_START_BYTES, this.settled.get(backend) ?? 0);
  }

  /** What a started process of `backend` is counted at least. */
  private settledOf(backend: string): number {
    return this.settled.get(backend) ?? 0;
  }

  /**
   * Watch a process that just started (its tree every `START_SAMPLE_MS` for `WARMUP_MS`), to learn
   * its backend's start-up peak. One timer for all of them; ~0.2 ms per reading.
   */
  watchStart(backend: string, pid: number | undefined): void {
    if (pid === undefined) return;
    const sample = (p: number, w: { backend: string; until: number }, now: number) => {
      const rss = this.tree(p);
      if (rss === undefined || now > w.until) this.starting.delete(p);
      if (rss !== undefined && rss > (this.startPeak.get(w.backend) ?? 0)) this.startPeak.set(w.backend, rss);
    };
    const watch = { backend, until: Date.now() + WARMUP_MS };
    this.starting.set(pid, watch);
    sample(pid, watch, Date.now());
    this.startTimer ??= setInterval(() => {
      const now = Date.now();
      for (const [p, w] of this.starting) sample(p, w, now);
      if (this.starting.size === 0) {
        clearInterval(this.startTimer);
        this.startTimer = undefined;
      }
    }, START_SAMPLE_MS);
    this.startTimer.unref();
  }

  /** Every warm process with its resident memory now, and what each is charged. */
  measure(): Array<MemoryItem & { rssBytes: number | undefined; charge: number }> {
    const list = this.items();
    const mem = this.rss(list.map((i) => i.pid).filter((p): p is number => p !== undefined));
    const now = Date.now();
    return list.map((i) => {
      const rssBytes = i.pid !== undefined ? mem.get(i.pid) : undefined;
      const warming = now - i.startedAt < WARMUP_MS && !i.turns;
      const peaks = warming ? this.startPeak : this.settled;
      if (rssBytes !== undefined && rssBytes > (peaks.get(i.backend) ?? 0)) peaks.set(i.backend, rssBytes);
      const floor = warming || rssBytes === undefined ? this.expected(i.backend) : this.settledOf(i.backend);
      return { ...i, rssBytes, charge: Math.max(rssBytes ?? 0, floor) };
    });
  }

  /** Per backend seen so far: the start-up peak a new process needs room for, and the most a started one held. */
  peaks(): Record<string, { startBytes: number; settledBytes: number }> {
    const out: Record<string, { startBytes: number; settledBytes: number }> = {};
    for (const b of new Set([...this.startPeak.keys(), ...this.settled.keys()]))
      out[b] = { startBytes: this.expected(b), settledBytes: this.settledOf(b) };
    return out;
  }

  /** The budget and its use now (one /proc scan). */
  state(): WarmMemoryState {
    const used = this.measure().reduce((n, i) => n + (i.rssBytes ?? 0), 0);
    return { maxBytes: this.maxBytes, usedBytes: used, configured: this.configured };
  }

  /**
   * Room for one more process of `backend`: true (room was there or was made by ending idle
   * processes, standbys first) with a reservation to `settle()` once the process has started (or
   * failed to); false when it does not fit even without every idle process (run cold). `mayEnd`
   * false: only if it fits as things are (a standby ends nothing).
   */
  admit(backend: string, mayEnd = true): Promise<{ settle(): void } | undefined> {
    const run = this.queue.then(() => this.tryAdmit(backend, mayEnd));
    this.queue = run.catch(() => undefined);
    return run;
  }

  private async tryAdmit(backend: string, mayEnd: boolean): Promise<{ settle(): void } | undefined> {
    const items = this.measure();
    const need = this.expected(backend);
    const reserved = [...this.reserved.values()].reduce((n, r) => n + r.bytes, 0);
    let used = items.reduce((n, i) => n + i.charge, 0) + reserved;
    if (used + need > this.maxBytes) {
      if (!mayEnd) return undefined;
      const idle = endOrder(items);
      const freeable = idle.reduce((n, i) => n + i.charge, 0);
      if (used - freeable + need > this.maxBytes) {
        this.log?.debug(
          { backend, usedMB: mb(used), needMB: mb(need), maxMB: mb(this.maxBytes) },
          "warm memory budget full of busy processes: the turn runs cold",
        );
        return undefined;
      }
      const ending: Promise<void>[] = [];
      for (const i of idle) {
        if (used + need <= this.maxBytes) break;
        used -= i.charge;
        this.log?.info(
          { backend: i.backend, pid: i.pid, standby: i.standby, rssMB: mb(i.charge), maxMB: mb(this.maxBytes) },
          "ending an idle warm process to make room in the memory budget",
        );
        ending.push(i.end!());
      }
      // The memory is free once they are reaped (a polite close takes ~50-500 ms).
      await Promise.all(ending);
    }
    const token = Symbol(backend);
    this.reserved.set(token, { backend, bytes: need });
    return { settle: () => this.reserved.delete(token) };
  }

  /** Past the budget: end idle processes (standbys first, then least recently used) until it holds. */
  async enforce(): Promise<void> {
    if (this.enforcing) return;
    this.enforcing = true;
    try {
      const items = this.measure();
      let used = items.reduce((n, i) => n + (i.rssBytes ?? 0), 0);
      if (used <= this.maxBytes) return;
      const ending: Promise<void>[] = [];
      for (const i of endOrder(items)) {
        if (used <= this.maxBytes) break;
        used -= i.rssBytes ?? 0;
        this.log?.info(
          { backend: i.backend, pid: i.pid, standby: i.standby, rssMB: mb(i.rssBytes ?? 0), maxMB: mb(this.maxBytes) },
          "warm processes past their memory budget: ending an idle one",
        );
        ending.push(i.end!());
      }
      if (used > this.maxBytes)
        this.log?.warn(
          { usedMB: mb(used), maxMB: mb(this.maxBytes) },
          "warm processes past their memory budget while busy; idle ones go once their turns end",
        );
      await Promise.all(ending);
    } finally {
      this.enforcing = false;
    }
  }

  /** Check every `ENFORCE_EVERY_MS` while `active()` (warm processes exist); idempotent. */
  watch(active: () => boolean): void {
    if (this.timer) return;
    this.timer = setInterval(() => {
      if (active()) void this.enforce().catch((err) => this.log?.debug({ err }, "warm memory check failed"));
    }, ENFORCE_EVERY_MS);
    this.timer.unref();
  }
}

/** Idle processes the budget may end, in the order it ends them: standbys, then least recently used. */
function endOrder<T extends MemoryItem>(items: T[]): T[] {
  return items
    .filter((i) => !i.busy && i.end)
    .sort((a, b) => Number(b.standby) - Number(a.standby) || a.lastUsedAt - b.lastUsedAt);
}

const mb = (b: number) => Math.round(b / 1048576);
