/**
 * Backends at their limit (a subscription's usage limit, a rate limit, a quota): each is skipped,
 * without being tried, until its reset — the time it said, or `backoffSeconds` after the hit when it
 * said none — then tried again. The book is read on every turn's fallback path, so its reads are
 * synchronous, from memory; where it is kept behind that is a `LimitKeeper`:
 * - alone (SQLite, the default): `<dataDir>/limits.json`, written atomically on each change, so a
 *   restart does not send the next turn into a limit that has not reset;
 * - several bridges on one PostgreSQL (`store: { kind: postgres }`): the `backend_limits` table
 *   (src/core/db/pg-migrations.ts), loaded at start, each change written there and announced
 *   (`NOTIFY clawbridge_limits`) to every instance, which notes it in its own memory: a limit one
 *   instance met is skipped by all. Writes are queued in order, off the turn's path. A notice missed
 *   while an instance's listening connection was being made again costs that instance at most one
 *   try of the limited backend (which notes the limit again).
 * Expiry is each instance's own (its clock against `until`, an absolute time).
 */
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import path from "node:path";
import type { StoreBacking } from "../db/backing.js";
import type { PostgresDb } from "../db/postgres.js";
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

/** Where a book is kept, behind its reads from memory. Never throws: the state stays in memory. */
export interface LimitKeeper {
  /** `backend` is at `limit` (`all`: the whole book after the change). */
  noted(backend: string, limit: BackendLimit, all: ReadonlyMap<string, BackendLimit>): void;
  /** `backend` answered: no limit (`all`: the whole book after the change). */
  cleared(backend: string, all: ReadonlyMap<string, BackendLimit>): void;
  /** `limit` of `backend` has reset (a shared keeper drops that one only, not a newer one). */
  expired(backend: string, limit: BackendLimit, all: ReadonlyMap<string, BackendLimit>): void;
  /** Writes what waits and stops listening. */
  close?(): Promise<void>;
}

const FILE = "limits.json";
/** A reset further away than this is not believed (a misread date): the backoff applies instead. */
const MAX_AHEAD_MS = 8 * 24 * 3_600_000;
/** The NOTIFY channel of changes on a shared database. */
const CHANNEL = "clawbridge_limits";

/** A limit as read back from a file or a notice, or undefined when it is not one. */
function limitOf(v: unknown): BackendLimit | undefined {
  const l = v as BackendLimit | null | undefined;
  return l && typeof l.until === "number" && typeof l.message === "string" ? l : undefined;
}

/** `<dataDir>/limits.json`: the whole book, written atomically on each change. */
class LimitFile implements LimitKeeper {
  private readonly file: string;
  constructor(dataDir: string) {
    this.file = path.join(dataDir, FILE);
  }

  load(): Record<string, unknown> {
    try {
      return (JSON.parse(readFileSync(this.file, "utf8")) as Record<string, unknown>) ?? {};
    } catch {
      return {}; // none yet, or unreadable: nothing is exhausted
    }
  }

  private save(all: ReadonlyMap<string, BackendLimit>): void {
    try {
      writeFileAtomic(this.file, `${JSON.stringify(Object.fromEntries(all), null, 1)}\n`);
    } catch {
      /* the state stays in memory; the next change tries again */
    }
  }
  noted(_b: string, _l: BackendLimit, all: ReadonlyMap<string, BackendLimit>): void {
    this.save(all);
  }
  cleared(_b: string, all: ReadonlyMap<string, BackendLimit>): void {
    this.save(all);
  }
  expired(_b: string, _l: BackendLimit, all: ReadonlyMap<string, BackendLimit>): void {
    this.save(all);
  }
}

export class LimitBook {
  private readonly limits = new Map<string, BackendLimit>();
  private readonly keeper: LimitKeeper;

  /** A book kept in `<dataDir>/limits.json` (a directory), or by `keeper`. */
  constructor(
    where: string | LimitKeeper,
    private readonly now: () => number = Date.now,
  ) {
    if (typeof where === "string") {
      const file = new LimitFile(where);
      this.keeper = file;
      for (const [backend, l] of Object.entries(file.load())) this.learn(backend, limitOf(l));
    } else this.keeper = where;
  }

  /** What the keeper found (at start) or heard (another instance): noted in memory only. */
  learn(backend: string, limit: BackendLimit | undefined): void {
    if (limit && limit.until > this.now()) this.limits.set(backend, limit);
    else this.limits.delete(backend);
  }

  /** The backend's limit when it has not reset yet. */
  exhausted(backend: string): BackendLimit | undefined {
    const l = this.limits.get(backend);
    if (!l) return undefined;
    if (l.until > this.now()) return l;
    this.limits.delete(backend);
    this.keeper.expired(backend, l, this.limits);
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
    this.keeper.noted(backend, l, this.limits);
    return l;
  }

  /** The backend answered: whatever limit was noted is over. */
  clear(backend: string): void {
    if (this.limits.delete(backend)) this.keeper.cleared(backend, this.limits);
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

  /** Writes what waits (a shared book) and stops listening. */
  async close(): Promise<void> {
    await this.keeper.close?.();
  }
}

/** What a shared book needs of the PostgreSQL (src/core/db/postgres.ts); the pipeline never imports pg. */
type LimitDb = Pick<PostgresDb, "all" | "run" | "tx" | "listen">;

interface LimitRow {
  backend: string;
  until: number;
  reset_at: number | null;
  message: string;
  since: number;
}

/** A notice of a change: the backend, its limit (null: cleared), and which book made it. */
interface LimitNotice {
  from: string;
  backend: string;
  limit: BackendLimit | null;
}

/** The `backend_limits` table, with every change announced to the other instances' books. */
class SharedLimits implements LimitKeeper {
  /** This book's id in notices (two bridges of one process have one instance id, but two books). */
  private readonly id = randomUUID();
  private queue: Promise<void> = Promise.resolve();
  private unlisten: (() => void) | undefined;

  constructor(
    private readonly db: LimitDb,
    private readonly onError: (err: Error) => void,
  ) {}

  /** Listens (first, so that nothing is missed), then loads the table into `book`. */
  async attach(book: LimitBook): Promise<void> {
    this.unlisten = await this.db.listen(CHANNEL, (payload) => {
      let n: LimitNotice;
      try {
        n = JSON.parse(payload) as LimitNotice;
      } catch {
        return;
      }
      if (n.from === this.id || typeof n.backend !== "string") return;
      book.learn(n.backend, limitOf(n.limit));
    });
    const rows = await this.db.all<LimitRow>("SELECT backend, until, reset_at, message, since FROM backend_limits");
    for (const r of rows)
      book.learn(r.backend, {
        until: r.until,
        ...(r.reset_at !== null ? { resetAt: r.reset_at } : {}),
        message: r.message,
        since: r.since,
      });
  }

  /** `write` after every write queued before it; a failure is reported, the book goes on. */
  private enqueue(write: () => Promise<void>): void {
    this.queue = this.queue.then(write).catch((err: unknown) => this.onError(err as Error));
  }

  private announce(q: { run: LimitDb["run"] }, backend: string, limit: BackendLimit | null): Promise<unknown> {
    const notice: LimitNotice = { from: this.id, backend, limit };
    return q.run("SELECT pg_notify(?, ?)", [CHANNEL, JSON.stringify(notice)]);
  }

  noted(backend: string, limit: BackendLimit): void {
    this.enqueue(() =>
      this.db.tx(async (q) => {
        await q.run(
          `INSERT INTO backend_limits (backend, until, reset_at, message, since) VALUES (?, ?, ?, ?, ?)
           ON CONFLICT (backend) DO UPDATE SET until = excluded.until, reset_at = excluded.reset_at,
             message = excluded.message, since = excluded.since`,
          [backend, limit.until, limit.resetAt ?? null, limit.message, limit.since],
        );
        await this.announce(q, backend, limit);
      }),
    );
  }

  cleared(backend: string): void {
    this.enqueue(() =>
      this.db.tx(async (q) => {
        if ((await q.run("DELETE FROM backend_limits WHERE backend = ?", [backend])).changes)
          await this.announce(q, backend, null);
      }),
    );
  }

  /** Each instance expires a limit on its own clock: the row goes, no notice. */
  expired(backend: string, limit: BackendLimit): void {
    this.enqueue(async () => {
      await this.db.run("DELETE FROM backend_limits WHERE backend = ? AND until = ?", [backend, limit.until]);
    });
  }

  async close(): Promise<void> {
    this.unlisten?.();
    await this.queue;
  }
}

/**
 * The book of a bridge on its store backing: `<dataDir>/limits.json` alone, or shared by every
 * instance on the PostgreSQL (loaded now; `onError` hears a write that failed).
 */
export async function openLimitBook(
  backing: StoreBacking,
  opts: { now?: () => number; onError?: (err: Error) => void } = {},
): Promise<LimitBook> {
  if (backing.kind === "sqlite") return new LimitBook(backing.dataDir, opts.now);
  const shared = new SharedLimits(backing.db, opts.onError ?? (() => {}));
  const book = new LimitBook(shared, opts.now);
  await shared.attach(book);
  return book;
}
