/**
 * One conversation machine for the router and the builder, in one table of the systems floor's
 * store (`conversation_state`: `<dataDir>/systems.db`, or the PostgreSQL of `store: { kind:
 * postgres }`, migration 5), so a restart between a question and its answer loses nothing, and
 * every bridge on one database sees the same question. Per
 * conversation: its state and the engine that set it (a build's planning, executing or paused is
 * the builder's and keeps the conversation with it; `routing` is published, never written), the one
 * question it waits on (missing inputs, a yes for a run, an approval a run waits on, an edit that deletes nodes, settings
 * changes, a deploy or an undeploy, a build named like a system that exists; a new one replaces
 * it), and the builder's canvas. One TTL: a question (not an approval: it has its own deadline),
 * and a build state that stopped moving, lapse after it. One cancel path: `reply` reads the answer without a model; "no", "cancel", "never
 * mind", "stop" (replies.ts) end any question.
 * Opening it on SQLite creates the table and moves release 0.1.0's `router_state` and
 * `builder_conversations` into it.
 */
import type Database from "better-sqlite3";
import { type Sql, SqliteSql } from "../../core/db/sql.js";
import type { EventBus } from "../../ops/events/bus.js";
import type { ConversationState } from "../../wire/events.js";
import { replyKind } from "./replies.js";

export type Engine = "router" | "builder";

/** One settings change of the builder's CONFIGURE (src/workflows/builder/configure.ts). */
export interface ConfigChange {
  /** `name`, `confirm`, `enabled`, `deployed`, `defaults.<input>`, `model.<node>`, `examples`, `keywords`. */
  path: string;
  value: unknown;
}

/** What a conversation waits on (`since`: when it was asked). */
type Asked<K extends string, T = unknown> = { kind: K; system: string; since: number } & T;
export type Question =
  /** The router: a system's missing inputs, collected over the turns (`version`: of `/run id@version`). */
  | Asked<"gathering", { values: Record<string, unknown>; rounds: number; version?: number }>
  /** The router: "yes" runs exactly the inputs shown (checked by `hash`), or resumes `resumeRun`. */
  | Asked<"confirm", { values: Record<string, unknown>; hash: string; resumeRun?: string; version?: number }>
  /** The router: "yes" approves, "no" rejects, the approval step `step` of the waiting run `runId`. */
  | Asked<"approval", { runId: string; step: string }>
  /** The builder: a plan (its ExecutionPlan) that deletes nodes, shown first; settings changes, as a diff. */
  | Asked<"plan", { plan: unknown; intent: "EDIT" | "BUILD" }>
  | Asked<"configure", { changes: ConfigChange[] }>
  /** The builder: a BUILD (its request and plan) named like `system`; "yes" changes `system`, "new" builds the plan beside it. */
  | Asked<"samename", { request: string; plan: unknown }>
  | Asked<"deploy">
  | Asked<"undeploy">
  /** The builder: "roll back `system` to version `version`" (src/workflows/builder/rollback.ts). */
  | Asked<"rollback", { version: number }>;

export type RouterQuestion = Extract<Question, { kind: "gathering" | "confirm" | "approval" }>;
export type BuilderQuestion = Exclude<Question, RouterQuestion>;

export const isRouterQuestion = (q: Question): q is RouterQuestion =>
  q.kind === "gathering" || q.kind === "confirm" || q.kind === "approval";

export interface Conversation {
  state: ConversationState;
  engine: Engine;
  question?: Question;
  /** The canvas the builder works on (the last one built, edited or named). */
  canvas?: string;
  updatedAt: number;
}

/** A conversation with a question open (the dashboard's Router view lists them). */
export type OpenQuestion = Conversation & { conversation: string; question: Question };

/**
 * A message read as the answer to the open question: `expired` (it lapsed) and `ended` ("no",
 * "cancel"…) closed it; `yes` (to be taken) and `other` leave it open.
 */
export type Reply = { kind: "none" } | { kind: "expired" | "ended" | "yes" | "other"; question: Question };

/** A build's states: the conversation is with the builder while they last. */
const BUILDING = new Set<ConversationState>(["planning", "executing", "paused"]);

type Row = Record<"conversation" | "state" | "engine", string> &
  Record<"question" | "canvas", string | null> & { updated_at: number };

const fromRow = (r: Row): Conversation => ({
  state: r.state as ConversationState,
  engine: r.engine as Engine,
  ...(r.question ? { question: JSON.parse(r.question) as Question } : {}),
  ...(r.canvas ? { canvas: r.canvas } : {}),
  updatedAt: Number(r.updated_at),
});

/**
 * The SQL of the machine, one for both engines. Each write changes only its own columns (a new
 * conversation starts idle, the router's), so writers that meet — a turn's question, a run's end
 * setting the state, on one bridge or two — never undo each other's change.
 */
const INSERT = `INSERT INTO conversation_state (conversation, state, engine, question, canvas, updated_at)`;
const Q = {
  get: `SELECT * FROM conversation_state WHERE conversation = ?`,
  state: `${INSERT} VALUES (?, ?, ?, NULL, NULL, ?) ON CONFLICT (conversation) DO UPDATE SET
    state = excluded.state, engine = excluded.engine, updated_at = excluded.updated_at`,
  ask: `${INSERT} VALUES (?, 'idle', 'router', ?, ?, ?) ON CONFLICT (conversation) DO UPDATE SET
    question = excluded.question, canvas = COALESCE(excluded.canvas, conversation_state.canvas),
    updated_at = excluded.updated_at`,
  canvas: `${INSERT} VALUES (?, 'idle', 'router', NULL, ?, ?) ON CONFLICT (conversation) DO UPDATE SET
    canvas = excluded.canvas, updated_at = excluded.updated_at`,
  take: `UPDATE conversation_state SET question = NULL, updated_at = ? WHERE conversation = ? AND question = ?`,
  open: `SELECT * FROM conversation_state WHERE question IS NOT NULL ORDER BY updated_at DESC LIMIT ?`,
};

export class ConversationMachine {
  /** Conversations in the passing `routing` state (published, not written). */
  private readonly transient = new Map<string, ConversationState>();

  /** Over the systems floor's store (on SQLite: the table opened, the two old ones moved into it); a question waits `ttlMs`. */
  constructor(
    private readonly sql: Sql,
    readonly ttlMs: number,
    private readonly bus?: EventBus,
  ) {
    if (sql instanceof SqliteSql) {
      sql.db.exec(`CREATE TABLE IF NOT EXISTS conversation_state (conversation TEXT PRIMARY KEY, state TEXT NOT NULL,
        engine TEXT NOT NULL, question TEXT, canvas TEXT, updated_at INTEGER NOT NULL)`);
      migrate(sql.db);
    }
  }

  async get(conversation: string): Promise<Conversation> {
    const r = await this.sql.get<Row>(Q.get, [conversation]);
    return r ? fromRow(r) : { state: "idle", engine: "router", updatedAt: 0 };
  }

  /** The state, set by `engine`: published on every change; not written when `routing`, nor the router's during a build. */
  async setState(conversation: string, state: ConversationState, engine: Engine): Promise<void> {
    const stored = await this.get(conversation);
    if ((this.transient.get(conversation) ?? stored.state) === state) return;
    if (state === "routing") this.transient.set(conversation, state);
    else {
      this.transient.delete(conversation);
      const keep = engine === "router" && this.busy(stored);
      if (!keep && (stored.state !== state || stored.engine !== engine))
        await this.sql.run(Q.state, [conversation, state, engine, Date.now()]);
    }
    this.bus?.emit({ type: "state", conversation, state });
  }

  /** Open a question (it replaces any other); `canvas` becomes the builder's canvas. */
  async ask(conversation: string, question: Question, canvas?: string): Promise<void> {
    await this.sql.run(Q.ask, [conversation, JSON.stringify(question), canvas ?? null, Date.now()]);
  }

  /** End the open question, whatever it is; returns it. */
  async close(conversation: string): Promise<Question | undefined> {
    const { question } = await this.get(conversation);
    if (question) await this.take(conversation, question);
    return question;
  }

  async setCanvas(conversation: string, canvas: string): Promise<void> {
    await this.sql.run(Q.canvas, [conversation, canvas, Date.now()]);
  }

  /** Take the question if it is still exactly `question`: a second "yes", or a client's retry racing the first, finds nothing. */
  async take(conversation: string, question: Question): Promise<boolean> {
    return (await this.sql.run(Q.take, [Date.now(), conversation, JSON.stringify(question)])).changes === 1;
  }

  /** Read a message as the answer to the open question: a lapsed one, and "no" or "cancel", end it here. */
  async reply(conversation: string, text: string): Promise<Reply> {
    const question = (await this.get(conversation)).question;
    if (!question) return { kind: "none" };
    const word = replyKind(text);
    const lapsed = question.kind !== "approval" && this.lapsed(question.since);
    const kind = lapsed ? "expired" : word === "no" || word === "cancel" ? "ended" : undefined;
    if (kind) await this.close(conversation);
    return { kind: kind ?? (word === "yes" ? "yes" : "other"), question };
  }

  /** Whether the builder is in the middle of something: its question waits, or its build moved within the TTL. */
  async withBuilder(conversation: string): Promise<boolean> {
    return this.busy(await this.get(conversation));
  }

  private busy(c: Conversation): boolean {
    if (c.question) return !isRouterQuestion(c.question) && !this.lapsed(c.question.since);
    return c.engine === "builder" && BUILDING.has(c.state) && !this.lapsed(c.updatedAt);
  }

  /** Conversations waiting for an answer, most recent first (the dashboard's Router view). */
  async questions(limit = 100): Promise<OpenQuestion[]> {
    return (await this.sql.all<Row>(Q.open, [limit])).map(
      (r) => ({ conversation: r.conversation, ...fromRow(r) }) as OpenQuestion,
    );
  }

  private lapsed(since: number): boolean {
    return Date.now() - since > this.ttlMs;
  }
}

type TtlOrProblem = { minutes: number } | { problem: string };

/**
 * The one TTL in minutes: a router's `gathering.ttlMinutes` or a builder's `confirmMinutes` (the
 * keys of the two tables it replaced), else 60. Set differently, a problem naming both.
 */
export function conversationTtl(backends: Record<string, { type: string; options: unknown }>): TtlOrProblem {
  const set: Array<[key: string, minutes: number]> = [];
  for (const [name, { type, options }] of Object.entries(backends)) {
    const o = (options ?? {}) as { gathering?: { ttlMinutes?: number }; confirmMinutes?: number };
    if (type === "router" && o.gathering?.ttlMinutes)
      set.push([`backends.${name}.gathering.ttlMinutes`, o.gathering.ttlMinutes]);
    if (type === "builder" && o.confirmMinutes) set.push([`backends.${name}.confirmMinutes`, o.confirmMinutes]);
  }
  const [first, other] = [set[0], set.find(([, m]) => m !== set[0]![1])];
  return first && other
    ? {
        problem: `${first[0]} (${first[1]}) and ${other[0]} (${other[1]}) differ: they are one setting, the minutes a conversation's question waits for its answer; set them equal, or keep one`,
      }
    : { minutes: first?.[1] ?? 60 };
}

/**
 * Release 0.1.0's two tables, moved here in one transaction and dropped; a conversation in both
 * keeps the state written last, its question (else the other's) and the builder's canvas.
 */
function migrate(db: Database.Database): void {
  const has = (t: string) => db.prepare(`SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?`).get(t);
  db.transaction(() => {
    if (has("router_state"))
      db.exec(`INSERT OR REPLACE INTO conversation_state SELECT conversation, state, 'router', data, NULL, updated_at
        FROM router_state; DROP TABLE router_state`);
    if (has("builder_conversations"))
      db.exec(`INSERT INTO conversation_state SELECT conversation, state, 'builder', pending, focus, updated_at
        FROM builder_conversations WHERE true ON CONFLICT(conversation) DO UPDATE SET
          state = iif(excluded.updated_at >= updated_at, excluded.state, state),
          engine = iif(excluded.updated_at >= updated_at, 'builder', engine),
          question = iif(excluded.updated_at >= updated_at, coalesce(excluded.question, question), coalesce(question, excluded.question)),
          canvas = excluded.canvas, updated_at = max(updated_at, excluded.updated_at);
        DROP TABLE builder_conversations`);
  })();
}
