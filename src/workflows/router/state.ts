/**
 * The router's memory of each conversation, in the systems database (`router_state`): the
 * conversation's state (idle, routing, executing…) and what the router is waiting for — the
 * missing inputs of a system (gathering) or a yes/no on a run it showed (confirm). Kept in SQLite,
 * so a restart between the question and the answer loses nothing.
 */
import type Database from "better-sqlite3";
import type { ConversationState } from "../../wire/events.js";

export type Pending =
  | {
      kind: "gathering";
      system: string;
      /** Valid values collected so far. */
      values: Record<string, unknown>;
      /** Questions asked so far. */
      rounds: number;
      since: number;
    }
  | {
      kind: "confirm";
      system: string;
      /** Exactly the inputs that were shown; "yes" runs these (checked by `hash`). */
      values: Record<string, unknown>;
      hash: string;
      since: number;
      /** Set when the question is whether to resume this run. */
      resumeRun?: string;
    };

export interface ConversationRecord {
  state: ConversationState;
  pending?: Pending;
  updatedAt: number;
}

export class RouterStateStore {
  private readonly getStmt;
  private readonly putStmt;
  private readonly consumeStmt;

  constructor(private readonly db: Database.Database) {
    this.getStmt = db.prepare(`SELECT state, data, updated_at FROM router_state WHERE conversation = ?`);
    this.putStmt = db.prepare(
      `INSERT INTO router_state (conversation, state, data, updated_at) VALUES (@c, @s, @d, @t)
       ON CONFLICT(conversation) DO UPDATE SET state = @s, data = @d, updated_at = @t`,
    );
    this.consumeStmt = db.prepare(
      `UPDATE router_state SET data = NULL, updated_at = @t WHERE conversation = @c AND data = @d`,
    );
  }

  get(conversation: string): ConversationRecord {
    const row = this.getStmt.get(conversation) as
      | { state: string; data: string | null; updated_at: number }
      | undefined;
    if (!row) return { state: "idle", updatedAt: 0 };
    return {
      state: row.state as ConversationState,
      pending: row.data ? (JSON.parse(row.data) as Pending) : undefined,
      updatedAt: row.updated_at,
    };
  }

  setState(conversation: string, state: ConversationState): void {
    const cur = this.get(conversation);
    this.putStmt.run({ c: conversation, s: state, d: cur.pending ? JSON.stringify(cur.pending) : null, t: Date.now() });
  }

  setPending(conversation: string, pending: Pending | undefined): void {
    const cur = this.get(conversation);
    this.putStmt.run({ c: conversation, s: cur.state, d: pending ? JSON.stringify(pending) : null, t: Date.now() });
  }

  /** Conversations waiting for an answer (missing inputs or a yes/no), most recent first (the dashboard's Router view). */
  pendingList(limit = 100): Array<{ conversation: string } & ConversationRecord & { pending: Pending }> {
    const rows = this.db
      .prepare(
        `SELECT conversation, state, data, updated_at FROM router_state WHERE data IS NOT NULL ORDER BY updated_at DESC LIMIT ?`,
      )
      .all(limit) as Array<{ conversation: string; state: string; data: string; updated_at: number }>;
    return rows.map((r) => ({
      conversation: r.conversation,
      state: r.state as ConversationState,
      pending: JSON.parse(r.data) as Pending,
      updatedAt: r.updated_at,
    }));
  }

  /**
   * Take the pending confirmation if it is still exactly `pending` (one writer wins): a second
   * "yes", or a client's retry racing the first, finds nothing to take.
   */
  consume(conversation: string, pending: Pending): boolean {
    return this.consumeStmt.run({ c: conversation, d: JSON.stringify(pending), t: Date.now() }).changes === 1;
  }
}
