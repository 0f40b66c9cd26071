/**
 * Warm mode of the OpenCode backend: ONE `opencode serve` per backend (./opencode-server.ts),
 * started on the first warm turn and shared by every conversation — each is an OpenCode session
 * driven through the HTTP API, its answer streamed token by token from the server's event stream.
 *
 * - A turn without a session creates one (`POST /session`, emitting `session`); one with a
 *   session continues it. The prompt goes with `POST /session/:id/prompt_async` and a message id
 *   the bridge chose, with the bootstrap as `system` (OpenCode appends it to its system prompt), the
 *   model as providerID/modelID and the configured agent. The turn ends when the session is idle.
 * - Abort (the turn's signal, or the consumer stopping): `POST /session/:id/abort`, then a short
 *   wait for the session to go idle; the turn ends with `aborted` / `backend_timeout`.
 * - The server ended after `idleSeconds` without a turn; if it dies, the turn it was serving gets
 *   an error (or, when nothing was output yet on a reused server, runs cold), and the next turn
 *   starts a new one. `close()` ends it (bridge shutdown).
 */
import type { Logger } from "pino";
import type { BackendEvent, TurnInput } from "../contract/backend.js";
import type { WarmOptions } from "./options.js";
import { ascendingMessageId, OpencodeTurnEvents } from "./opencode-events.js";
import { OpencodeServer } from "./opencode-server.js";
import { registerWarmSource, type WarmProcessInfo, type WarmSource } from "./pool.js";
import { Inbox } from "./process.js";
import { cancelledError, diedMidTurn } from "./turn.js";

const LABEL = "opencode serve";
/** After a `session.error`, how long the session may take to go idle (OpenCode may try a compaction). */
const ERROR_SETTLE_MS = 5000;
/** How long turns run cold after `opencode serve` failed to start. */
const COLD_AFTER_FAILURE_MS = 10 * 60_000;

export interface OpencodeWarmOptions {
  backend: string;
  warm: WarmOptions;
  killGraceSeconds: number;
  logger: Logger;
  /** OpenCode agent for every prompt (`agent` option). */
  agent?: string;
}

/** What a warm turn needs from the backend. */
export interface OpencodeWarmTurn {
  bin: string;
  env: NodeJS.ProcessEnv;
  /** The server's own directory (started there). */
  serverCwd: string;
  /** This turn's project directory (`?directory=`). */
  cwd: string;
  /** The same turn cold (`opencode run`). */
  cold: () => AsyncGenerator<BackendEvent>;
  /** Told the server's pid (the backend's `lastPid`). */
  onPid?: (pid: number | undefined) => void;
}

export class OpencodeWarm implements WarmSource {
  private server: OpencodeServer | undefined;
  private starting: Promise<OpencodeServer> | undefined;
  private active = 0;
  private turns = 0;
  private lastUsedAt = Date.now();
  private idleTimer: NodeJS.Timeout | undefined;
  private closed = false;
  /** After a failed start, turns run cold until then (epoch ms). */
  private coldUntil = 0;
  /**
   * A session made ahead for the next turn without one (a stateless turn, a new conversation), per
   * server and project directory: that turn skips the `POST /session` round trip (~20 ms).
   */
  private readonly spares = new WeakMap<OpencodeServer, Map<string, Promise<string | undefined>>>();
  private readonly unregister: () => void;

  constructor(private readonly o: OpencodeWarmOptions) {
    this.unregister = registerWarmSource(this);
  }

  list(): WarmProcessInfo[] {
    const s = this.server;
    if (!s || !s.proc.running) return [];
    return [{ backend: this.o.backend, pid: s.pid, busy: this.active > 0, turns: this.turns, startedAt: s.startedAt, lastUsedAt: this.lastUsedAt }];
  }

  /** The running server's pid (tests, diagnostics). */
  get pid(): number | undefined {
    return this.server?.proc.running ? this.server.pid : undefined;
  }

  async *run(turn: TurnInput, t: OpencodeWarmTurn): AsyncGenerator<BackendEvent> {
    if (this.closed || Date.now() < this.coldUntil) {
      yield* t.cold();
      return;
    }
    let lost = false;
    let unstartable = false;
    this.active++;
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.idleTimer = undefined;
    try {
      let got: { server: OpencodeServer; fresh: boolean } | undefined;
      try {
        // A turn cancelled while the server starts stops waiting; the start goes on for the next one.
        got = await untilAborted(this.acquire(t), turn.signal);
      } catch (err) {
        if (this.closed) {
          yield { type: "error", error: { code: "backend_unavailable", message: `cannot start ${LABEL}: ${(err as Error).message}`, status: 503 } };
          return;
        }
        // Not a server this binary can run (an old version, a wrapper script...): cold turns for a while.
        this.o.logger.warn({ backend: this.o.backend, err: (err as Error).message }, "opencode serve did not start; running turns cold for a while");
        this.coldUntil = Date.now() + COLD_AFTER_FAILURE_MS;
        unstartable = true;
      }
      if (!unstartable) {
        if (!got || turn.signal.aborted) {
          yield cancelledError(turn.signal, "opencode");
          return;
        }
        t.onPid?.(got.server.pid);
        const spare = turn.session.backendSessionId ? undefined : await this.takeSpare(got.server, t.cwd);
        const end = yield* driveTurn(got.server, turn, t.cwd, this.o, spare);
        if (!turn.session.backendSessionId && !end.lost) this.makeSpare(got.server, t.cwd);
        if (end.lost) {
          if (got.fresh) yield diedMidTurn(LABEL, describeEnd(got.server));
          else lost = true;
        }
      }
    } finally {
      this.active--;
      this.turns++;
      this.lastUsedAt = Date.now();
      this.armIdle();
    }
    if (unstartable) yield* t.cold();
    else if (lost) {
      this.o.logger.info({ backend: this.o.backend }, "opencode serve ended before the turn produced anything; running it cold");
      yield* t.cold();
    }
  }

  /** The running server, or a new one (started once however many turns wait for it). */
  private async acquire(t: OpencodeWarmTurn): Promise<{ server: OpencodeServer; fresh: boolean }> {
    for (let round = 0; round < 3; round++) {
      const s = this.server;
      if (s?.usable) return { server: s, fresh: false };
      if (s) {
        this.server = undefined;
        await s.close();
      }
      if (!this.starting) {
        const starting = OpencodeServer.start({ bin: t.bin, env: t.env, cwd: t.serverCwd, killGraceMs: this.o.killGraceSeconds * 1000, logger: this.o.logger }).then((server) => {
          this.o.logger.debug({ pid: server.pid, backend: this.o.backend }, "opencode serve started");
          this.turns = 0;
          void server.ended.then(() => {
            if (this.server === server) this.server = undefined;
          });
          return server;
        });
        this.starting = starting;
        void starting.then(
          (server) => {
            if (this.starting === starting) this.starting = undefined;
            if (this.closed) void server.close();
            else this.server = server;
          },
          () => {
            if (this.starting === starting) this.starting = undefined;
          },
        );
        const server = await starting;
        if (this.closed) throw new Error("the bridge is shutting down");
        return { server, fresh: true };
      }
      await this.starting;
    }
    throw new Error(`${LABEL} did not stay up`);
  }

  private async takeSpare(server: OpencodeServer, cwd: string): Promise<string | undefined> {
    const byCwd = this.spares.get(server);
    const spare = byCwd?.get(cwd);
    byCwd?.delete(cwd);
    return spare ? await spare : undefined;
  }

  /** Make the next session for `cwd` in the background (failures only mean the next turn makes its own). */
  private makeSpare(server: OpencodeServer, cwd: string): void {
    if (!server.usable || this.closed) return;
    let byCwd = this.spares.get(server);
    if (!byCwd) this.spares.set(server, (byCwd = new Map()));
    if (byCwd.has(cwd)) return;
    byCwd.set(
      cwd,
      newSession(server, cwd).then(
        (id) => id,
        () => undefined,
      ),
    );
  }

  private armIdle(): void {
    if (this.active > 0 || this.closed || !this.server) return;
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.idleTimer = setTimeout(() => {
      this.idleTimer = undefined;
      const s = this.server;
      if (this.active > 0 || !s) return;
      this.o.logger.debug({ pid: s.pid, backend: this.o.backend }, "opencode serve idle too long; ending it");
      this.server = undefined;
      void s.close();
    }, this.o.warm.idleSeconds * 1000);
    this.idleTimer.unref();
  }

  /** End the server (bridge shutdown). Turns still running see it end. */
  async close(): Promise<void> {
    this.closed = true;
    this.unregister();
    if (this.idleTimer) clearTimeout(this.idleTimer);
    const starting = this.starting;
    const s = this.server;
    this.server = undefined;
    await Promise.all([s?.close(), starting?.then((x) => x.close(), () => undefined)]);
  }
}

/** A new session for `cwd`: its id, or undefined when the server did not make one. */
async function newSession(server: OpencodeServer, cwd: string): Promise<string | undefined> {
  // A title of our own spares a title-generating call to the model.
  const reply = await server.request("POST", "/session", { query: { directory: cwd }, body: { title: "clawbridge" } });
  const id = (reply.body as { id?: unknown } | undefined)?.id;
  return reply.status === 200 && typeof id === "string" ? id : undefined;
}

/** `p`, or undefined once `signal` aborts (whichever comes first). */
function untilAborted<T>(p: Promise<T>, signal: AbortSignal): Promise<T | undefined> {
  if (signal.aborted) {
    p.catch(() => undefined);
    return Promise.resolve(undefined);
  }
  return new Promise<T | undefined>((resolve, reject) => {
    const onAbort = () => {
      p.catch(() => undefined);
      resolve(undefined);
    };
    signal.addEventListener("abort", onAbort, { once: true });
    p.then(
      (v) => {
        signal.removeEventListener("abort", onAbort);
        resolve(v);
      },
      (err: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(err as Error);
      },
    );
  });
}

function describeEnd(server: OpencodeServer): string {
  const end = server.end;
  if (!end) return "";
  return end.signal ? `killed by ${end.signal}` : `exit ${end.code}`;
}

/** `provider/model` → the API's model object (`undefined`: the server's default). */
function modelOf(model: string): { providerID: string; modelID: string } | undefined {
  const i = model.indexOf("/");
  if (i <= 0 || i === model.length - 1) return undefined;
  return { providerID: model.slice(0, i), modelID: model.slice(i + 1) };
}

function apiMessage(reply: { status: number; body: unknown; text: string }): string {
  const b = reply.body as { data?: { message?: string }; message?: string; error?: unknown } | undefined;
  const msg = b?.data?.message ?? b?.message ?? (typeof b?.error === "string" ? b.error : undefined) ?? reply.text.slice(0, 300);
  return `${reply.status}${msg ? ` ${msg}` : ""}`;
}

/**
 * One turn on the server: session, prompt, events until idle. Returns `lost` when the server
 * ended before the turn produced anything (the caller may run it cold).
 */
async function* driveTurn(server: OpencodeServer, turn: TurnInput, cwd: string, o: OpencodeWarmOptions, spare?: string): AsyncGenerator<BackendEvent, { lost: boolean }> {
  const query = { directory: cwd };
  const graceMs = o.warm.interruptGraceSeconds * 1000;
  let sessionId = turn.session.backendSessionId;
  if (!sessionId && spare) {
    sessionId = spare;
    yield { type: "session", id: spare };
  }
  let finished = false;
  let prompted = false;
  const inbox = new Inbox();
  let stop: (() => void) | undefined;
  try {
    if (!sessionId) {
      let reply;
      try {
        // A title of our own spares a title-generating call to the model.
        reply = await server.request("POST", "/session", { query, body: { title: "clawbridge" } });
      } catch (err) {
        if (!server.usable) return { lost: true };
        finished = true;
        yield { type: "error", error: { code: "backend_failed", message: `${LABEL}: cannot create a session: ${(err as Error).message}`, status: 502, retryable: true } };
        return { lost: false };
      }
      const id = (reply.body as { id?: unknown } | undefined)?.id;
      if (reply.status !== 200 || typeof id !== "string") {
        finished = true;
        yield { type: "error", error: { code: "backend_failed", message: `${LABEL}: cannot create a session: ${apiMessage(reply)}`, status: 502 } };
        return { lost: false };
      }
      sessionId = id;
      yield { type: "session", id };
    }
    stop = server.listen(sessionId, inbox.push);
    // An earlier turn of this session that did not wind down (aborted, the server slow to stop).
    if (server.busy(sessionId)) await stopSession(server, sessionId, cwd, inbox, undefined, graceMs);
    const ev = new OpencodeTurnEvents(ascendingMessageId());
    const model = modelOf(turn.model);
    const body = {
      messageID: ev.messageId,
      parts: [{ type: "text", text: turn.prompt.text }],
      ...(model ? { model } : {}),
      ...(o.agent ? { agent: o.agent } : {}),
      ...(turn.prompt.system ? { system: turn.prompt.system } : {}),
    };
    let reply;
    try {
      reply = await server.request("POST", `/session/${encodeURIComponent(sessionId)}/prompt_async`, { query, body });
    } catch (err) {
      if (!server.usable) return { lost: true };
      finished = true;
      yield { type: "error", error: { code: "backend_failed", message: `${LABEL}: the prompt was not taken: ${(err as Error).message}`, status: 502, retryable: true } };
      return { lost: false };
    }
    if (reply.status === 404) {
      finished = true;
      yield { type: "error", error: { code: "session_not_found", message: `opencode has no session ${sessionId}`, status: 404 } };
      return { lost: false };
    }
    if (reply.status < 200 || reply.status >= 300) {
      finished = true;
      yield { type: "error", error: { code: "backend_failed", message: `${LABEL}: the prompt was not taken: ${apiMessage(reply)}`, status: 502 } };
      return { lost: false };
    }
    prompted = true;
    let errorDeadline: number | undefined;
    for (;;) {
      const wait = errorDeadline === undefined ? undefined : Math.max(0, errorDeadline - Date.now());
      const m = await inbox.next(turn.signal, wait);
      if (m === "aborted") {
        await stopSession(server, sessionId, cwd, inbox, ev, graceMs);
        finished = true;
        yield cancelledError(turn.signal, "opencode");
        return { lost: false };
      }
      if (m === "timeout") {
        // The error is known; the session did not settle: stop it and report the error.
        await stopSession(server, sessionId, cwd, inbox, ev, graceMs);
        finished = true;
        yield* ev.finishEvents();
        return { lost: false };
      }
      if (m.kind === "end") {
        finished = true;
        if (ev.produced === 0 && !ev.error) return { lost: true };
        if (ev.error) yield* ev.finishEvents();
        else yield diedMidTurn(LABEL, m.end.signal ? `killed by ${m.end.signal}` : `exit ${m.end.code}`);
        return { lost: false };
      }
      for (const out of ev.map(m.message)) yield out;
      if (ev.idle) {
        finished = true;
        if (ev.error?.code === "aborted" && !turn.signal.aborted) {
          yield { type: "error", error: ev.error };
          return { lost: false };
        }
        yield* ev.finishEvents();
        return { lost: false };
      }
      if (ev.error && errorDeadline === undefined) errorDeadline = Date.now() + ERROR_SETTLE_MS;
    }
  } finally {
    // The consumer stopped early: the session must not keep working for no one.
    if (!finished && prompted && sessionId && server.usable) await stopSession(server, sessionId, cwd, inbox, undefined, graceMs);
    stop?.();
  }
}

/** Abort the session's prompt and wait (bounded) until it is idle; its busy state tells the next turn otherwise. */
async function stopSession(server: OpencodeServer, sessionId: string, cwd: string, inbox: Inbox, ev: OpencodeTurnEvents | undefined, graceMs: number): Promise<void> {
  if (!(await server.abort(sessionId, cwd))) return;
  const until = Date.now() + Math.max(graceMs, 500);
  for (let i = 0; i < 10_000 && server.busy(sessionId); i++) {
    const left = until - Date.now();
    if (left <= 0) return;
    const m = await inbox.next(undefined, left);
    if (m === "timeout" || m === "aborted" || m.kind === "end") return;
    ev?.map(m.message);
  }
}
