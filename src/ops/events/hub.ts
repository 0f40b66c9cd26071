/**
 * The event hub: the bus as a stream for watchers (`GET /v1/events`, src/request/http/events-route.ts).
 *
 * - Every event published on the bus gets the next id (1, 2, 3… from the bridge's start), is
 *   redacted (src/ops/events/redact.ts) and serialised at most ONCE as an SSE frame (`id:`,
 *   `event: <type>`, `data: <json>`), whoever watches; the last `ringSize` events are kept for
 *   `Last-Event-ID` replay. An event whose fields are all plain values (`PLAIN_TYPES`: every
 *   `turn.*` event, the bus's busiest, three per turn) is kept as it is and serialised when a
 *   watcher first needs it — live or on replay — so a bridge nobody watches does not pay for
 *   redacting and serialising every turn (its values cannot change afterwards); any other event is
 *   serialised at once, since an array or object in it may still be changed by whoever published it.
 * - A subscriber sees the events its filter (src/ops/events/filter.ts) lets through. Step and
 *   output events of a run are matched by the conversation and system of its `run.started` (the
 *   hub remembers the last few thousand runs).
 * - Subscribing replays the ring after the given id and then goes live in the same synchronous
 *   step, so nothing is missed and nothing comes twice. When the given id is older than the ring
 *   (or from an earlier bridge: ids restart with it) an `event: gap` frame says so first.
 * - Publishing never waits for a subscriber: a frame is appended to each matching subscriber's
 *   queue and the queues are written once per tick (one write per subscriber). A subscriber whose
 *   connection stops draining keeps its queue; once that passes `maxQueued` events or
 *   MAX_QUEUED_BYTES it is dropped (a final `event: dropped` frame, then its connection closed):
 *   memory per watcher is bounded, and the pipeline never slows down for one.
 * - A comment line (`: heartbeat`) goes to every subscriber every `heartbeatMs`.
 * - `instance` (this bridge's id) is in every event's data, so a watcher of several instances can
 *   tell whose event it is.
 * - With a shared `log` (`store: { kind: postgres }`: src/ops/cluster-events) the hub numbers
 *   nothing itself: each bus event, redacted, goes to the log, and the log gives back every
 *   instance's events in id order (`ingest`), so every instance streams the same events under the
 *   same ids. A replay after an id the ring no longer holds (or not yet: this instance may lag the
 *   log by a moment) reads the log first; the live events meanwhile wait in the subscriber's queue.
 *   An event the log could not keep is streamed by its own instance without an id.
 * The hub knows nothing of PostgreSQL: the log is the small `EventLog` interface below.
 */
import type { BridgeEvent, BridgeEventType, EventOf } from "../../wire/events.js";
import type { EventBus } from "./bus.js";
import { type EventFilter, type Filterable, matches } from "./filter.js";
import { eventData } from "./redact.js";

/** Bytes of frames a subscriber that is not draining may have waiting before it is dropped. */
export const MAX_QUEUED_BYTES = 4 * 1024 * 1024;
/** Runs whose conversation and system the hub remembers (for filtering their step events). */
const RUNS_REMEMBERED = 4096;
/** How long a dropped or closed subscriber's last frame may take to flush before its connection is destroyed. */
export const END_GRACE_MS = 1000;

export interface HubOptions {
  ringSize: number;
  includeText: boolean;
  /** Events a subscriber that is not draining may have waiting. */
  maxQueued: number;
  /** Bytes likewise (default MAX_QUEUED_BYTES). */
  maxQueuedBytes?: number;
  /** A heartbeat comment every this many ms (0: none). */
  heartbeatMs: number;
  /** Longest wait before queued frames are written (default FLUSH_MS). */
  flushMs?: number;
  /** This bridge's id, as `instance` in every event's data (none when not given). */
  instance?: string;
  /** The log every instance's events are numbered in (none: the hub numbers this bridge's own). */
  log?: EventLog;
}

/** An event as a log keeps it: what a filter looks at, its time, and its `data:` (redacted as the hub would). */
export interface LogEntry extends Filterable {
  /** The log's id; none when the log could not keep it (streamed without an id, never replayed). */
  id?: number;
  at: number;
  data: string;
}

/** Events of the log with ids in a range, and the ids the log holds now. */
export interface LogPage {
  events: LogEntry[];
  /** The oldest and newest id in the log (undefined when it is empty). */
  oldest?: number;
  newest?: number;
}

/**
 * A log shared by several instances (src/ops/cluster-events). `append` takes this bridge's events
 * in publishing order; the log numbers them and gives every instance's events back to `ingest` in
 * id order (or an event it could not keep, without an id).
 */
export interface EventLog {
  append(entry: LogEntry): void;
  /** Events with ids in (after, upTo], oldest first, at most `limit`. */
  read(after: number, upTo: number, limit: number): Promise<LogPage>;
}

/** A watcher's connection, as the hub writes to it. */
export interface EventSink {
  /** Write frames; false when the connection is not draining (then nothing is written until `onDrain`). */
  write(chunk: string): boolean;
  /** Call `fn` once when the connection has drained. */
  onDrain(fn: () => void): void;
  /** End the stream; `last` is its final frame (lost when the connection does not drain). */
  end(last?: string): void;
}

export interface Subscription {
  readonly id: number;
  /** Stop (the watcher went away). Nothing more is written. */
  close(): void;
}

export interface HubStats {
  /** Id of the last event (0: none yet). */
  lastId: number;
  /** Events in the ring. */
  ring: number;
  subscribers: number;
  /** Frames and bytes waiting in subscribers' queues now. */
  queued: number;
  queuedBytes: number;
  /** Subscribers dropped for not draining, since the start. */
  dropped: number;
}

interface Entry extends Filterable {
  id: number;
  /** The SSE frame; made on first use when the event has only plain values (`ev` kept until then). */
  frame?: string;
  ev?: BridgeEvent;
}

class Subscriber {
  queue: string[] = [];
  bytes = 0;
  /** The last write returned false: waiting for the connection to drain. */
  blocked = false;
  closed = false;
  /** Reading its replay from the log: live frames wait in the queue. */
  holding = false;
  /** Events up to this id are not sent live (they come with the replay). */
  after = 0;
  constructor(
    readonly id: number,
    readonly sink: EventSink,
    readonly filter: EventFilter,
  ) {}
}

/**
 * The event types whose every field is a string, number or boolean (nothing that can change after
 * publishing): their frames are made on first use. Checked by the compiler below: a field of
 * another kind added to one of these types fails to compile until the type leaves the list.
 */
const PLAIN_TYPES = [
  "turn.started",
  "turn.firstByte",
  "turn.completed",
  "turn.failed",
  "turn.aborted",
  "queue.rejected",
  "session.healed",
  "session.reset",
  "toolcalls.extracted",
  "state",
  "confirm",
  "backend.health",
] as const satisfies readonly BridgeEventType[];
type AllPlain<E> = E extends unknown
  ? Exclude<E[keyof E], string | number | boolean | undefined> extends never
    ? true
    : false
  : never;
const _plainChecked: false extends AllPlain<EventOf<(typeof PLAIN_TYPES)[number]>> ? never : true = true;
void _plainChecked;
const PLAIN = new Set<string>(PLAIN_TYPES);

export const frameOf = (event: string, data: unknown, id?: number): string =>
  `${id !== undefined ? `id: ${id}\n` : ""}event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
const HEARTBEAT = ": heartbeat\n\n";
const HEAD = "retry: 3000\n: clawbridge events\n\n";
/** Events read from the log per query of a replay. */
const REPLAY_PAGE = 1000;
/** Longest wait before queued frames are written (a batch per watcher). */
const FLUSH_MS = 25;

export class EventHub {
  private readonly ring: Array<Entry | undefined>;
  /** Where the next entry goes in the ring, and how many it holds. */
  private head = 0;
  private size = 0;
  private lastId = 0;
  private readonly subs = new Set<Subscriber>();
  private nextSub = 1;
  private flushScheduled = false;
  private heartbeat?: NodeJS.Timeout;
  private readonly runs = new Map<string, { conversation?: string; system?: string }>();
  private readonly maxQueuedBytes: number;
  private droppedCount = 0;
  private closed = false;
  private readonly unsubscribe: () => void;

  constructor(
    bus: EventBus,
    private readonly opts: HubOptions,
  ) {
    this.ring = new Array<Entry | undefined>(Math.max(1, opts.ringSize));
    this.maxQueuedBytes = opts.maxQueuedBytes ?? MAX_QUEUED_BYTES;
    this.unsubscribe = bus.on((ev) => this.publish(ev));
  }

  /** The entry's SSE frame, serialised (once) when first asked for. */
  private frame(entry: Entry): string {
    if (entry.frame === undefined) {
      const ev = entry.ev!;
      const data = eventData(ev, this.opts.includeText, this.opts.instance);
      entry.frame = `id: ${entry.id}\nevent: ${entry.type}\ndata: ${data}\n\n`;
      entry.ev = undefined;
    }
    return entry.frame;
  }

  /** A bus event: numbered, kept in the ring (serialised now or on first use), queued for its subscribers; or given to the log. */
  private publish(ev: BridgeEvent): void {
    if (this.closed) return;
    const entry: Entry = { id: 0, type: ev.type, ev };
    const e = ev as { conversation?: unknown; runId?: unknown; system?: unknown };
    if (typeof e.conversation === "string") entry.conversation = e.conversation;
    if (typeof e.system === "string") entry.system = e.system;
    if (typeof e.runId === "string") {
      entry.runId = e.runId;
      let run = this.runs.get(e.runId);
      if (ev.type === "run.started") {
        run = { conversation: ev.conversation, system: ev.system };
        this.runs.delete(e.runId);
        this.runs.set(e.runId, run);
        if (this.runs.size > RUNS_REMEMBERED) this.runs.delete(this.runs.keys().next().value!);
      } else if (run && entry.system && !run.system) run.system = entry.system;
      entry.conversation ??= run?.conversation;
      entry.system ??= run?.system;
    }
    const log = this.opts.log;
    if (log) {
      const { type, conversation, runId, system } = entry;
      log.append({
        type,
        conversation,
        runId,
        system,
        at: ev.at,
        data: eventData(ev, this.opts.includeText, this.opts.instance),
      });
      return;
    }
    entry.id = ++this.lastId;
    if (!PLAIN.has(ev.type)) this.frame(entry);
    this.keep(entry);
  }

  /**
   * An event of the log, in id order (src/ops/cluster-events): kept in the ring and streamed under
   * the log's id; one without an id (the log could not keep it) is streamed as it is, not kept.
   */
  ingest(logged: LogEntry): void {
    if (this.closed) return;
    const { id, type, conversation, runId, system, data } = logged;
    if (id === undefined) {
      const frame = `event: ${type}\ndata: ${data}\n\n`;
      for (const sub of this.subs) if (matches(sub.filter, logged)) this.enqueue(sub, frame);
      return;
    }
    if (id <= this.lastId) return;
    this.lastId = id;
    this.keep({ id, type, conversation, runId, system, frame: `id: ${id}\nevent: ${type}\ndata: ${data}\n\n` });
  }

  private keep(entry: Entry): void {
    this.ring[this.head] = entry;
    this.head = (this.head + 1) % this.ring.length;
    if (this.size < this.ring.length) this.size++;
    for (const sub of this.subs)
      if (entry.id > sub.after && matches(sub.filter, entry)) this.enqueue(sub, this.frame(entry));
  }

  private enqueue(sub: Subscriber, frame: string): void {
    sub.queue.push(frame);
    sub.bytes += frame.length;
    const over = sub.queue.length > this.opts.maxQueued || sub.bytes > this.maxQueuedBytes;
    if (sub.blocked || sub.holding) {
      if (over) this.drop(sub);
      return;
    }
    // Draining: a burst larger than the bound is written now rather than held.
    if (over) this.flush(sub);
    else this.scheduleFlush();
  }

  /**
   * Frames leave in one write per subscriber every FLUSH_MS at most: watchers see events within
   * a few tens of milliseconds, and a busy bridge pays one socket write per watcher per batch, not
   * one per event (measured: per-tick writes added ~50 % CPU to a one-at-a-time non-streamed turn
   * with 10 watchers; bench/results/*-events.md).
   */
  private scheduleFlush(): void {
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    const timer = setTimeout(() => {
      this.flushScheduled = false;
      for (const sub of this.subs) this.flush(sub);
    }, this.opts.flushMs ?? FLUSH_MS);
    timer.unref?.();
  }

  /** Write what `sub` has waiting, in one write; stop at a connection that does not drain. */
  private flush(sub: Subscriber): void {
    if (sub.blocked || sub.holding || sub.closed || !sub.queue.length) return;
    const chunk = sub.queue.length === 1 ? sub.queue[0]! : sub.queue.join("");
    sub.queue = [];
    sub.bytes = 0;
    this.write(sub, chunk);
  }

  private write(sub: Subscriber, chunk: string): void {
    let ok: boolean;
    try {
      ok = sub.sink.write(chunk);
    } catch {
      this.remove(sub);
      return;
    }
    if (ok || sub.closed) return;
    sub.blocked = true;
    sub.sink.onDrain(() => {
      sub.blocked = false;
      this.flush(sub);
    });
  }

  private drop(sub: Subscriber): void {
    this.droppedCount++;
    const queued = sub.queue.length;
    this.remove(sub);
    sub.sink.end(
      frameOf("dropped", {
        reason: `the connection did not keep up: ${queued} events waiting (events.maxQueued ${this.opts.maxQueued})`,
        lastId: this.lastId,
      }),
    );
  }

  private remove(sub: Subscriber): void {
    sub.closed = true;
    sub.queue = [];
    sub.bytes = 0;
    this.subs.delete(sub);
    if (!this.subs.size && this.heartbeat) {
      clearInterval(this.heartbeat);
      this.heartbeat = undefined;
    }
  }

  /**
   * Start watching: the ring after `lastEventId` is written at once (when given), then every new
   * event that passes `filter`. With a log, a `lastEventId` outside the ring is replayed from the
   * log first. Throws when the hub is closed.
   */
  subscribe(sink: EventSink, filter: EventFilter = {}, lastEventId?: number): Subscription {
    if (this.closed) throw new Error("the event hub is closed");
    const sub = new Subscriber(this.nextSub++, sink, filter);
    let head = HEAD;
    const log = this.opts.log;
    const oldest = this.oldestId() ?? this.lastId + 1;
    const outside = lastEventId !== undefined && (lastEventId > this.lastId || lastEventId < oldest - 1);
    if (log && outside) {
      sub.holding = true;
      sub.after = Math.max(this.lastId, lastEventId);
      void this.replayFromLog(sub, log, lastEventId, this.lastId);
    } else if (lastEventId !== undefined) {
      // From an earlier bridge (ids restart with it), or older than the ring: some events are gone.
      if (outside) head += frameOf("gap", { lastEventId, oldest: this.size ? oldest : null, lastId: this.lastId });
      head += this.ringAfter(filter, lastEventId > this.lastId ? 0 : lastEventId);
    }
    this.subs.add(sub);
    if (this.opts.heartbeatMs > 0 && !this.heartbeat) {
      this.heartbeat = setInterval(() => this.beat(), this.opts.heartbeatMs);
      this.heartbeat.unref();
    }
    // The replay leaves in one write, before anything newer (publishing is synchronous, so nothing
    // can come between the ring read above and this).
    if (!sub.holding) this.write(sub, head);
    return { id: sub.id, close: () => this.remove(sub) };
  }

  /** The ring's `i`-th entry, 0 the oldest (i < size). */
  private nth(i: number): Entry {
    return this.ring[(this.head - this.size + i + this.ring.length) % this.ring.length]!;
  }

  private oldestId(): number | undefined {
    return this.size ? this.nth(0).id : undefined;
  }

  /** The frames of the ring's events after `after` that pass `filter`, oldest first. */
  private ringAfter(filter: EventFilter, after: number): string {
    // Ids increase along the ring (a log's may skip some): the first one after `after` by bisection.
    let lo = 0;
    let hi = this.size;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.nth(mid).id > after) hi = mid;
      else lo = mid + 1;
    }
    const parts: string[] = [];
    for (let i = lo; i < this.size; i++) {
      const entry = this.nth(i);
      if (matches(filter, entry)) parts.push(this.frame(entry));
    }
    return parts.join("");
  }

  /**
   * The replay of a subscriber whose `lastEventId` is outside the ring, read from the log: the
   * events in (lastEventId, upTo] (`upTo`: the hub's last id when it subscribed; newer ones wait in
   * its queue), with `gap` first when the log no longer holds some. An id the log never gave (from
   * another database), or a log that cannot be read, gets `gap` and the ring.
   */
  private async replayFromLog(sub: Subscriber, log: EventLog, lastEventId: number, upTo: number): Promise<void> {
    const parts: string[] = [HEAD];
    let failed: string | undefined;
    try {
      let after = lastEventId;
      let bounds: Pick<LogPage, "oldest" | "newest"> | undefined;
      // Every page moves `after` on, up to `upTo`: a bounded loop.
      for (;;) {
        const page = await log.read(after, upTo, REPLAY_PAGE);
        bounds ??= page;
        for (const e of page.events)
          if (matches(sub.filter, e)) parts.push(`id: ${e.id}\nevent: ${e.type}\ndata: ${e.data}\n\n`);
        if (page.events.length < REPLAY_PAGE) break;
        after = page.events[page.events.length - 1]!.id!;
      }
      if (bounds.newest === undefined || lastEventId > bounds.newest) failed = "an id the event log never gave";
      else if (bounds.oldest !== undefined && lastEventId < bounds.oldest - 1)
        parts.splice(1, 0, frameOf("gap", { lastEventId, oldest: bounds.oldest, lastId: upTo }));
    } catch (err) {
      failed = `the event log could not be read (${(err as Error).message})`;
    }
    if (sub.closed) return;
    if (failed !== undefined) {
      // What the ring holds, and everything newer live (nothing of it is in the queue twice).
      const from = lastEventId < this.lastId ? lastEventId : 0;
      parts.length = 1;
      parts.push(
        frameOf("gap", { lastEventId, oldest: this.oldestId() ?? null, lastId: this.lastId, reason: failed }),
        this.ringAfter(sub.filter, from),
      );
      sub.queue = [];
      sub.bytes = 0;
      sub.after = this.lastId;
    }
    sub.holding = false;
    this.write(sub, parts.join(""));
    this.flush(sub);
  }

  private beat(): void {
    for (const sub of this.subs) {
      // A connection that is not draining gets nothing more; its queue says whether it is dropped.
      if (!sub.blocked && !sub.queue.length) this.write(sub, HEARTBEAT);
    }
  }

  stats(): HubStats {
    let queued = 0;
    let queuedBytes = 0;
    for (const s of this.subs) {
      queued += s.queue.length;
      queuedBytes += s.bytes;
    }
    return {
      lastId: this.lastId,
      ring: this.size,
      subscribers: this.subs.size,
      queued,
      queuedBytes,
      dropped: this.droppedCount,
    };
  }

  /** On shutdown: what is queued is written, every stream ends with `event: shutdown`, and nothing more is published. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.unsubscribe();
    for (const sub of [...this.subs]) {
      this.flush(sub);
      this.remove(sub);
      sub.sink.end(frameOf("shutdown", { reason: "the bridge is shutting down" }));
    }
  }
}
