/**
 * Warm mode of the stream-json CLI backends (Claude Code, Qwen Code), over the warm room: a pool
 * of one process per conversation, started with the backend's own arguments plus
 * `--input-format stream-json`. A conversation's process serves its next turn when nothing it was
 * started with has changed: the session it is on, the model, the bootstrap, the working directory.
 * Otherwise a new one replaces it, resuming the session — so the bootstrap reaches the CLI
 * whenever it changes, as the cold path gives it every turn. The turn's images (`turn.images`) go
 * as image blocks in its user message; a backend whose CLI reads them otherwise (Qwen Code) hands
 * over a turn without them.
 *
 * Standbys (`StreamJsonStandby`, the pool's `warm.standby`): processes started with the backend's
 * options and model but NO session, bootstrap or conversation directory, taken by a new
 * conversation (no session to resume, no client tools: those are start-up flags with the
 * conversation's own token) for its first turn. What cannot be given after start is handled so:
 * - the bootstrap: the system prompt is per conversation (it names the conversation), so no
 *   standby can be started with it; each CLI is given it at its first turn instead, the way it
 *   reads it then (`StreamJsonStandby.preamble`): Claude Code takes `appendSystemPrompt` /
 *   `systemPrompt` in its `initialize` control request, which it applies to every later request of
 *   the process exactly like the flags (claude 2.1.197: read when the first `initialize` comes, so
 *   a standby is never initialized before it is taken); Qwen Code reads its system prompt file
 *   (QWEN_SYSTEM_MD) when its chat starts, so the standby's own private file gets the bootstrap and
 *   `/clear` restarts the chat (a new session) before the turn's message — see the backends.
 * - the working directory: the standby runs in a fresh directory of its own, which becomes the
 *   conversation's (src/backends/warm/standby-dir.ts); with a fixed `cwd` option, that one.
 * - the session: a new conversation has none yet; the standby's first turn reports the one it
 *   starts, as a new process would.
 * A taken standby is stamped with the conversation's fingerprint: the conversation's next turns
 * find it fit, exactly as if it had been started for it. A standby is never shared: once taken it
 * is the conversation's alone, and one that was not given its bootstrap serves nobody.
 */
import { createHash } from "node:crypto";
import type { Logger } from "pino";
import type { ClientToolHub, ToolSession } from "../client-tools/sessions.js";
import { cliCallTimeoutMs, mcpServerEntry, type ClientToolsTurn } from "../client-tools/types.js";
import { parkIn, warmTurnWithClientTools } from "../warm/client-tool-turns.js";
import type { WarmOptions } from "../warm/options.js";
import { WarmPool } from "../warm/pool.js";
import {
  controlInitialize,
  streamJsonTurn,
  StreamJsonWorker,
  type FirstTurnPreamble,
  type StreamJsonMapper,
} from "./stream-json.js";
import { standbyDir, type StandbyDir } from "../warm/standby-dir.js";
import type { StandbyKind } from "../warm/pool.js";
import { runWarmTurn } from "../warm/warm-turn.js";
import type { BackendEvent, TurnInput } from "../contract/backend.js";

export interface StreamJsonStart {
  label: string;
  bin: string;
  /** The process's arguments (already with `--input-format stream-json` and `--resume` when resuming). */
  args: string[];
  env: NodeJS.ProcessEnv;
  cwd: string;
  /** A private file the CLI reads at start-up (the bootstrap), removed once it has. */
  file?: { remove(): void };
  /** Send the control channel's `initialize` first (Qwen Code: else interrupts are ignored). */
  controlInit?: boolean;
  /** A standby's warm-up before it counts as ready: messages, and the turns (results) they cause. */
  warmUp?: { messages: Record<string, unknown>[]; turns: number };
  /** A file the standby reads its bootstrap from when its chat (re)starts (Qwen Code's QWEN_SYSTEM_MD), written when it is taken. */
  bootstrapFile?: string;
}

/**
 * How a backend's standbys are made and given a conversation (see the top of this file). Passed
 * with a turn that could start on one: a new session, no client tools.
 */
export interface StreamJsonStandby {
  /** What the standbys share (the CLI, its model and options, a fixed cwd): hashed into the pool's kind. */
  kind: unknown[];
  /** The bridge's data directory (the standbys' directories live in `<dataDir>/work`). */
  dataDir: string;
  /** The backend's fixed working directory (`cwd` option); undefined: every conversation has its own. */
  fixedCwd?: string;
  /** The conversation's working directory (the standby's becomes it). */
  cwd: string;
  /** The arguments, env and files of a standby (no session, no bootstrap), started in `cwd`. */
  start(cwd: string): StreamJsonStart;
  /** What the taken standby reads before the turn's message (its bootstrap); undefined: nothing. */
  preamble(worker: StreamJsonWorker): FirstTurnPreamble | undefined;
}

/** How long a standby's warm-up may take. */
const WARM_UP_TIMEOUT_MS = 60_000;

/** The client's tools of a warm turn, when its CLI is to be given them: the conversation's session and the MCP entry it connects with. */
export interface WarmClientTools {
  spec: ClientToolsTurn;
  session: ToolSession;
  /** The MCP server entry for the CLI's config (endpoint, token, the CLI's own call timeout). */
  entry: ReturnType<typeof mcpServerEntry>;
}

export function warmClientTools(turn: TurnInput, hub: ClientToolHub | undefined): WarmClientTools | undefined {
  const spec = turn.clientTools;
  if (!spec?.tools.length || !hub?.endpoint) return undefined;
  const session = hub.session(turn.session.key);
  return {
    spec,
    session,
    entry: mcpServerEntry(hub.endpoint, session.token, cliCallTimeoutMs(spec.pendingTimeoutSeconds)),
  };
}

export class StreamJsonWarm {
  readonly pool: WarmPool<StreamJsonWorker>;

  constructor(
    private readonly name: string,
    private readonly warm: WarmOptions,
    private readonly killGraceSeconds: number,
    private readonly logger: Logger,
    private readonly onWorker: (pid: number | undefined) => void,
  ) {
    this.pool = new WarmPool(name, warm, logger);
  }

  /**
   * One warm turn. `fingerprintOf`: everything besides the session that a process for this turn is
   * started with. `start` is called only when a new process is needed: it builds the arguments
   * (and writes the bootstrap file) then. `cold`: the same turn with a process of its own.
   * `tools`: the conversation's client tools, which the process was given as an MCP server (then a
   * turn may suspend on a call and be resumed by the client's next request).
   */
  run(
    turn: TurnInput,
    fingerprintOf: unknown[],
    start: () => StreamJsonStart,
    mapper: StreamJsonMapper,
    cold: () => AsyncGenerator<BackendEvent>,
    tools?: ToolSession,
    standby?: StreamJsonStandby,
  ): AsyncGenerator<BackendEvent> {
    const spec = turn.clientTools;
    if (!tools || !spec)
      return this.turn(turn, fingerprintOf, start, mapper, cold, undefined, turn.prompt.text, standby);
    return warmTurnWithClientTools({
      session: tools,
      spec,
      backend: this.name,
      signal: turn.signal,
      continuing: !!turn.session.backendSessionId,
      text: turn.prompt.text,
      fresh: (text) => this.turn(turn, fingerprintOf, start, mapper, cold, tools, text ?? turn.prompt.text),
    });
  }

  private turn(
    turn: TurnInput,
    fingerprintOf: unknown[],
    start: () => StreamJsonStart,
    mapper: StreamJsonMapper,
    cold: () => AsyncGenerator<BackendEvent>,
    tools: ToolSession | undefined,
    text: string,
    standby?: StreamJsonStandby,
  ): AsyncGenerator<BackendEvent> {
    const fingerprint = createHash("sha256").update(JSON.stringify(fingerprintOf)).digest("hex");
    const sessionId = turn.session.backendSessionId;
    let file: { remove(): void } | undefined;
    return runWarmTurn<StreamJsonWorker>({
      pool: this.pool,
      key: turn.session.key,
      signal: turn.signal,
      ...(standby && !sessionId && !tools ? { standby: this.standbyKind(standby, fingerprint) } : {}),
      fits: (w) => w.fingerprint === fingerprint && w.sessionId === sessionId,
      start: async () => {
        const s = start();
        file = s.file;
        return this.worker(s, () => s.file?.remove(), fingerprint, sessionId);
      },
      drive: (lease, ctl) =>
        streamJsonTurn(
          lease,
          {
            label: lease.worker.spec.label,
            text,
            ...(turn.images?.length ? { images: turn.images } : {}),
            mapper,
            ...(tools ? { tools } : {}),
            interruptGraceMs: this.warm.interruptGraceSeconds * 1000,
            // The CLI has read its start-up files once it speaks.
            onFirstMessage: () => {
              file?.remove();
              file = undefined;
            },
          },
          ctl,
        ),
      cold,
      onWorker: (w) => this.onWorker(w.pid),
      ...(tools && turn.clientTools
        ? { onPark: parkIn<StreamJsonWorker>(tools, this.name, turn.clientTools.pendingTimeoutSeconds) }
        : {}),
    });
  }

  /** A started CLI process of this backend (sent its control handshake when it wants one). */
  private worker(
    s: StreamJsonStart,
    onEnd: () => void,
    fingerprint: string,
    sessionId: string | undefined,
  ): StreamJsonWorker {
    const worker = new StreamJsonWorker(
      {
        label: s.label,
        command: s.bin,
        args: s.args,
        env: s.env,
        cwd: s.cwd,
        killGraceMs: this.killGraceSeconds * 1000,
        logger: this.logger,
        onEnd,
      },
      fingerprint,
      sessionId,
    );
    if (s.controlInit) worker.send(controlInitialize());
    return worker;
  }

  /** The pool's view of this turn's standbys: their kind, how one starts, how the conversation takes one. */
  private standbyKind(sb: StreamJsonStandby, fingerprint: string): StandbyKind<StreamJsonWorker> {
    return {
      kind: createHash("sha256").update(JSON.stringify(sb.kind)).digest("hex"),
      start: async () => {
        const dir: StandbyDir | undefined = sb.fixedCwd === undefined ? standbyDir(sb.dataDir) : undefined;
        let s: StreamJsonStart;
        try {
          s = sb.start(dir?.dir ?? sb.fixedCwd!);
        } catch (err) {
          dir?.remove();
          throw err;
        }
        const worker = this.worker(
          s,
          () => {
            s.file?.remove();
            dir?.remove();
          },
          "standby",
          undefined,
        );
        standbyState.set(worker, { dir, bootstrapFile: s.bootstrapFile });
        if (s.warmUp && !(await worker.warmUp(s.warmUp.messages, s.warmUp.turns, WARM_UP_TIMEOUT_MS))) {
          const why = worker.stderrOfTurn().trim().split("\n").slice(-2).join(" | ");
          await worker.kill();
          throw new Error(`the ${s.label} standby did not warm up${why ? `: ${why}` : ""}`);
        }
        return worker;
      },
      adopt: (w) => {
        const state = standbyState.get(w);
        if (state?.dir && !state.dir.adoptAs(sb.cwd)) return false;
        w.fingerprint = fingerprint;
        w.sessionId = undefined;
        w.preamble = sb.preamble(w);
        return true;
      },
    };
  }

  close(): Promise<void> {
    return this.pool.close();
  }
}

/** What a standby was started with that its adoption needs (its own directory, its bootstrap file). */
const standbyState = new WeakMap<
  StreamJsonWorker,
  { dir: StandbyDir | undefined; bootstrapFile: string | undefined }
>();

/** The bootstrap file a standby was started with (Qwen Code's QWEN_SYSTEM_MD), for its backend's preamble. */
export function standbyBootstrapFile(w: StreamJsonWorker): string | undefined {
  return standbyState.get(w)?.bootstrapFile;
}
