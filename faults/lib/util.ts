/** Small shared helpers of the fault suite: seeded randomness, bounded waiting, paths. */
import path from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** mulberry32: a small, fast, seeded PRNG (the same seed gives the same cases). */
export class Rng {
  private s: number;
  constructor(seed: number) {
    this.s = seed >>> 0;
  }
  next(): number {
    let t = (this.s = (this.s + 0x6d2b79f5) >>> 0);
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  /** Integer in [lo, hi]. */
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.next() * (hi - lo + 1));
  }
  pick<T>(xs: readonly T[]): T {
    return xs[Math.floor(this.next() * xs.length)]!;
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
  /** One of the keys, with the given weights. */
  weighted<K extends string>(weights: Record<K, number>): K {
    const entries = Object.entries(weights) as [K, number][];
    let total = 0;
    for (const [, w] of entries) total += w;
    let x = this.next() * total;
    for (const [k, w] of entries) {
      x -= w;
      if (x < 0) return k;
    }
    return entries[entries.length - 1]![0];
  }
}

/**
 * Poll `check` until it returns a value other than undefined, or until `timeoutMs` passed (then the
 * last `fallback()` is returned). Never a fixed sleep as a verdict: the answer comes as soon as it is
 * known, and the limit is generous.
 */
export async function eventually<T>(
  check: () => T | undefined | Promise<T | undefined>,
  timeoutMs: number,
  intervalMs = 50,
): Promise<{ value: T | undefined; ms: number }> {
  const start = Date.now();
  for (let i = 0; i < 1_000_000; i++) {
    const v = await check();
    if (v !== undefined) return { value: v, ms: Date.now() - start };
    if (Date.now() - start >= timeoutMs) break;
    await sleep(Math.min(intervalMs, Math.max(1, timeoutMs - (Date.now() - start))));
  }
  return { value: undefined, ms: Date.now() - start };
}

/** Run `n` workers over a shared job counter, each job bounded by the deadline (ms since epoch). */
export async function workers(n: number, deadline: number, job: (worker: number) => Promise<boolean>): Promise<void> {
  await Promise.all(
    Array.from({ length: n }, async (_, w) => {
      for (let i = 0; i < 10_000_000 && Date.now() < deadline; i++) {
        if (!(await job(w))) return;
      }
    }),
  );
}

export const fmtMs = (ms: number | undefined) =>
  ms === undefined || !Number.isFinite(ms) ? "–" : ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(2)} s`;
export const int = (v: number) => (Number.isFinite(v) ? Math.round(v).toLocaleString("en-US") : "–");
