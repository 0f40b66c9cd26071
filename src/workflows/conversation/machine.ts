/**
 * One conversation machine for the router and the builder: where each conversation is, in one
 * table of the systems database (`conversation_state`), so a restart between a question and its
 * answer loses nothing. A conversation's row holds
 *   - its state (idle, planning, executing, paused, completed, error; the passing `routing` is
 *     published, never written) and the engine that set it: a build's planning, executing or
 *     paused is the builder's and keeps the conversation's messages with the builder;
 *   - the one question it waits on, if any: a system's missing inputs (gathering), a yes for a run
 *     (confirm), a yes for an edit that deletes nodes (plan), for settings changes (configure), a
 *     deploy or an undeploy — asking a new one replaces it;
 *   - the canvas the builder works on.
 * One TTL: a question, and a build state that stopped moving, lapse after it. One cancel path:
 * `reply` reads an answer without a model, and "no", "cancel", "never mind", "stop" (replies.ts)
 * end whichever question is open. Opening it moves the rows of the two tables it replaces
 * (`router_state`, `builder_conversations`) into it in one transaction and drops them.
 */
import type Database from "better-sqlite3";
import type { EventBus } from "../../ops/events/bus.js";
import type { ConversationState } from "../../wire/events.js";
import { replyKind } from "./replies.js";

/** Who set a conversation's state. */
export type Engine = "router" | "builder";

/** One settings change of the builder's CONFIGURE (src/workflows/builder/configure.ts). */
export interface ConfigChange {
  /** `confirm`, `enabled`, `deployed`, `defaults.<input>`, `model.<node>`, `examples`. */
  path: string;
  value: unknown;
}

/** What a conversation waits on; `since` is when it was asked. */
export type Question =
  /** The router: a system's missing inputs, collected over the turns. */
  | { kind: "gathering"; system: string; values: Record<string, unknown>; rounds: number; since: number }
  /** The router: "yes" runs exactly the inputs shown (checked by `hash`), or resumes `resumeRun`. */
  | {
      kind: "confirm";
      system: string;
      values: Record<string, unknown>;
      hash: string;
      since: number;
      resumeRun?: string;
    }
  /** The builder: a plan (its ExecutionPlan) that deletes nodes, shown first. */
  | { kind: "plan"; system: string; plan: unknown; intent: "EDIT" | "BUILD"; since: number }
  /** The builder: settings changes, shown as a diff. */
  | { kind: "configure"; system: string; changes: ConfigChange[]; since: number }
  | { kind: "deploy"; system: string; since: number }
  | { kind: "undeploy"; system: string; since: number };

export type RouterQuestion = Extract<Question, { kind: "gathering" | "confirm" }>;
export type BuilderQuestion = Exclude<Question, RouterQuestion>;

export const isRouterQuestion = (q: Question): q is RouterQuestion => q.kind === "gathering" || q.kind === "confirm";

export interface Conversation {
  state: ConversationState;
  engine: Engine;
  question?: Question;
  /** The canvas the builder works on (the last one built, edited or named). */
  canvas?: string;
  updatedAt: number;
}

/** A message read as the answer to the open question. */
export type Reply =
  | { kind: "none" }
  /** The question had lapsed (TTL): it is gone, and the message is an ordinary one. */
  | { kind: "expired"; question: Question }
  /** "no", "cancel", "never mind", "stop"…: the question is gone. */
  | { kind: "ended"; question: Question }
  /** "yes" (not taken yet: `take` it), or anything else (the question is still open). */
  | { kind: "yes" | "other"; question: Question };

/** Minutes a question waits when neither key sets them. */
const DEFAULT_TTL_MINUTES = 60;

/** A build's states: with the builder while they last. */
const BUILDING = new Set<ConversationState>(["planning", "executing", "paused"]);

const SCHEMA = `
CREATE TABLE IF NOT EXISTS conversation_state (
  conversation TEXT PRIMARY KEY,
  state TEXT NOT NULL,
  engine TEXT NOT NULL,
  question TEXT,
  canvas TEXT,
  updated_at INTEGER NOT NULL
);
`;

interface Row {
  conversation: string;
  state: string;
  engine: string;
  question: string | null;
  canvas: string | null;
  updated_at: number;
}

export class ConversationMachine {
  private readonly stmts;
  /** Conversations in the passing `routing` state (published, not written). */
  private readonly transient = new Map<string, ConversationState>();

  /** Opens the table (and moves the two old ones into it); `ttlMs` is how long a question waits. */
  constructor(
    db: Database.Database,
    readonly ttlMs: number,
    private readonly bus?: EventBus,
  ) {
    db.exec(SCHEMA);
    migrate(db);
    this.stmts = {
      get: db.prepare(`SELECT * FROM conversation_state WHERE conversation = ?`),
      put: db.prepare(
        `INSERT INTO conversation_state (conversation, state, engine, question, canvas, updated_at)
         VALUES (@conversation, @state, @engine, @question, @canvas, @updated_at)
         ON CONFLICT(conversation) DO UPDATE SET state = @state, engine = @engine, question = @question,
           canvas = @canvas, updated_at = @updated_at`,
      ),
      take: db.prepare(
        `UPDATE conversation_state SET question = NULL, updated_at = @t WHERE conversation = @c AND question = @q`,
      ),
      open: db.prepare(`SELECT * FROM conversation_state WHERE question IS NOT NULL ORDER BY updated_at DESC LIMIT ?`),
    };
  }

  get(conversation: string): Conversation {
    const r = this.stmts.get.get(conversation) as Row | undefined;
    return r ? fromRow(r) : { state: "idle", engine: "router", updatedAt: 0 };
  }

  private put(conversation: string, c: Omit<Conversation, "updatedAt">): void {
    this.stmts.put.run(toRow(conversation, { ...c, updatedAt: Date.now() }));
  }

  /**
   * The conversation's state, by `engine`: published on every change, written when it is not the
   * passing `routing` and differs from what is stored.
   */
  setState(conversation: string, state: ConversationState, engine: Engine): void {
    const stored = this.get(conversation);
    if ((this.transient.get(conversation) ?? stored.state) === state) return;
    if (state === "routing") this.transient.set(conversation, state);
    else {
      this.transient.delete(conversation);
      if (stored.state !== state || stored.engine !== engine) this.put(conversation, { ...stored, state, engine });
    }
    this.bus?.emit({ type: "state", conversation, state });
  }

  /** Open a question (it replaces any other); `canvas` also becomes the builder's canvas. */
  ask(conversation: string, question: Question, canvas?: string): void {
    const c = this.get(conversation);
    this.put(conversation, { ...c, question, canvas: canvas ?? c.canvas });
  }

  /** End the open question, whatever it is; returns it. */
  close(conversation: string): Question | undefined {
    const c = this.get(conversation);
    if (c.question) this.put(conversation, { ...c, question: undefined });
    return c.question;
  }

  setCanvas(conversation: string, canvas: string): void {
    this.put(conversation, { ...this.get(conversation), canvas });
  }

  /**
   * Take the question if it is still exactly `question` (one writer wins): a second "yes", or a
   * client's retry racing the first, finds nothing to take.
   */
  take(conversation: string, question: Question): boolean {
    return this.stmts.take.run({ c: conversation, q: JSON.stringify(question), t: Date.now() }).changes === 1;
  }

  /** Read a message as the answer to the open question: lapsed ones and "no" / "cancel" end it here. */
  reply(conversation: string, text: string): Reply {
    const question = this.get(conversation).question;
    if (!question) return { kind: "none" };
    if (this.lapsed(question.since)) {
      this.close(conversation);
      return { kind: "expired", question };
    }
    const word = replyKind(text);
    if (word === "no" || word === "cancel") {
      this.close(conversation);
      return { kind: "ended", question };
    }
    return { kind: word === "yes" ? "yes" : "other", question };
  }

  /** Whether the builder is in the middle of something: its question waits, or a build of it moved within the TTL. */
  withBuilder(conversation: string): boolean {
    const c = this.get(conversation);
    if (c.question) return !isRouterQuestion(c.question) && !this.lapsed(c.question.since);
    return c.engine === "builder" && BUILDING.has(c.state) && !this.lapsed(c.updatedAt);
  }

  /** Conversations waiting for an answer, most recent first (the dashboard's Router view). */
  questions(limit = 100): Array<Conversation & { conversation: string; question: Question }> {
    return (this.stmts.open.all(limit) as Row[]).map((r) => ({
      conversation: r.conversation,
      ...(fromRow(r) as Conversation & { question: Question }),
    }));
  }

  private lapsed(since: number): boolean {
    return Date.now() - since > this.ttlMs;
  }
}

/**
 * The machine's one TTL in minutes: a router's `gathering.ttlMinutes` or a builder's
 * `confirmMinutes` (the keys of the two tables it replaced, one setting now), else 60. Two of them
 * set differently is a problem naming both.
 */
export function conversationTtl(
  backends: Record<string, { type: string; options: unknown }>,
): { minutes: number } | { problem: string } {
  const set: Array<[key: string, minutes: number]> = [];
  for (const [name, b] of Object.entries(backends)) {
    const o = (b.options ?? {}) as { gathering?: { ttlMinutes?: number }; confirmMinutes?: number };
    if (b.type === "router" && o.gathering?.ttlMinutes !== undefined)
      set.push([`backends.${name}.gathering.ttlMinutes`, o.gathering.ttlMinutes]);
    if (b.type === "builder" && o.confirmMinutes !== undefined)
      set.push([`backends.${name}.confirmMinutes`, o.confirmMinutes]);
  }
  const other = set.find(([, m]) => m !== set[0]![1]);
  if (other)
    return {
      problem: `${set[0]![0]} (${set[0]![1]}) and ${other[0]} (${other[1]}) differ: they are one setting, the minutes a conversation's question waits for its answer; set them equal, or keep one`,
    };
  return { minutes: set[0]?.[1] ?? DEFAULT_TTL_MINUTES };
}

function fromRow(r: Row): Conversation {
  return {
    state: r.state as ConversationState,
    engine: r.engine as Engine,
    ...(r.question ? { question: JSON.parse(r.question) as Question } : {}),
    ...(r.canvas ? { canvas: r.canvas } : {}),
    updatedAt: r.updated_at,
  };
}

function toRow(conversation: string, c: Conversation): Row {
  return {
    conversation,
    state: c.state,
    engine: c.engine,
    question: c.question ? JSON.stringify(c.question) : null,
    canvas: c.canvas ?? null,
    updated_at: c.updatedAt,
  };
}

const hasTable = (db: Database.Database, name: string) =>
  db.prepare(`SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?`).get(name) !== undefined;

/**
 * A systems.db of release 0.1.0 kept the router's and the builder's conversations apart. Both are
 * moved here, in one transaction, and dropped; a conversation in both keeps the state written last,
 * the question asked last, and the builder's canvas.
 */
function migrate(db: Database.Database): void {
  const router = hasTable(db, "router_state");
  const builder = hasTable(db, "builder_conversations");
  if (!router && !builder) return;
  db.transaction(() => {
    const rows = new Map<string, Conversation>();
    const keep = (conversation: string, c: Conversation) => {
      const had = rows.get(conversation);
      const [older, newer] = had && had.updatedAt > c.updatedAt ? [c, had] : [had, c];
      const question = newer.question ?? older?.question;
      const canvas = c.canvas ?? had?.canvas;
      rows.set(conversation, { ...newer, ...(question ? { question } : {}), ...(canvas ? { canvas } : {}) });
    };
    if (router)
      for (const r of db.prepare(`SELECT * FROM router_state`).all() as Array<Record<string, unknown>>)
        keep(String(r.conversation), {
          state: r.state as ConversationState,
          engine: "router",
          ...(typeof r.data === "string" ? { question: JSON.parse(r.data) as Question } : {}),
          updatedAt: Number(r.updated_at),
        });
    if (builder)
      for (const r of db.prepare(`SELECT * FROM builder_conversations`).all() as Array<Record<string, unknown>>)
        keep(String(r.conversation), {
          state: r.state as ConversationState,
          engine: "builder",
          ...(typeof r.pending === "string" ? { question: JSON.parse(r.pending) as Question } : {}),
          ...(typeof r.focus === "string" ? { canvas: r.focus } : {}),
          updatedAt: Number(r.updated_at),
        });
    const put = db.prepare(
      `INSERT OR REPLACE INTO conversation_state (conversation, state, engine, question, canvas, updated_at)
       VALUES (@conversation, @state, @engine, @question, @canvas, @updated_at)`,
    );
    for (const [conversation, c] of rows) put.run(toRow(conversation, c));
    db.exec(`DROP TABLE IF EXISTS router_state; DROP TABLE IF EXISTS builder_conversations;`);
  })();
}
