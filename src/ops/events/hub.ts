/**
 * The event hub: the bus as a stream for watchers (`GET /v1/events`, src/request/http/events-route.ts).
 *
 * - Every event published on the bus gets the next id (1, 2, 3… from the bridge's start), is
 *   redacted (below) and serialised at most ONCE as an SSE frame (`id:`, `event: <type>`,
 *   `data: <json>`), whoever watches; the last `ringSize` events are kept for `Last-Event-ID`
 *   replay. An event whose fields are all plain values (`PLAIN_TYPES`: every `turn.*` event, the
 *   bus's busiest, three per turn) is kept as it is and serialised when a watcher first needs
 *   it — live or on replay — so a bridge nobody watches does not pay for redacting and
 *   serialising every turn (its values cannot change afterwards); any other event is serialised
 *   at once, since an array or object in it may still be changed by whoever published it.
 * - A subscriber sees the events its filter lets through: `conversation`, `run`, `system` (each a
 *   comma-separated list of values) and `types` (exact types, or prefixes written `run.*`,
 *   `turn.*`, `node:*`); filters are ANDed, an event without the field filtered on is not shown.
 *   Step and output events of a run are matched by the conversation and system of its
 *   `run.started` (the hub remembers the last few thousand runs).
 * - Subscribing replays the ring after the given id and then goes live in the same synchronous
 *   step, so nothing is missed and nothing comes twice. When the given id is older than the ring
 *   (or from an earlier bridge: ids restart with it) an `event: gap` frame says so first.
 * - Publishing never waits for a subscriber: a frame is appended to each matching subscriber's
 *   queue and the queues are written once per tick (one write per subscriber). A subscriber whose
 *   connection stops draining keeps its queue; once that passes `maxQueued` events or
 *   MAX_QUEUED_BYTES it is dropped (a final `event: dropped` frame, then its connection closed):
 *   memory per watcher is bounded, and the pipeline never slows down for one.
 * - A comment line (`: heartbeat`) goes to every subscriber every `heartbeatMs`.
 *
 * Redaction (unless `includeText`): what a watcher sees is WHO and WHAT, never the words.
 * 1. Kept: `type`, `at`, every number and boolean, and the identifying fields (KEEP: ids, names,
 *    statuses and codes — `turnId`, `runId`, `buildId`, `conversation`, `model`, `backend`,
 *    `system`, `step`, `tools`, `collected`, `missing`, `action`, `status`, `code`,
 *    `finishReason`…), plus `turn.aborted.reason` and `backend.health.detail` (the bridge's own
 *    words).
 * 2. A canvas node keeps `id`, `type`, `label`, `position` and `parent`; its `properties` keep
 *    their names and their number and boolean values, every other value (`prompt`, `system`,
 *    `headers`, `setEnv`, `url`, `command`…) is replaced. An edge keeps `id`, `from`, `to`.
 * 3. Everything else — prompts, answer and output text (`run.output.text`), step outputs, error
 *   messages and reasons that may quote a prompt (`message`, `error`, `reason`) — is replaced by
 *   `"[redacted: N chars]"` (N: the text's length, or its JSON's for a structured value).
 * With `includeText: true` events are streamed as published, except that a string longer than
 * MAX_TEXT_CHARS is cut (`…[+N chars]`) so the ring stays bounded.
 */
import type { BridgeEvent, BridgeEventType, EventBus, EventOf } from "./bus.js";

/** Every event type, for checking `?types=` (the `satisfies` keeps it in step with the bus). */
export const EVENT_TYPES = [
  "decision",
  "gathering",
  "confirm",
  "state",
  "run.started",
  "run.output",
  "step.started",
  "step.retry",
  "step.completed",
  "step.failed",
  "step.skipped",
  "run.completed",
  "run.failed",
  "run.paused",
  "run.cancelled",
  "run.interrupted",
  "turn.started",
  "turn.firstByte",
  "turn.completed",
  "turn.failed",
  "turn.aborted",
  "queue.rejected",
  "session.healed",
  "session.reset",
  "intent.executed",
  "toolcalls.extracted",
  "backend.health",
  "execution:stepStart",
  "execution:stepRetry",
  "execution:stepComplete",
  "execution:planComplete",
  "node:created",
  "node:updated",
  "node:deleted",
  "edge:created",
  "edge:deleted",
] as const satisfies readonly BridgeEventType[];
// Every bus type is listed (a type added to the bus and not here fails to compile).
const _allListed: (typeof EVENT_TYPES)[number] = undefined as unknown as BridgeEventType;
void _allListed;

/** Bytes of frames a subscriber that is not draining may have waiting before it is dropped. */
export const MAX_QUEUED_BYTES = 4 * 1024 * 1024;
/** With `includeText`, longer strings are cut (the ring holds at most ringSize events). */
export const MAX_TEXT_CHARS = 32 * 1024;
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
}

/** What a subscriber wants to see. Each set, when present, must contain the event's value. */
export interface EventFilter {
  conversations?: ReadonlySet<string>;
  runs?: ReadonlySet<string>;
  systems?: ReadonlySet<string>;
  types?: { exact: ReadonlySet<string>; prefixes: readonly string[] };
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

/** A bad `?conversation=&run=&system=&types=` value. */
export class FilterError extends Error {
  constructor(
    readonly param: string,
    message: string,
  ) {
    super(message);
    this.name = "FilterError";
  }
}

interface Entry {
  id: number;
  type: string;
  /** The SSE frame; made on first use when the event has only plain values (`ev` kept until then). */
  frame?: string;
  ev?: BridgeEvent;
  conversation?: string;
  runId?: string;
  system?: string;
}

class Subscriber {
  queue: string[] = [];
  bytes = 0;
  /** The last write returned false: waiting for the connection to drain. */
  blocked = false;
  closed = false;
  constructor(
    readonly id: number,
    readonly sink: EventSink,
    readonly filter: EventFilter,
  ) {}
}

/** Parse the query of `GET /v1/events`; throws `FilterError`. */
export function parseFilter(query: Record<string, unknown>): EventFilter {
  const list = (param: string): string[] | undefined => {
    const raw = query[param];
    if (raw === undefined) return undefined;
    const values = (Array.isArray(raw) ? raw : [raw])
      .flatMap((v) => String(v).split(","))
      .map((v) => v.trim())
      .filter(Boolean);
    if (!values.length) throw new FilterError(param, `?${param}= needs a value (a comma-separated list).`);
    return values;
  };
  const filter: EventFilter = {};
  const conversations = list("conversation");
  if (conversations) filter.conversations = new Set(conversations);
  const runs = list("run");
  if (runs) filter.runs = new Set(runs);
  const systems = list("system");
  if (systems) filter.systems = new Set(systems);
  const types = list("types");
  if (types) {
    const exact = new Set<string>();
    const prefixes: string[] = [];
    const known: readonly string[] = EVENT_TYPES;
    for (const t of types) {
      if (t === "*") prefixes.push("");
      else if (t.endsWith("*")) {
        const prefix = t.slice(0, -1);
        if (!known.some((k) => k.startsWith(prefix)))
          throw new FilterError("types", `No event type starts with "${prefix}" (known: ${EVENT_TYPES.join(", ")}).`);
        prefixes.push(prefix);
      } else if (known.includes(t)) exact.add(t);
      else
        throw new FilterError(
          "types",
          `Unknown event type "${t}" (known: ${EVENT_TYPES.join(", ")}; a prefix is written like run.*).`,
        );
    }
    filter.types = { exact, prefixes };
  }
  return filter;
}

function matches(f: EventFilter, e: Entry): boolean {
  if (f.types && !f.types.exact.has(e.type) && !f.types.prefixes.some((p) => e.type.startsWith(p))) return false;
  if (f.conversations && (e.conversation === undefined || !f.conversations.has(e.conversation))) return false;
  if (f.runs && (e.runId === undefined || !f.runs.has(e.runId))) return false;
  if (f.systems && (e.system === undefined || !f.systems.has(e.system))) return false;
  return true;
}

// --- redaction ---

/** Fields kept as they are (ids, names, statuses, codes). */
const KEEP = new Set([
  "type",
  "at",
  "turnId",
  "runId",
  "buildId",
  "conversation",
  "model",
  "backend",
  "answeredBy",
  "mode",
  "system",
  "step",
  "failedStep",
  "name",
  "key",
  "nodeId",
  "edgeId",
  "inputsHash",
  "action",
  "source",
  "state",
  "status",
  "code",
  "finishReason",
  "scope",
  "tools",
  "collected",
  "missing",
]);
/** Fields kept for one event type only: the bridge's own words. */
const KEEP_FOR: Partial<Record<BridgeEventType, ReadonlySet<string>>> = {
  "turn.aborted": new Set(["reason"]),
  "backend.health": new Set(["detail"]),
};
const NODE_KEEP = new Set(["id", "type", "label", "position", "parent"]);
const EDGE_KEEP = new Set(["id", "from", "to"]);

/** A value replaced: numbers, booleans and null stay, text and structures say how long they were. */
function replaced(v: unknown): unknown {
  if (v === null || v === undefined || typeof v === "number" || typeof v === "boolean") return v;
  if (typeof v === "string") return `[redacted: ${v.length} chars]`;
  let n = 0;
  try {
    n = JSON.stringify(v)?.length ?? 0;
  } catch {
    /* a cycle: its length is unknown */
  }
  return `[redacted: ${n} chars]`;
}

function keepOnly(obj: unknown, keep: ReadonlySet<string>, inner?: (key: string, v: unknown) => unknown): unknown {
  if (!obj || typeof obj !== "object" || Array.isArray(obj)) return replaced(obj);
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(obj)) out[k] = keep.has(k) ? v : inner ? inner(k, v) : replaced(v);
  return out;
}

/** A node's properties: their names, numbers and booleans; every other value replaced. */
function properties(_k: string, v: unknown): unknown {
  if (_k !== "properties") return replaced(v);
  if (!v || typeof v !== "object" || Array.isArray(v)) return replaced(v);
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v)) out[k] = replaced(x);
  return out;
}

/** The event as a watcher may see it without `includeText` (the rule at the top of this file). */
export function redact(ev: BridgeEvent): Record<string, unknown> {
  const extra = KEEP_FOR[ev.type];
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(ev)) {
    if (KEEP.has(k) || extra?.has(k)) out[k] = v;
    else if (k === "node") out[k] = keepOnly(v, NODE_KEEP, properties);
    else if (k === "edge") out[k] = keepOnly(v, EDGE_KEEP);
    else out[k] = replaced(v);
  }
  return out;
}

const clipLong = (_k: string, v: unknown) =>
  typeof v === "string" && v.length > MAX_TEXT_CHARS
    ? `${v.slice(0, MAX_TEXT_CHARS)}…[+${v.length - MAX_TEXT_CHARS} chars]`
    : v;

/** `data:` of a frame: one line (JSON escapes every newline). */
function json(v: unknown, clip: boolean): string {
  try {
    return JSON.stringify(v, clip ? clipLong : undefined);
  } catch {
    return JSON.stringify({ type: (v as { type?: unknown }).type, error: "[unserialisable event]" });
  }
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
      const data = json(this.opts.includeText ? ev : redact(ev), this.opts.includeText);
      entry.frame = `id: ${entry.id}\nevent: ${entry.type}\ndata: ${data}\n\n`;
      entry.ev = undefined;
    }
    return entry.frame;
  }

  /** A bus event: numbered, kept in the ring (serialised now or on first use), queued for its subscribers. */
  private publish(ev: BridgeEvent): void {
    if (this.closed) return;
    const id = ++this.lastId;
    const entry: Entry = { id, type: ev.type, ev };
    if (!PLAIN.has(ev.type)) this.frame(entry);
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
    this.ring[this.head] = entry;
    this.head = (this.head + 1) % this.ring.length;
    if (this.size < this.ring.length) this.size++;
    for (const sub of this.subs) if (matches(sub.filter, entry)) this.enqueue(sub, this.frame(entry));
  }

  private enqueue(sub: Subscriber, frame: string): void {
    sub.queue.push(frame);
    sub.bytes += frame.length;
    const over = sub.queue.length > this.opts.maxQueued || sub.bytes > this.maxQueuedBytes;
    if (sub.blocked) {
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
    if (sub.blocked || sub.closed || !sub.queue.length) return;
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
   * event that passes `filter`. Throws when the hub is closed.
   */
  subscribe(sink: EventSink, filter: EventFilter = {}, lastEventId?: number): Subscription {
    if (this.closed) throw new Error("the event hub is closed");
    const sub = new Subscriber(this.nextSub++, sink, filter);
    let head = "retry: 3000\n: clawbridge events\n\n";
    if (lastEventId !== undefined) {
      const oldest = this.size ? this.lastId - this.size + 1 : this.lastId + 1;
      if (lastEventId > this.lastId || lastEventId < oldest - 1) {
        // From an earlier bridge (ids restart with it), or older than the ring: some events are gone.
        head += frameOf("gap", { lastEventId, oldest: this.size ? oldest : null, lastId: this.lastId });
      }
      const from = lastEventId > this.lastId ? oldest : Math.max(lastEventId + 1, oldest);
      const parts: string[] = [head];
      for (let id = from; id <= this.lastId; id++) {
        const entry = this.at(id);
        if (entry && matches(filter, entry)) parts.push(this.frame(entry));
      }
      head = parts.join("");
    }
    this.subs.add(sub);
    if (this.opts.heartbeatMs > 0 && !this.heartbeat) {
      this.heartbeat = setInterval(() => this.beat(), this.opts.heartbeatMs);
      this.heartbeat.unref();
    }
    // The replay leaves in one write, before anything newer (publishing is synchronous, so nothing
    // can come between the ring read above and this).
    this.write(sub, head);
    return { id: sub.id, close: () => this.remove(sub) };
  }

  private at(id: number): Entry | undefined {
    if (id > this.lastId || id <= this.lastId - this.size) return undefined;
    const back = this.lastId - id; // 0: the newest
    const i = (this.head - 1 - back + this.ring.length * 2) % this.ring.length;
    return this.ring[i];
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
