/**
 * Warm mode of the stream-json CLI backends (Claude Code, Qwen Code), over the warm room: a pool
 * of one process per conversation, started with the backend's own arguments plus
 * `--input-format stream-json`. A conversation's process serves its next turn when nothing it was
 * started with has changed: the session it is on, the model, the bootstrap, the working directory.
 * Otherwise a new one replaces it, resuming the session — so the bootstrap reaches the CLI
 * whenever it changes, as the cold path gives it every turn. The turn's images (`turn.images`) go
 * as image blocks in its user message; a backend whose CLI reads them otherwise (Qwen Code) hands
 * over a turn without them.
 */
import { createHash } from "node:crypto";
import type { Logger } from "pino";
import type { ClientToolHub, ToolSession } from "../client-tools/sessions.js";
import { cliCallTimeoutMs, mcpServerEntry, type ClientToolsTurn } from "../client-tools/types.js";
import { parkIn, warmTurnWithClientTools } from "../warm/client-tool-turns.js";
import type { WarmOptions } from "../warm/options.js";
import { WarmPool } from "../warm/pool.js";
import { controlInitialize, streamJsonTurn, StreamJsonWorker, type StreamJsonMapper } from "./stream-json.js";
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
}

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
  ): AsyncGenerator<BackendEvent> {
    const spec = turn.clientTools;
    if (!tools || !spec) return this.turn(turn, fingerprintOf, start, mapper, cold, undefined, turn.prompt.text);
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
  ): AsyncGenerator<BackendEvent> {
    const fingerprint = createHash("sha256").update(JSON.stringify(fingerprintOf)).digest("hex");
    const sessionId = turn.session.backendSessionId;
    let file: { remove(): void } | undefined;
    return runWarmTurn<StreamJsonWorker>({
      pool: this.pool,
      key: turn.session.key,
      signal: turn.signal,
      fits: (w) => w.fingerprint === fingerprint && w.sessionId === sessionId,
      start: async () => {
        const s = start();
        file = s.file;
        const worker = new StreamJsonWorker(
          {
            label: s.label,
            command: s.bin,
            args: s.args,
            env: s.env,
            cwd: s.cwd,
            killGraceMs: this.killGraceSeconds * 1000,
            logger: this.logger,
            onEnd: () => s.file?.remove(),
          },
          fingerprint,
          sessionId,
        );
        if (s.controlInit) worker.send(controlInitialize());
        return worker;
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

  close(): Promise<void> {
    return this.pool.close();
  }
}
