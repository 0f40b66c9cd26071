/**
 * The event log of a cluster (`store: { kind: postgres }`): every instance's events under ONE
 * sequence of ids, so `GET /v1/events` and the dashboard on any instance show every instance's
 * events, and `Last-Event-ID` replays the same ids everywhere (docs/EVENTS.md). The hub
 * (src/ops/events/hub.ts) knows only its `EventLog` interface; this room joins it to PostgreSQL.
 *
 * - Writing: the hub gives each of this instance's bus events, redacted as a watcher sees it, to
 *   `append` (synchronously, from the bus; the bus's other listeners — metrics, usage — are not
 *   touched and keep seeing their events at once). One append at a time, of everything waiting
 *   (`events_log_append`, src/core/db/pg-migrations.ts, migration 2: under a table lock, so ids
 *   commit in order, then `NOTIFY clawbridge_events`). When the database does not
 *   answer, the events are streamed on this instance without an id (not replayable) and the
 *   failure is logged once, until an append passes again; turns never wait for it.
 * - Reading: every instance, this one too, LISTENs. A notification carries the batch's rows and
 *   the newest id before them (`after`): when this instance has read up to `after`, the rows go
 *   straight into the hub (`ingest`); otherwise (it missed one, or the batch was too big for a
 *   notification) it reads the rows after the last it has, in id order. Ids commit in order, so a
 *   row newer than the last read means every one before it is there too. A notification lost
 *   while the listening connection is made again is caught up every POLL_MS.
 * - At start the hub gets the last `ringSize` rows (its ring, and the ids it goes on from).
 * - Retention: the newest KEEP_RINGS × `events.ringSize` ids (10 000 with the default ringSize of
 *   1000); older rows are deleted every PRUNE_MS by whichever instance gets there.
 */
import type { Logger } from "pino";
import type { PostgresDb } from "../../core/db/postgres.js";
import type { EventHub, EventLog, LogEntry, LogPage } from "../events/hub.js";

/** The NOTIFY channel (events_log_append's). */
const CHANNEL = "clawbridge_events";
/** Events per append (one statement). */
const BATCH = 500;
/** Events waiting for the database past which new ones are streamed here only (an outage). */
const MAX_PENDING = 10_000;
/** Rows read per query. */
const PAGE = 1000;
/** Rows kept: this many rings' worth. */
export const KEEP_RINGS = 10;
const POLL_MS = 5000;
const PRUNE_MS = 60_000;

interface Row {
  id: number;
  at: number;
  type: string;
  conversation: string | null;
  run_id: string | null;
  system: string | null;
  body: string;
}

const COLUMNS = "id, at, type, conversation, run_id, system, body";

/** What events_log_append notifies: the newest id before the batch, its last, and its rows when they fit. */
interface Notified {
  after: number;
  last: number;
  rows?: Array<[number, number, string, string | null, string | null, string | null, string]>;
}

const entryOf = (r: Row): LogEntry => ({
  id: r.id,
  at: r.at,
  type: r.type,
  conversation: r.conversation ?? undefined,
  runId: r.run_id ?? undefined,
  system: r.system ?? undefined,
  data: r.body,
});

export interface ClusterEventLogOptions {
  /** `events.ringSize`: the rows the hub gets at start; the log keeps KEEP_RINGS times as many. */
  ringSize: number;
  logger: Logger;
}

export class ClusterEventLog implements EventLog {
  private hub: EventHub | undefined;
  /** The last id given to the hub. */
  private cursor = 0;
  private pending: LogEntry[] = [];
  private writing: Promise<void> | undefined;
  private reading: Promise<void> | undefined;
  private readAgain = false;
  /** Appends are failing (logged once until one passes). */
  private failing = false;
  private unlisten: (() => void) | undefined;
  private poll: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(
    private readonly db: PostgresDb,
    private readonly opts: ClusterEventLogOptions,
  ) {}

  /** Fills the hub with the last rows, listens, and reads what came meanwhile. A database that does not answer is logged (caught up later). */
  async start(hub: EventHub): Promise<void> {
    this.hub = hub;
    try {
      const last = await this.db.all<Row>(`SELECT ${COLUMNS} FROM events_log ORDER BY id DESC LIMIT ?`, [
        this.opts.ringSize,
      ]);
      for (const r of last.reverse()) this.give(entryOf(r));
      this.unlisten = await this.db.listen(CHANNEL, (payload) => this.notified(payload));
    } catch (err) {
      this.opts.logger.warn(
        { err: (err as Error).message },
        "the event log could not be read; other instances' events are streamed here once it can",
      );
    }
    this.catchUp();
    let ticks = 0;
    this.poll = setInterval(() => {
      this.catchUp();
      if (++ticks % Math.round(PRUNE_MS / POLL_MS) === 0) void this.prune().catch(() => {});
    }, POLL_MS);
    this.poll.unref();
  }

  /** A NOTIFY of events_log_append: `{after, last, rows?}`. */
  private notified(payload: string): void {
    let n: Notified;
    try {
      n = JSON.parse(payload) as Notified;
    } catch {
      this.catchUp();
      return;
    }
    if (n.last <= this.cursor) return;
    if (!n.rows || n.after > this.cursor) {
      this.catchUp();
      return;
    }
    for (const [id, at, type, conversation, run_id, system, body] of n.rows)
      this.give(entryOf({ id, at, type, conversation, run_id, system, body }));
  }

  /** Into the hub, once, in id order (a read and a notification may both bring a row). */
  private give(entry: LogEntry): void {
    if (entry.id! <= this.cursor) return;
    this.cursor = entry.id!;
    this.hub?.ingest(entry);
  }

  /** Reads the rows after the cursor into the hub; one read at a time (a call meanwhile reads again after it). */
  private catchUp(): void {
    if (this.closed || !this.hub) return;
    if (this.reading) {
      this.readAgain = true;
      return;
    }
    this.reading = (async () => {
      do {
        this.readAgain = false;
        // Every page moves the cursor on: a bounded loop.
        for (;;) {
          const rows = await this.db.all<Row>(`SELECT ${COLUMNS} FROM events_log WHERE id > ? ORDER BY id LIMIT ?`, [
            this.cursor,
            PAGE,
          ]);
          for (const r of rows) this.give(entryOf(r));
          if (rows.length < PAGE) break;
        }
      } while (this.readAgain && !this.closed);
    })()
      .catch(() => {
        /* the database does not answer: the next notification or poll reads again */
      })
      .finally(() => {
        this.reading = undefined;
      });
  }

  append(entry: LogEntry): void {
    if (this.pending.length >= MAX_PENDING) {
      this.unlogged([entry], new Error(`${MAX_PENDING} events are waiting for the database`));
      return;
    }
    this.pending.push(entry);
    this.writing ??= this.write();
  }

  /** Appends what is waiting, in publishing order, one statement at a time. */
  private async write(): Promise<void> {
    // The events published in this turn of the event loop go in one statement.
    await new Promise((r) => setImmediate(r));
    while (this.pending.length) {
      const batch = this.pending.splice(0, BATCH);
      try {
        await this.db.run("SELECT events_log_append(?, ?::bigint[], ?, ?, ?, ?, ?)", [
          this.db.instanceId,
          batch.map((e) => e.at),
          batch.map((e) => e.type),
          batch.map((e) => e.conversation ?? null),
          batch.map((e) => e.runId ?? null),
          batch.map((e) => e.system ?? null),
          batch.map((e) => e.data),
        ]);
        if (this.failing) {
          this.failing = false;
          this.opts.logger.info("events are written to the event log again");
        }
      } catch (err) {
        this.unlogged(batch, err as Error);
        // Closing: the rest is not tried (the hub is closed, no watcher would see them anyway).
        if (this.closed) this.pending = [];
      }
    }
    this.writing = undefined;
  }

  /** Events the log could not keep: streamed here without an id; the first failure of a run of them logged. */
  private unlogged(entries: LogEntry[], err: Error): void {
    if (!this.failing) {
      this.failing = true;
      this.opts.logger.warn(
        { err: err.message },
        "events not written to the event log: streamed on this instance only, without an id, until the database answers",
      );
    }
    for (const e of entries) this.hub?.ingest(e);
  }

  /** Events with ids in (after, upTo], oldest first, at most `limit`; and the ids the log holds. */
  async read(after: number, upTo: number, limit: number): Promise<LogPage> {
    const [rows, bounds] = await Promise.all([
      this.db.all<Row>(`SELECT ${COLUMNS} FROM events_log WHERE id > ? AND id <= ? ORDER BY id LIMIT ?`, [
        after,
        upTo,
        limit,
      ]),
      this.db.get<{ oldest: number | null; newest: number | null }>(
        "SELECT min(id) AS oldest, max(id) AS newest FROM events_log",
      ),
    ]);
    return { events: rows.map(entryOf), oldest: bounds?.oldest ?? undefined, newest: bounds?.newest ?? undefined };
  }

  /** Deletes the rows older than the newest KEEP_RINGS × ringSize ids. */
  async prune(): Promise<number> {
    const below = this.cursor - KEEP_RINGS * this.opts.ringSize;
    if (below <= 0) return 0;
    return (await this.db.run("DELETE FROM events_log WHERE id <= ?", [below])).changes;
  }

  /** Stops reading; what is waiting is appended first, unless an append fails (the hub is closed before this: nothing new comes). */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.poll);
    this.unlisten?.();
    await this.writing;
    await this.reading;
  }
}
