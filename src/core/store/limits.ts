/**
 * Backends at their limit (a subscription's usage limit, a rate limit, a quota): each is skipped,
 * without being tried, until its reset — the time it said, or `backoffSeconds` after the hit when it
 * said none — then tried again. Kept in `<dataDir>/limits.json` (written atomically on each change)
 * so a restart does not send the next turn into a limit that has not reset.
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import { writeFileAtomic } from "../util/atomic-write.js";

export interface BackendLimit {
  /** Skipped until then (ms since the epoch). */
  until: number;
  /** The reset the backend said, when it said one. */
  resetAt?: number;
  /** Its own words (the CLI's or the upstream's message). */
  message: string;
  /** When the limit was hit. */
  since: number;
}

const FILE = "limits.json";
/** A reset further away than this is not believed (a misread date): the backoff applies instead. */
const MAX_AHEAD_MS = 8 * 24 * 3_600_000;

export class LimitBook {
  private readonly limits = new Map<string, BackendLimit>();

  constructor(
    private readonly dataDir: string,
    private readonly now: () => number = Date.now,
  ) {
    try {
      const j = JSON.parse(readFileSync(path.join(dataDir, FILE), "utf8")) as Record<string, BackendLimit>;
      for (const [backend, l] of Object.entries(j ?? {})) {
        if (l && typeof l.until === "number" && typeof l.message === "string" && l.until > this.now())
          this.limits.set(backend, l);
      }
    } catch {
      /* none yet, or unreadable: nothing is exhausted */
    }
  }

  /** The backend's limit when it has not reset yet. */
  exhausted(backend: string): BackendLimit | undefined {
    const l = this.limits.get(backend);
    if (!l) return undefined;
    if (l.until > this.now()) return l;
    this.limits.delete(backend);
    this.save();
    return undefined;
  }

  /** The backend answered with a limit: skip it until `resetAt`, or for `backoffSeconds`. */
  hit(backend: string, message: string, resetAt: number | undefined, backoffSeconds: number): BackendLimit {
    const now = this.now();
    const believed = resetAt && resetAt > now && resetAt - now < MAX_AHEAD_MS ? resetAt : undefined;
    const l: BackendLimit = {
      until: believed ?? now + backoffSeconds * 1000,
      ...(believed ? { resetAt: believed } : {}),
      message: message.slice(0, 500),
      since: now,
    };
    this.limits.set(backend, l);
    this.save();
    return l;
  }

  /** The backend answered: whatever limit was noted is over. */
  clear(backend: string): void {
    if (this.limits.delete(backend)) this.save();
  }

  /** Every backend at its limit now. */
  all(): Record<string, BackendLimit> {
    const out: Record<string, BackendLimit> = {};
    for (const name of [...this.limits.keys()]) {
      const l = this.exhausted(name);
      if (l) out[name] = l;
    }
    return out;
  }

  private save(): void {
    try {
      writeFileAtomic(path.join(this.dataDir, FILE), `${JSON.stringify(Object.fromEntries(this.limits), null, 1)}\n`);
    } catch {
      /* the state stays in memory; the next change tries again */
    }
  }
}
