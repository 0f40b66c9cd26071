/**
 * Warm Codex: one `codex app-server` process (JSON-RPC over stdio, JSON lines) per conversation,
 * serving turn after turn of ONE thread. Observed with codex 0.169.0 (docs/CLI_FORMATS.md):
 *
 * - `initialize` {clientInfo, capabilities} → {userAgent, codexHome…} (~0.3 s after spawn), then
 *   the `initialized` notification.
 * - `thread/start` {cwd, sandbox, approvalPolicy, model?, baseInstructions?} → {thread: {id}} or
 *   `thread/resume` {threadId, …the same} (an unknown id: error -32600 "no rollout found for thread
 *   id …"). The id is the one `codex exec resume` takes: warm and cold turns alternate on a thread.
 *   `baseInstructions` replaces codex's own base instructions (the first developer message of every
 *   model request), as `model_instructions_file` does for `codex exec`; a process serves one
 *   bootstrap, a changed one gets a new process that resumes the thread with it.
 * - `turn/start` {threadId, input: [{type: "text", text}]} → {turn: {id}}; the turn streams as
 *   notifications (`codex-events.ts`) and ends with `turn/completed`.
 * - `turn/interrupt` {threadId, turnId} → {} and `turn/completed` {status: "interrupted"} within
 *   ~30 ms. Approval requests are declined (the bridge's policy is `never`; nobody can answer).
 * - Closing stdin ends the server (~40 ms).
 */
import type { BackendEvent } from "../contract/backend.js";
import type { WarmLease, WarmPool, WarmWorker } from "./pool.js";
import { Inbox, WarmProcess, type WarmMessage, type WarmProcessSpec } from "./process.js";
import { cancelledError, diedMidTurn, runWarmTurn, type WarmTurnEnd } from "./turn.js";
import { classify, JsonRpcAborted, JsonRpcClient, JsonRpcClosed, JsonRpcError, type JsonRpcIncoming } from "./jsonrpc.js";
import { CodexTurnMapper, type CodexErrorOf } from "./codex-events.js";

/** How a conversation's thread is set up: what makes a process fit a turn. */
export interface CodexThreadSettings {
  cwd: string;
  sandbox: string;
  approvalPolicy: string;
  /** Absent: the model of codex's config. */
  model?: string;
  /** The bootstrap, replacing codex's base instructions. Absent: codex's own. */
  baseInstructions?: string;
}

export interface CodexAppServerSpec extends Omit<WarmProcessSpec, "onEnd"> {
  /** `initialize`'s clientInfo (codex derives the `originator` header and User-Agent from it). */
  clientInfo: { name: string; title: string | null; version: string };
  /** Limit for `initialize` and the thread and turn requests. */
  requestTimeoutMs: number;
}

/** The stderr lines worth showing (no log noise). */
function tail(stderr: string): string {
  return stderr
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l && !/bubblewrap|PATH aliases/.test(l))
    .slice(-3)
    .join(" | ")
    .slice(0, 400);
}

export class CodexAppServer implements WarmWorker {
  readonly proc: WarmProcess;
  readonly rpc: JsonRpcClient;
  /** The thread it serves, once opened. */
  threadId: string | undefined;
  private sink: ((m: WarmMessage) => void) | undefined;

  private constructor(
    readonly spec: CodexAppServerSpec,
    /** What it was started for (compared by `fits`). */
    readonly settings: CodexThreadSettings,
  ) {
    this.proc = new WarmProcess(spec);
    this.rpc = new JsonRpcClient((m) => this.proc.send(m), spec.requestTimeoutMs);
    this.proc.listen(this.route);
  }

  /** Spawn `codex app-server` and initialize it. Rejects (after ending it) when it does not answer. */
  static async start(spec: CodexAppServerSpec, settings: CodexThreadSettings): Promise<CodexAppServer> {
    const w = new CodexAppServer(spec, settings);
    try {
      await w.rpc.request("initialize", { clientInfo: spec.clientInfo, capabilities: null });
      w.rpc.notify("initialized");
    } catch (err) {
      await w.kill();
      const why = tail(w.proc.end?.stderr ?? "");
      throw new Error(`${spec.label} app-server did not start: ${(err as Error).message}${why ? `: ${why}` : ""}`);
    }
    return w;
  }

  get pid(): number | undefined {
    return this.proc.pid;
  }

  get usable(): boolean {
    return this.proc.usable;
  }

  get ended(): Promise<void> {
    return this.proc.ended;
  }

  close(): Promise<void> {
    return this.proc.close();
  }

  kill(): Promise<void> {
    return this.proc.kill();
  }

  /** Hand this turn the notifications (and the end); undefined: drop them between turns. */
  attach(sink: ((m: WarmMessage) => void) | undefined): void {
    this.sink = sink;
    if (sink && this.proc.end) sink({ kind: "end", end: this.proc.end });
  }

  private route = (m: WarmMessage): void => {
    if (m.kind === "end") {
      this.rpc.close(`${this.spec.label} exited (${m.end.code ?? m.end.signal ?? m.end.reason})`);
      this.sink?.(m);
      return;
    }
    const c = classify(m.message);
    if (c.kind === "response") {
      if (!this.rpc.handleResponse(c)) this.proc.log.debug({ id: c.id }, "codex answered a request nobody waits for");
    } else if (c.kind === "request") this.answer(c);
    else if (c.kind === "notification") this.sink?.(m);
  };

  /** Requests from the server: approvals are declined (nobody can answer), anything else refused. */
  private answer(r: Extract<JsonRpcIncoming, { kind: "request" }>): void {
    this.proc.log.debug({ method: r.method }, "codex asked the client; declining");
    switch (r.method) {
      case "item/commandExecution/requestApproval":
      case "item/fileChange/requestApproval":
        this.rpc.respond(r.id, { decision: "decline" });
        return;
      case "execCommandApproval":
      case "applyPatchApproval":
        this.rpc.respond(r.id, { decision: { denied: { rejection: "the bridge approves nothing (approval policy never)" } } });
        return;
      case "mcpServer/elicitation/request":
        this.rpc.respond(r.id, { action: "decline", content: null, _meta: null });
        return;
      default:
        this.rpc.respondError(r.id, -32601, `the bridge does not answer ${r.method}`);
    }
  }

  /** `thread/start`, or `thread/resume` of `resume`; sets `threadId`. */
  async openThread(resume: string | undefined, signal: AbortSignal): Promise<string> {
    const s = this.settings;
    const params = {
      cwd: s.cwd,
      sandbox: s.sandbox,
      approvalPolicy: s.approvalPolicy,
      ...(s.model ? { model: s.model } : {}),
      ...(s.baseInstructions ? { baseInstructions: s.baseInstructions } : {}),
    };
    const r = await this.rpc.request<{ thread?: { id?: unknown } }>(resume ? "thread/resume" : "thread/start", resume ? { threadId: resume, ...params, excludeTurns: true } : params, { signal });
    const id = r?.thread?.id;
    if (typeof id !== "string" || !id) throw new Error(`${resume ? "thread/resume" : "thread/start"} answered without a thread id`);
    this.threadId = id;
    return id;
  }
}

/** What one warm Codex turn needs from the backend. */
export interface CodexWarmTurnSpec {
  pool: WarmPool<CodexAppServer>;
  /** The conversation key. */
  key: string;
  signal: AbortSignal;
  /** The thread to resume (`turn.session.backendSessionId`). */
  resume: string | undefined;
  prompt: string;
  settings: CodexThreadSettings;
  server: CodexAppServerSpec;
  interruptGraceMs: number;
  /** codex's error text → a bridge error (the cold path's classification). */
  errorOf: CodexErrorOf;
  /** How codex words a thread it cannot find. */
  sessionNotFound: RegExp;
  /** The same turn with `codex exec` (no worker free, or a reused one lost before any output). */
  cold(): AsyncGenerator<BackendEvent>;
  onWorker?(worker: CodexAppServer): void;
}

const same = (a: CodexThreadSettings, b: CodexThreadSettings) =>
  a.cwd === b.cwd && a.sandbox === b.sandbox && a.approvalPolicy === b.approvalPolicy && a.model === b.model && a.baseInstructions === b.baseInstructions;

/** One Codex turn on the conversation's warm app-server (started or reused), else cold. */
export function runCodexWarmTurn(spec: CodexWarmTurnSpec): AsyncGenerator<BackendEvent> {
  return runWarmTurn<CodexAppServer>({
    pool: spec.pool,
    key: spec.key,
    signal: spec.signal,
    fits: (w) => w.threadId !== undefined && w.threadId === spec.resume && same(w.settings, spec.settings),
    start: () => CodexAppServer.start(spec.server, spec.settings),
    drive: (lease) => driveCodexTurn(lease, spec),
    cold: () => spec.cold(),
    onWorker: spec.onWorker,
  });
}

/**
 * Stop the running turn: `turn/interrupt` (once its id is known) and wait for its `turn/completed`
 * within the grace; a CLI that does not obey in time is killed. True when it obeyed.
 */
async function stopTurn(w: CodexAppServer, mapper: CodexTurnMapper | undefined, inbox: Inbox, graceMs: number): Promise<boolean> {
  if (!w.usable) return false;
  // No turn started yet (the consumer stopped at the session event): nothing to stop.
  if (!mapper) return true;
  const until = Date.now() + graceMs;
  let asked = false;
  while (!mapper.finished) {
    if (!asked && mapper.turnId && w.threadId) {
      asked = true;
      w.rpc.request("turn/interrupt", { threadId: w.threadId, turnId: mapper.turnId }, { timeoutMs: Math.max(1, graceMs) }).catch(() => undefined);
    }
    const left = until - Date.now();
    if (left <= 0) break;
    const m = await inbox.next(undefined, asked ? left : Math.min(left, 50));
    if (m === "timeout" || m === "aborted") continue;
    if (m.kind === "end") return false;
    mapper.onNotification(String(m.message.method), m.message.params);
  }
  if (mapper.finished) return true;
  w.proc.log.debug({ graceMs }, "codex did not stop its turn in time; killing it");
  await w.kill();
  return false;
}

/** Run one turn on the leased worker: thread (first turn), `turn/start`, notifications → events. */
export async function* driveCodexTurn(lease: WarmLease<CodexAppServer>, spec: CodexWarmTurnSpec): AsyncGenerator<BackendEvent, WarmTurnEnd> {
  const w = lease.worker;
  const label = spec.server.label;
  const inbox = new Inbox();
  w.attach(inbox.push);
  w.proc.markTurn();
  let mapper: CodexTurnMapper | undefined;
  let ended = false;
  // A reused worker confirms its thread only with the first output: a process lost before any
  // output may then be replaced by a cold run of the same turn (`WarmTurnEnd.lost`).
  let sessionDue = false;
  const stderr = () => tail(w.proc.stderrOfTurn());
  try {
    if (!w.threadId) {
      try {
        await w.openThread(spec.resume, spec.signal);
      } catch (err) {
        ended = true;
        if (spec.signal.aborted || err instanceof JsonRpcAborted) {
          yield cancelledError(spec.signal, label);
        } else if (err instanceof JsonRpcError && spec.resume && spec.sessionNotFound.test(err.message)) {
          yield { type: "error", error: { code: "session_not_found", message: `${label}: ${err.message}`, status: 404 } };
        } else if (err instanceof JsonRpcError && /already has an active writer/i.test(err.message)) {
          // Another codex process (a cold `codex exec` of another backend, another bridge) has the thread open.
          yield { type: "error", error: { code: "backend_failed", message: `${label}: ${err.message}`, status: 409, retryable: true } };
        } else if (err instanceof JsonRpcClosed) {
          yield { type: "error", error: { code: "backend_failed", message: `${label} ended before the thread was opened${stderr() ? `: ${stderr()}` : ""}`, status: 502, retryable: true } };
        } else {
          yield { type: "error", error: { code: "backend_failed", message: `${label}: ${(err as Error).message}`, status: 502 } };
        }
        return { keep: false };
      }
      yield { type: "session", id: w.threadId! };
    } else sessionDue = true;
    const m = new CodexTurnMapper(label, w.threadId!, spec.errorOf);
    mapper = m;
    const started = await w.rpc
      .request<{ turn?: { id?: unknown } }>("turn/start", { threadId: w.threadId, input: [{ type: "text", text: spec.prompt, text_elements: [] }] }, { signal: spec.signal })
      .then((r) => {
        if (typeof r?.turn?.id === "string") m.turnId ??= r.turn.id;
        return undefined;
      })
      .catch((err: Error) => err);
    if (started instanceof JsonRpcError || (started && !(started instanceof JsonRpcAborted) && !(started instanceof JsonRpcClosed))) {
      ended = true;
      yield { type: "error", error: { code: "backend_failed", message: `${label}: turn/start failed: ${started.message}`, status: 502 } };
      return { keep: started instanceof JsonRpcError };
    }
    for (let n = 0; ; n++) {
      const next = await inbox.next(spec.signal);
      if (next === "aborted" || next === "timeout") break;
      if (next.kind === "end") {
        ended = true;
        if (!m.produced && !lease.fresh) return { keep: false, lost: true };
        if (sessionDue) yield { type: "session", id: w.threadId! };
        yield m.pendingError() ?? diedMidTurn(label, [next.end.signal ? `killed by ${next.end.signal}` : `exit ${next.end.code}`, stderr()].filter(Boolean).join(": "));
        return { keep: false };
      }
      const evs = m.onNotification(String(next.message.method), next.message.params);
      if (m.finished) evs.push(...m.final());
      for (const ev of evs) {
        if (sessionDue) {
          sessionDue = false;
          yield { type: "session", id: w.threadId! };
        }
        if (ev.type === "done" || ev.type === "error") ended = true;
        yield ev;
      }
      if (ended) {
        if (m.notes.length) w.proc.log.debug({ notes: m.notes.slice(0, 10) }, "codex notes of the turn");
        return { keep: true };
      }
      if (n > 10_000_000) break;
    }
    // Cancelled (client gone, shutdown, the turn's deadline).
    const obeyed = await stopTurn(w, m, inbox, spec.interruptGraceMs);
    ended = true;
    yield cancelledError(spec.signal, label);
    return { keep: obeyed };
  } finally {
    // The consumer stopped reading early (or something threw): stop the CLI's turn too.
    if (!ended) await stopTurn(w, mapper, inbox, spec.interruptGraceMs);
    w.attach(undefined);
  }
}
