/**
 * One conversation, one turn at a time, ACROSS INSTANCES (several bridges on one PostgreSQL, issue
 * 36). The local queue (scheduler.ts) orders one instance's turns and applies its limits; a turn
 * that has its local slot then takes the conversation's lock in the database, held for the whole
 * turn, so a turn of the same conversation on another instance waits in PostgreSQL's own lock queue
 * (first come, first served) until this one has ended.
 *
 * The lock is a session advisory lock on `conversation:<key>` (src/core/db/postgres.ts `lock`: a hash
 * of the text, on a pooled connection of its own held until release). Its wait is bounded like the
 * local one: past the time the turn has left of `server.queueTimeoutSeconds` it is refused with the
 * same 429 (`QueueRejected`, scope "conversation"); the client going away (or the bridge shutting
 * down) ends the wait (`WaitAborted`). Either way the wait is cancelled on the server (PostgreSQL's
 * cancel request): nothing is left queued behind, and the lock never goes to a turn that left.
 *
 * Only with a PostgreSQL store: on SQLite (one instance) the pipeline has no `ConversationLocks` and
 * the local queue is the whole story. Side calls (the router's classifier, a system's model step)
 * are not turns of a conversation and take no lock.
 */
import type { HeldLock } from "../../core/db/postgres.js";
import { onAbort, type Abortable } from "../../core/util/cancel.js";
import { QueueRejected, WaitAborted } from "./scheduler.js";

export type { HeldLock };

export interface ConversationLocks {
  /**
   * Wait (at most `timeoutMs`, until `signal` aborts) until no other turn of the conversation runs on
   * any instance. Resolves with the lock, to release when the turn ends (however it ends); rejects
   * with `QueueRejected` (scope "conversation") after `timeoutMs`, `WaitAborted` when `signal` aborts,
   * or the database's error.
   */
  acquire(key: string, signal: Abortable, timeoutMs: number): Promise<HeldLock>;
}

/** What the locks need of the database (`PostgresDb`). */
export interface AdvisoryLocks {
  lock(namespace: string, name: string, signal?: AbortSignal): Promise<HeldLock>;
}

export class PgConversationLocks implements ConversationLocks {
  /** `retryAfter`: the Retry-After of a refusal (the local queue's: about one average turn). */
  constructor(
    private readonly db: AdvisoryLocks,
    private readonly retryAfter: () => number,
  ) {}

  async acquire(key: string, signal: Abortable, timeoutMs: number): Promise<HeldLock> {
    if (signal.aborted) throw new WaitAborted();
    const stop = new AbortController();
    let why: "timeout" | "client" | undefined;
    const timer = setTimeout(
      () => {
        why ??= "timeout";
        stop.abort();
      },
      Math.max(0, timeoutMs),
    );
    const unlisten = onAbort(signal, () => {
      why ??= "client";
      stop.abort();
    });
    try {
      return await this.db.lock("conversation", key, stop.signal);
    } catch (err) {
      if (why === "client") throw new WaitAborted();
      if (why === "timeout") {
        throw new QueueRejected(
          `this conversation's previous turn is still running on another instance after ${Math.round(timeoutMs / 1000)}s`,
          this.retryAfter(),
          "conversation",
        );
      }
      throw err;
    } finally {
      clearTimeout(timer);
      unlisten();
    }
  }
}
