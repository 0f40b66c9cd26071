/**
 * Warm mode of the OpenCode backend: which `opencode serve` (./server.ts) a turn runs on,
 * and that server's life. ONE per backend, started on the first warm turn and shared by every
 * conversation — each is an OpenCode session driven through the HTTP API, its answer streamed
 * token by token from the server's event stream (one turn on a server: ./serve-turn.ts).
 *
 * - A turn without a session creates one (`POST /session`, emitting `session`); one with a
 *   session continues it. In the shared directory the next such turn's session is made ahead, when
 *   a turn's session goes idle: a later stateless turn asks the server one thing, its prompt. The
 *   prompt goes with `POST /session/:id/prompt_async` and a message id the bridge chose, with the
 *   bootstrap as `system` (OpenCode appends it to its system prompt), the model as
 *   providerID/modelID and the configured agent. The turn ends when the session is idle.
 * - Abort (the turn's signal, or the consumer stopping): `POST /session/:id/abort`, then a short
 *   wait for the session to go idle; the turn ends with `aborted` / `backend_timeout`.
 * - The server ended after `idleSeconds` without a turn; if it dies, the turn it was serving gets
 *   an error (or, when nothing was output yet on a reused server, runs cold), and the next turn
 *   starts a new one. `close()` ends it (bridge shutdown).
 *
 * Resume turns (the pipeline keeps the conversation's OpenCode session) run on a server of the
 * conversation's own instead, from a warm pool (`WarmPool`: one per conversation, at most
 * `maxProcesses`, reaped after `idleSeconds`, `runWarmTurn`), for two reasons: OpenCode keeps an
 * instance per project directory for as long as the server runs (~60 MB each, observed with 1.18),
 * and every resumed conversation has a directory of its own; and an MCP server belongs to a whole
 * instance, while the client's tools (`tools.mode: bridge`) carry the conversation's own token.
 * Those tools are added through the API (`POST /mcp?directory=`: `type: remote`, the bridge's
 * endpoint, the token as a header, `oauth: false`) — never through a config file or the
 * environment — and again when the tools change; OpenCode names them `openclaw_<tool>`. A call of
 * one reaches the bridge's endpoint and is announced as a `tool_call`; once the reply's calls are
 * in, the turn parks (`done` with `tool_calls`): the session stays busy on the calls until the
 * client's next request answers them (the turn goes on into that response) or the turn is
 * abandoned (a new message, the pending timeout: the session's prompt is aborted). The sessions
 * are OpenCode's own (its database under XDG_DATA_HOME): a conversation whose server ended goes on
 * in the same session on the next one.
 */
import { createHash } from "node:crypto";
import type { Logger } from "pino";
import type { ToolSession } from "../client-tools/sessions.js";
import {
  CLIENT_TOOLS_SERVER,
  toolsFingerprint,
  type ClientToolDef,
  type ClientToolsTurn,
} from "../client-tools/types.js";
import type { BackendEvent, TurnInput } from "../contract/backend.js";
import { parkIn, warmTurnWithClientTools } from "../warm/client-tool-turns.js";
import type { WarmOptions } from "../warm/options.js";
import { OpencodeServer } from "./server.js";
import { driveTurn, LABEL } from "./serve-turn.js";
import { WarmPool, type WarmLease, type WarmWorker } from "../warm/pool.js";
import { registerWarmSource, type WarmProcessInfo, type WarmSource } from "../warm/registry.js";
import { cancelledError, diedMidTurn, runWarmTurn, type WarmTurnControl, type WarmTurnEnd } from "../warm/warm-turn.js";

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
  /** The client's tools (a resume turn of a model in `tools.mode: bridge`): the conversation's session and its MCP entry. */
  tools?: OpencodeClientTools;
}

/** The client's tools of a turn, as the backend found them (`warmClientTools`). */
export interface OpencodeClientTools {
  spec: ClientToolsTurn;
  session: ToolSession;
  /** The bridge's endpoint, the conversation's token as a header, and how long OpenCode lets one call run. */
  entry: { url: string; headers: Record<string, string>; timeout: number };
}

/** OpenCode's name of a tool of an MCP server (`<server>_<tool>`, each with characters outside `[A-Za-z0-9_-]` made `_`). */
export function opencodeMcpToolName(server: string, tool: string): string {
  const clean = (x: string) => x.replace(/[^a-zA-Z0-9_-]/g, "_");
  return `${clean(server)}_${clean(tool)}`;
}

/** A conversation's own `opencode serve` (resume turns), in the warm pool. */
class OpencodeWorker implements WarmWorker {
  readonly ended: Promise<void>;

  constructor(
    readonly server: OpencodeServer,
    /** What it was started with (binary, directory): `fits` compares it. */
    readonly fingerprint: string,
  ) {
    this.ended = server.ended.then(() => undefined);
  }

  get pid(): number | undefined {
    return this.server.pid;
  }

  get usable(): boolean {
    return this.server.usable;
  }

  close(): Promise<void> {
    return this.server.close();
  }
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
   * A session made ahead for the next turn without one (a stateless turn, a side call) in the shared
   * directory, per server: made when a turn's session goes idle (while its answer's end reaches the
   * client), so the next turn skips the `POST /session` round trip on its path (~10-15 ms of a
   * later turn's first token, bench/suites/opencode-turn.ts).
   */
  private readonly spares = new WeakMap<OpencodeServer, Map<string, Promise<string | undefined>>>();
  private readonly unregister: () => void;
  /** The conversations' own servers (resume turns), made on the first such turn. */
  private pool: WarmPool<OpencodeWorker> | undefined;

  constructor(private readonly o: OpencodeWarmOptions) {
    this.unregister = registerWarmSource(this);
  }

  list(): WarmProcessInfo[] {
    const s = this.server;
    if (!s?.proc.running) return [];
    return [
      {
        backend: this.o.backend,
        pid: s.pid,
        busy: this.active > 0,
        turns: this.turns,
        startedAt: s.startedAt,
        lastUsedAt: this.lastUsedAt,
      },
    ];
  }

  /** The running server's pid (tests, diagnostics). */
  get pid(): number | undefined {
    return this.server?.proc.running ? this.server.pid : undefined;
  }

  /** One warm turn: a resume turn on the conversation's own server, any other on the shared one. */
  run(turn: TurnInput, t: OpencodeWarmTurn): AsyncGenerator<BackendEvent> {
    if (!turn.session.resume) return this.shared(turn, t);
    const ct = t.tools;
    const spec = turn.clientTools;
    if (!ct || !spec) return this.conversationTurn(turn, t, undefined, turn.prompt.text);
    return warmTurnWithClientTools({
      session: ct.session,
      spec,
      backend: this.o.backend,
      signal: turn.signal,
      continuing: !!turn.session.backendSessionId,
      text: turn.prompt.text,
      fresh: (text) => this.conversationTurn(turn, t, ct, text ?? turn.prompt.text),
    });
  }

  /** A resume turn on the conversation's own server (started for it, or the one it had if that fits). */
  private conversationTurn(
    turn: TurnInput,
    t: OpencodeWarmTurn,
    ct: OpencodeClientTools | undefined,
    text: string,
  ): AsyncGenerator<BackendEvent> {
    if (this.closed || Date.now() < this.coldUntil) return t.cold();
    const pool = (this.pool ??= new WarmPool<OpencodeWorker>(this.o.backend, this.o.warm, this.o.logger));
    // Model, bootstrap and agent go with each prompt, the client's tools through the API: only the
    // binary and the directory are the process's own.
    const fingerprint = createHash("sha256")
      .update(JSON.stringify([t.bin, t.cwd]))
      .digest("hex");
    return runWarmTurn<OpencodeWorker>({
      pool,
      key: turn.session.key,
      signal: turn.signal,
      fits: (w) => w.fingerprint === fingerprint,
      start: async () => {
        let server: OpencodeServer;
        try {
          server = await OpencodeServer.start({
            bin: t.bin,
            env: t.env,
            cwd: t.cwd,
            killGraceMs: this.o.killGraceSeconds * 1000,
            logger: this.o.logger,
          });
        } catch (err) {
          // This turn fails (503); the next ones run cold for a while, as on the shared server.
          if (!this.closed) {
            this.o.logger.warn(
              { err: (err as Error).message },
              "opencode serve did not start; running turns cold for a while",
            );
            this.coldUntil = Date.now() + COLD_AFTER_FAILURE_MS;
          }
          throw err;
        }
        this.o.logger.debug({ pid: server.pid }, "opencode serve started for a conversation");
        return new OpencodeWorker(server, fingerprint);
      },
      drive: (lease, ctl) => conversationDrive(lease, turn, t.cwd, this.o, ct, text, ctl),
      cold: t.cold,
      onWorker: (w) => t.onPid?.(w.pid),
      ...(ct ? { onPark: parkIn<OpencodeWorker>(ct.session, this.o.backend, ct.spec.pendingTimeoutSeconds) } : {}),
    });
  }

  /** A turn on the backend's shared server (stateless turns, side calls, systems' steps). */
  private async *shared(turn: TurnInput, t: OpencodeWarmTurn): AsyncGenerator<BackendEvent> {
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
          yield {
            type: "error",
            error: {
              code: "backend_unavailable",
              message: `cannot start ${LABEL}: ${(err as Error).message}`,
              status: 503,
            },
          };
          return;
        }
        // Not a server this binary can run (an old version, a wrapper script...): cold turns for a while.
        this.o.logger.warn(
          { err: (err as Error).message },
          "opencode serve did not start; running turns cold for a while",
        );
        this.coldUntil = Date.now() + COLD_AFTER_FAILURE_MS;
        unstartable = true;
      }
      if (!unstartable) {
        if (!got || turn.signal.aborted) {
          yield cancelledError(turn.signal, "opencode");
          return;
        }
        t.onPid?.(got.server.pid);
        const server = got.server;
        // Sessions are made ahead only in the shared directory: a turn given a directory of its own
        // (a system step's sandbox) is a one-off there, and a spare would be left behind.
        const ahead = !turn.session.backendSessionId && t.cwd === t.serverCwd;
        const spare = ahead ? await this.takeSpare(server, t.cwd) : undefined;
        const ctl: WarmTurnControl = { signal: turn.signal, parked: false };
        const end = yield* driveTurn(server, turn, t.cwd, this.o, {
          text: turn.prompt.text,
          ctl,
          ...(spare ? { spare } : {}),
          // The next turn's session, made while this answer's end reaches the client.
          ...(ahead ? { onIdle: () => this.makeSpare(server, t.cwd) } : {}),
        });
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
      this.o.logger.info("opencode serve ended before the turn produced anything; running it cold");
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
        const starting = OpencodeServer.start({
          bin: t.bin,
          env: t.env,
          cwd: t.serverCwd,
          killGraceMs: this.o.killGraceSeconds * 1000,
          logger: this.o.logger,
        }).then((server) => {
          this.o.logger.debug({ pid: server.pid }, "opencode serve started");
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
      this.o.logger.debug({ pid: s.pid }, "opencode serve idle too long; ending it");
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
    await Promise.all([
      s?.close(),
      starting?.then(
        (x) => x.close(),
        () => undefined,
      ),
      this.pool?.close(),
    ]);
  }
}

/**
 * The driver of a resume turn on the conversation's server (`runWarmTurn`): the client's tools
 * given to the instance of the turn's directory first (or taken away when the turn has none), then
 * the turn. A reused server lost before any output: the turn runs cold; a fresh one: an error.
 */
async function* conversationDrive(
  lease: WarmLease<OpencodeWorker>,
  turn: TurnInput,
  cwd: string,
  o: OpencodeWarmOptions,
  ct: OpencodeClientTools | undefined,
  text: string,
  ctl: WarmTurnControl,
): AsyncGenerator<BackendEvent, WarmTurnEnd> {
  const server = lease.worker.server;
  let bridged: Set<string> | undefined;
  if (ct) {
    bridged = new Set(ct.spec.tools.map((x) => opencodeMcpToolName(CLIENT_TOOLS_SERVER, x.name)));
    const why = await server.addMcp(
      cwd,
      CLIENT_TOOLS_SERVER,
      mcpConfig(ct),
      mcpFingerprint(ct.entry, ct.spec.tools),
      bridged,
    );
    if (why) {
      if (!lease.fresh && (await server.gone())) return { keep: false, lost: true };
      o.logger.warn({ why }, "opencode serve did not take the client's tools");
      yield {
        type: "error",
        error: {
          code: "backend_failed",
          message: `${LABEL}: the client's tools could not be given to OpenCode: ${why}`,
          status: 502,
          retryable: true,
        },
      };
      return { keep: server.usable };
    }
  } else await server.removeMcp(cwd, CLIENT_TOOLS_SERVER);
  const end = yield* driveTurn(server, turn, cwd, o, { text, ctl, ...(ct ? { tools: ct.session, bridged } : {}) });
  if (end.lost) {
    if (!lease.fresh) return { keep: false, lost: true };
    yield diedMidTurn(LABEL, describeEnd(server));
    return { keep: false };
  }
  return { keep: server.usable };
}

/** The MCP server OpenCode is given for the client's tools (`McpRemoteConfig` of OpenCode 1.18). */
function mcpConfig(ct: OpencodeClientTools): Record<string, unknown> {
  return {
    type: "remote",
    url: ct.entry.url,
    headers: ct.entry.headers,
    oauth: false,
    enabled: true,
    timeout: ct.entry.timeout,
  };
}

/** What an instance was given: the endpoint, the token, the call timeout and the tools (a change adds the server again). */
function mcpFingerprint(entry: OpencodeClientTools["entry"], tools: readonly ClientToolDef[]): string {
  return createHash("sha256")
    .update(JSON.stringify([entry.url, entry.headers, entry.timeout, toolsFingerprint(tools)]))
    .digest("hex");
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
