/**
 * Client tool calls kept per conversation. A CLI agent calls one of the client's tools through the
 * bridge's MCP endpoint (`mcp.ts`); the call waits here while the HTTP response that announced it
 * ends with `tool_calls`, and is answered from the client's next request (its `tool` messages).
 *
 * - `ToolSession`: one per conversation — the token the CLI's MCP client presents, the tools on
 *   offer, the calls waiting, and the CLI turn suspended on them (`SuspendedTurn`, held by the warm
 *   room). At most one suspended turn; it is taken exactly once (resumed, abandoned, timed out, or
 *   dropped when its process died), so a timer and a request never both act on it.
 * - A call's MCP request may go away and come again (Qwen Code re-sends an unanswered call after
 *   reconnecting): a repeat of a waiting call (same name and arguments) joins it.
 * - `ClientToolHub`: the sessions by conversation and by token (a SHA-256 of the token is the key,
 *   so the lookup does not compare secrets), and the endpoint's URL once the bridge listens.
 * - A call that gets no result from the client (the pending timeout, a request that offers no tools)
 *   is ANSWERED, with a result that says what happened (`isError`), before its turn ends: the CLI's
 *   model reads that text as the tool's result, not its CLI's own "the user rejected this tool use"
 *   and "[Request interrupted by user for tool use]" that an interrupt leaves. The turn then goes on,
 *   unseen, until the model has taken that in and its turn ends by itself (at most `SETTLE_MS`, then
 *   it is interrupted after all); nobody reads that reply, but the CLI's history stays true and whole.
 * - The answers to the client's results are kept by request (`replay.ts`), so a resent request is
 *   recognised: replayed, or answered again without its results reaching the model twice.
 */
import { createHash, randomBytes } from "node:crypto";
import type { Logger } from "pino";
import type { BackendEvent } from "../contract/backend.js";
import { RecordedAnswer, resultsKey } from "./replay.js";
import { newBridgeCallId, type ClientToolDef, type ClientToolResult, type SuspendedTurn } from "./types.js";

/** What an MCP `tools/call` is answered with. */
export interface CallOutcome {
  content: Array<{ type: "text"; text: string }>;
  isError?: boolean;
}

/** A call as the driver announces it to the client. */
export interface ClientToolCall {
  id: string;
  name: string;
  /** The arguments as a JSON text (what `tool_calls[].function.arguments` carries). */
  argumentsJson: string;
}

const errorOutcome = (text: string): CallOutcome => ({ content: [{ type: "text", text }], isError: true });

class PendingCall implements ClientToolCall {
  readonly id = newBridgeCallId();
  /** Handed to the client in a response (so its result is expected in the next request). */
  announced = false;
  /** The MCP request waiting for it now (none while the CLI reconnects). */
  waiter: ((o: CallOutcome) => void) | undefined;
  /** An answer that came while no request waited: the repeat gets it. */
  outcome: CallOutcome | undefined;
  constructor(
    readonly name: string,
    readonly argumentsJson: string,
  ) {}
}

/** How often a waiting call tells the CLI it is still alive (Claude Code gives up on a silent HTTP tool after 300 s). */
export const PROGRESS_EVERY_MS = 30_000;
/** A conversation's session is forgotten after this long unused with nothing waiting. */
const FORGET_AFTER_MS = 60 * 60_000;
/** How long a turn whose calls were answered without a result may go on, unseen, before it is interrupted. */
export const SETTLE_MS = 20_000;
/** A conversation keeps the answers to this many tool-result requests (the newest). */
const KEPT_ANSWERS = 16;

export class ToolSession {
  tools: ClientToolDef[] = [];
  lastUsedAt = Date.now();
  private readonly calls = new Map<string, PendingCall>();
  private listener: ((call: ClientToolCall) => void) | undefined;
  private suspended: { turn: SuspendedTurn; backend: string; timer: NodeJS.Timeout } | undefined;
  /** Answers to tool-result requests, by `resultsKey`, oldest first. */
  private readonly answers = new Map<string, RecordedAnswer>();

  constructor(
    readonly key: string,
    readonly token: string,
    readonly log: Logger,
  ) {}

  /** The running CLI turn that announces new calls (undefined: no turn listens; calls are refused). */
  listen(fn: ((call: ClientToolCall) => void) | undefined): void {
    this.listener = fn;
  }

  /** The driver handed this call to the client. */
  announce(id: string): void {
    const c = this.calls.get(id);
    if (c) c.announced = true;
  }

  /** The backend whose CLI turn waits for a result here, if any. */
  get waitingOn(): string | undefined {
    return this.suspended?.backend;
  }

  /** Calls announced to the client and not answered yet. */
  get announced(): ClientToolCall[] {
    return [...this.calls.values()].filter((c) => c.announced);
  }

  /**
   * An MCP `tools/call` of the CLI. Resolves with the client's result, or an error outcome when the
   * call cannot be served (unknown tool, no turn listening) or is cancelled. `signal`: the MCP
   * request went away (the CLI cancelled it or dropped the connection). `progress` is called every
   * `PROGRESS_EVERY_MS` while it waits.
   */
  call(name: string, args: unknown, signal: AbortSignal, progress?: (n: number) => void): Promise<CallOutcome> {
    this.lastUsedAt = Date.now();
    if (!this.tools.some((t) => t.name === name))
      return Promise.resolve(errorOutcome(`The tool "${name}" is not offered in this conversation.`));
    const json = JSON.stringify(args ?? {});
    let c = [...this.calls.values()].find((x) => !x.waiter && x.name === name && x.argumentsJson === json);
    if (c?.outcome) {
      this.calls.delete(c.id);
      return Promise.resolve(c.outcome);
    }
    if (!c) {
      if (!this.listener)
        return Promise.resolve(
          errorOutcome(`No turn is waiting for tool calls in this conversation; "${name}" was not run.`),
        );
      c = new PendingCall(name, json);
      this.calls.set(c.id, c);
      this.listener(c);
    }
    const call = c;
    return new Promise<CallOutcome>((resolve) => {
      let n = 0;
      const tick = progress ? setInterval(() => progress(++n), PROGRESS_EVERY_MS) : undefined;
      const done = (o: CallOutcome) => {
        if (tick) clearInterval(tick);
        signal.removeEventListener("abort", onAbort);
        if (call.waiter === done) call.waiter = undefined;
        resolve(o);
      };
      const onAbort = () => {
        // The CLI let go of the call: one the client was never told of is forgotten; an announced
        // one stays, so a repeat (or the client's answer) finds it.
        if (!call.announced) this.calls.delete(call.id);
        done(errorOutcome("The call was cancelled."));
      };
      call.waiter = done;
      if (signal.aborted) onAbort();
      else signal.addEventListener("abort", onAbort, { once: true });
    });
  }

  /**
   * Why these tool messages cannot answer the waiting calls (a clear 400), or undefined when they
   * can: every result names a waiting call, and every announced call has a result.
   */
  check(results: readonly ClientToolResult[]): string | undefined {
    const key = resultsKey({ results: [...results] });
    if (key && this.answers.has(key)) return undefined; // a resend: its kept answer serves it
    const waiting = this.announced;
    const list = waiting.map((c) => `${c.id} (${c.name})`).join(", ") || "none";
    for (const r of results) {
      if (!r.id) return `A tool message has no tool_call_id; this conversation waits for the result of ${list}.`;
      if (!this.calls.has(r.id))
        return `tool_call_id "${r.id}" does not match the tool call this conversation is waiting for: ${list}.`;
    }
    for (const c of waiting) {
      if (!results.some((r) => r.id === c.id))
        return `No tool message answers the pending call ${c.id} (${c.name}): send one tool message per tool call of the last response.`;
    }
    return undefined;
  }

  /**
   * Hand the client's results to the calls waiting for them. `then`: text the CLI's model reads
   * right after the last result, in the same tool result (the person's new message, see
   * `client-tool-turns.ts`).
   */
  answer(results: readonly ClientToolResult[], then?: string): void {
    results.forEach((r, i) => {
      const content = [{ type: "text" as const, text: r.text }];
      if (then && i === results.length - 1) content.push({ type: "text", text: then });
      this.settleCall(r.id, { content });
    });
  }

  /** The answer kept for the request with `key` (it was sent before). */
  answerTo(key: string | undefined): RecordedAnswer | undefined {
    return key ? this.answers.get(key) : undefined;
  }

  /** Pass `src` on, keeping it as the answer to the request with `key` (none: not kept). */
  recordAnswer(key: string | undefined, src: AsyncGenerator<BackendEvent>): AsyncGenerator<BackendEvent> {
    if (!key) return src;
    const rec = new RecordedAnswer();
    this.answers.delete(key);
    this.answers.set(key, rec);
    for (const k of this.answers.keys()) {
      if (this.answers.size <= KEPT_ANSWERS) break;
      this.answers.delete(k);
    }
    const now = Date.now();
    for (const a of this.answers.values()) a.expire(now);
    return rec.record(src);
  }

  /** Answer every waiting call with `text` instead of a result from the client (`isError`). */
  answerInstead(text: string): void {
    for (const id of [...this.calls.keys()]) this.settleCall(id, errorOutcome(text));
  }

  /** Answer every waiting call with an error (`why`) and forget them. */
  cancelAll(why: string): void {
    for (const id of [...this.calls.keys()]) this.settleCall(id, errorOutcome(why));
    this.calls.clear();
  }

  private settleCall(id: string, o: CallOutcome): void {
    const c = this.calls.get(id);
    if (!c) return;
    if (c.waiter) {
      this.calls.delete(id);
      c.waiter(o);
    } else c.outcome = o; // the CLI is reconnecting: its repeat gets it
  }

  /**
   * Keep the CLI turn suspended until the client's next request, at most `timeoutSeconds`: then its
   * calls are answered saying so and the turn is ended (`settle`).
   */
  suspend(turn: SuspendedTurn, backend: string, timeoutSeconds: number): void {
    this.lastUsedAt = Date.now();
    const timer = setTimeout(() => {
      const t = this.take();
      if (!t) return;
      this.log.info({ conversation: this.key, timeoutSeconds }, "client tool call timed out: ending the CLI's turn");
      void this.settle(
        t,
        `No result: the client did not run the tool within ${timeoutSeconds} s (no result came back), so the call was given up. Whether the tool ran is unknown.`,
      );
    }, timeoutSeconds * 1000);
    timer.unref?.();
    this.suspended = { turn, backend, timer };
  }

  /**
   * End the suspended turn, if any, for a request that will not resume it: its calls are answered
   * with `why`. Resolves once the turn has ended (also one a timeout is ending now), so the next
   * turn finds the CLI free.
   */
  async endSuspended(why: string): Promise<void> {
    const t = this.take();
    if (t) await this.settle(t, why);
    else await this.ending;
  }

  /** A turn being ended by `settle` (the timeout's, in the background). */
  private ending: Promise<void> | undefined;

  /**
   * Answer the calls a turn waits for with `why`, and let the CLI go on, unseen, until its model has
   * taken that in and the turn ends by itself (at most `SETTLE_MS`; then, or when it calls another
   * client tool, it is interrupted and that call answered with `why` too).
   */
  private settle(t: SuspendedTurn, why: string): Promise<void> {
    const run = async () => {
      this.answerInstead(why);
      try {
        for await (const ev of t.resume(AbortSignal.timeout(SETTLE_MS))) void ev;
      } catch {
        /* the driver failed: its process is handed back by the warm room */
      }
      const again = this.take();
      if (again) await again.abandon().catch(() => undefined);
      this.cancelAll(why);
    };
    const p = run().finally(() => {
      if (this.ending === p) this.ending = undefined;
    });
    this.ending = p;
    return p;
  }

  /**
   * End a turn whose process is gone: interrupt (nothing there reads an answer), answer its calls
   * with an error. A CLI that does not close an interrupted call in its own history
   * (`answerFirst`: Gemini CLI) gets the error first (`ParkedWarmTurn.abandon`).
   */
  private async end(t: SuspendedTurn, why: string): Promise<void> {
    if (t.answerFirst) this.cancelAll(why);
    await t.abandon().catch(() => undefined);
    this.cancelAll(why);
  }

  /** The suspended turn, taken (once): the caller resumes or abandons it. */
  take(): SuspendedTurn | undefined {
    const s = this.suspended;
    if (!s) return undefined;
    clearTimeout(s.timer);
    this.suspended = undefined;
    return s.turn;
  }

  /** The process of a suspended turn ended: if that turn still waits here, end it and fail its calls. */
  gone(turn: SuspendedTurn, why: string): void {
    if (this.suspended?.turn !== turn) return;
    this.take();
    this.log.info({ conversation: this.key }, "the CLI ended while a client tool call was pending");
    void this.end(turn, why);
  }

  get idle(): boolean {
    return !this.suspended && this.calls.size === 0 && !this.listener;
  }
}

export class ClientToolHub {
  /** `http://host:port/mcp/client-tools` once the bridge listens. */
  endpoint: string | undefined;
  private readonly byKey = new Map<string, ToolSession>();
  private readonly byHash = new Map<string, ToolSession>();

  constructor(private readonly log: Logger) {}

  /** The conversation's session (made on first use; its token stays for the conversation). */
  session(key: string): ToolSession {
    let s = this.byKey.get(key);
    if (!s) {
      this.forgetStale();
      s = new ToolSession(key, `cbt${randomBytes(24).toString("base64url")}`, this.log);
      this.byKey.set(key, s);
      this.byHash.set(hash(s.token), s);
    }
    s.lastUsedAt = Date.now();
    return s;
  }

  find(key: string): ToolSession | undefined {
    return this.byKey.get(key);
  }

  /** The session a presented token belongs to. */
  byToken(token: string): ToolSession | undefined {
    return token ? this.byHash.get(hash(token)) : undefined;
  }

  /** Shutdown: every suspended turn ended, every waiting call answered (so no MCP request holds the HTTP server open). */
  async close(): Promise<void> {
    const turns: Promise<void>[] = [];
    for (const s of this.byKey.values()) {
      const t = s.take();
      if (t) turns.push(t.abandon().catch(() => {}));
      s.cancelAll("The bridge is shutting down.");
    }
    await Promise.all(turns);
  }

  private forgetStale(): void {
    const old = Date.now() - FORGET_AFTER_MS;
    for (const [k, s] of this.byKey) {
      if (s.lastUsedAt < old && s.idle) {
        this.byKey.delete(k);
        this.byHash.delete(hash(s.token));
      }
    }
  }
}

function hash(token: string): string {
  return createHash("sha256").update(token).digest("hex");
}
