/**
 * Codex backend: `codex exec --json ... -` (prompt on stdin) for a new thread and
 * `codex exec resume ... <thread id> -` for later turns. Events are JSON lines:
 * `thread.started` {thread_id} → session; `item.completed` with an `agent_message` → text (whole
 * messages: codex exec prints no token deltas); `reasoning` items → reasoning; command / MCP /
 * web-search / file-change items → tool_activity; `turn.completed` {usage} → usage + done;
 * `turn.failed` {error} → error. Top-level `error` lines are NOT final (codex prints
 * `Reconnecting... 1/5 (...)` while it retries); the `turn.*` line decides.
 *
 * - Bootstrap: `-c model_instructions_file="<per-turn file>"`. Codex reads that file on every run
 *   (resumed ones too) and sends it as the first developer message INSTEAD of its own base
 *   instructions; it is not stored in the thread. (`developer_instructions` is stored at thread
 *   start and ignored on resume; AGENTS.md changes are appended to the history as new messages.)
 * - Safe default: `-c sandbox_mode="read-only"`, `-c approval_policy="never"` and
 *   `-c features.shell_tool=false` (no command tool at all; a model calling one gets
 *   `unsupported call: exec_command`).
 * - `turn.completed.usage` on a resumed thread is the THREAD's running total (turn 1 + turn 2...).
 *   The backend subtracts the total it saw after the previous turn (kept in memory, or read from
 *   the thread's rollout file under `$CODEX_HOME/sessions`); with no baseline it reports no usage.
 * - An unknown thread id: stderr `Error: thread/resume: thread/resume failed: no rollout found for
 *   thread id <id> (code -32600)`, exit 1. A value that is not a UUID is taken as a thread NAME and,
 *   when no thread has that name, codex silently starts a new thread: the backend never passes one.
 * - Warm (option `warm`, on by default): one `codex app-server` per conversation instead, giving
 *   token deltas (src/backends/codex/app-server.ts); the same threads, so warm and cold turns alternate.
 * - The person's images (`imageInput`): cold, `--image=<file>` per image, written into the turn's
 *   working directory for the turn (src/backends/cli/images.ts); warm, `image` input items with a
 *   data URL. Either way codex sends them as `input_image` parts of the user message and keeps
 *   them in the thread.
 * - The client's tools (`tools: { mode: "bridge" }`, warm only): the app-server is started with
 *   `-c mcp_servers.openclaw.url=<the bridge's endpoint>` and
 *   `bearer_token_env_var="CLAWBRIDGE_CLIENT_TOOLS_TOKEN"` (the conversation's token goes in the
 *   process's environment, never in argv), `tool_timeout_sec` past the bridge's pending timeout
 *   (the bridge ends a call, not codex), `supports_parallel_tool_calls`. codex 0.169 needs no
 *   experimental flag for streamable HTTP servers; a cold `codex exec` turn has no client tools.
 * Observed formats: docs/CLI_FORMATS.md.
 *
 * Here: the backend (warm or cold turn, usage baselines). The options and command lines are in
 * cli-args.ts, the `codex exec --json` lines become events in exec-events.ts.
 */
import { childLogger } from "../../core/log/logger.js";
import { mkdirSync } from "node:fs";
import { homedir } from "node:os";
import path from "node:path";
import { CliBackendBase, conversationCwd, writeTurnFile } from "../cli/base.js";
import { writeTurnImages } from "../cli/images.js";
import { warmClientTools } from "../cli/stream-json-warm.js";
import { CLIENT_TOOLS_SERVER, toolsFingerprint } from "../client-tools/types.js";
import type { BackendEvent, DiscoveredModel, TurnInput } from "../contract/backend.js";
import { parseCodexModels } from "./models.js";
import type { BackendDeps, BackendModule } from "../module.js";
import { parkIn, warmTurnWithClientTools } from "../warm/client-tool-turns.js";
import { WarmPool } from "../warm/pool.js";
import type { CodexAppServer, CodexAppServerSpec, CodexThreadSettings } from "./app-server.js";
import { runCodexWarmTurn } from "./app-server-turn.js";
import { CODEX_CLIENT_TOOLS_TOKEN_ENV, codexAppServerArgs, codexArgs } from "./cli-args.js";
import { codexDescriptor, type CodexOptions } from "./options.js";
import { CODEX_SESSION_NOT_FOUND, CodexStreamMapper, codexError } from "./exec-events.js";
import { CODEX_THREAD_ID, type CodexTotals, codexRolloutTotals } from "./usage.js";

export { CODEX_THREAD_ID, codexRolloutTotals, codexTurnUsage, type CodexTotals } from "./usage.js";

/** What `initialize` tells codex about its client: codex derives the model requests' `originator` and User-Agent from it. */
const CODEX_CLIENT_INFO = { name: "codex_exec", title: "clawbridge", version: "0.1.0" };
/** Limit for each of the app-server's answers (initialize, thread, turn start). */
const CODEX_REQUEST_TIMEOUT_MS = 30_000;

/** Running totals remembered per thread (for the next turn's usage); bounded. */
const MAX_REMEMBERED_THREADS = 2000;

export class CodexBackend extends CliBackendBase<CodexOptions> {
  readonly type = "codex";
  /** The person's images reach the model: `codex exec --image` files cold, `image` input items warm. */
  readonly imageInput = true;
  private readonly totals = new Map<string, CodexTotals>();
  private pool: WarmPool<CodexAppServer> | undefined;

  constructor(name: string, opts: CodexOptions, deps: BackendDeps) {
    super(name, opts, deps, { places: [], label: "Codex CLI", npmPackage: "@openai/codex" });
  }

  /** Codex's bundled model catalog (`codex debug models --bundled`: no network, no login). */
  async models(signal: AbortSignal): Promise<DiscoveredModel[]> {
    return parseCodexModels(await this.cli.output(["debug", "models", "--bundled"], signal));
  }

  /** The warm app-servers (made on the first warm turn). */
  get warmPool(): WarmPool<CodexAppServer> {
    return (this.pool ??= new WarmPool<CodexAppServer>(
      this.name,
      this.opts.warm,
      childLogger(this.deps.logger, { backend: this.name, warm: "codex" }),
    ));
  }

  async close(): Promise<void> {
    await this.pool?.close();
  }

  /** `$CODEX_HOME`, default `~/.codex` (of the HOME codex runs with). */
  codexHome(env: NodeJS.ProcessEnv = this.env()): string {
    return env.CODEX_HOME || path.join(env.HOME || homedir(), ".codex");
  }

  private remember(threadId: string, t: CodexTotals): void {
    this.totals.delete(threadId);
    this.totals.set(threadId, t);
    if (this.totals.size > MAX_REMEMBERED_THREADS) {
      const oldest = this.totals.keys().next().value;
      if (oldest !== undefined) this.totals.delete(oldest);
    }
  }

  protected async *runTurn(turn: TurnInput, bin: string): AsyncGenerator<BackendEvent> {
    const resume = turn.session.backendSessionId;
    if (resume !== undefined && !CODEX_THREAD_ID.test(resume)) {
      yield {
        type: "error",
        error: {
          code: "session_not_found",
          message: `codex: "${resume.slice(0, 80)}" is not a codex thread id`,
          status: 404,
        },
      };
      return;
    }
    // A warm app-server holds one thread: a turn the pipeline does not resume runs cold.
    if (this.opts.warm.enabled && turn.session.resume) yield* this.runWarm(turn, bin);
    else yield* this.runCold(turn, bin);
  }

  /**
   * The turn on the conversation's `codex app-server` (src/backends/codex/app-server.ts). With the
   * client's tools, the process is given the bridge's MCP endpoint, and a turn may park on a call
   * and be resumed by the client's next request (src/backends/warm/client-tool-turns.ts).
   */
  private runWarm(turn: TurnInput, bin: string): AsyncGenerator<BackendEvent> {
    const resume = turn.session.backendSessionId;
    // The thread's running total moves on without `codex exec`: a later cold turn reads it from the rollout.
    if (resume) this.totals.delete(resume);
    const ct = warmClientTools(turn, this.deps.clientTools);
    const settings: CodexThreadSettings = {
      cwd: conversationCwd(turn, this.deps.dataDir, this.opts.cwd),
      sandbox: this.opts.sandbox,
      approvalPolicy: this.opts.approvalPolicy,
      ...(turn.model && turn.model !== this.opts.defaultModelName ? { model: turn.model } : {}),
      ...(this.opts.systemPromptFile && turn.prompt.system ? { baseInstructions: turn.prompt.system } : {}),
      // A new tool set needs a new process (codex lists an MCP server's tools once), as does a new call limit.
      ...(ct ? { clientTools: `${toolsFingerprint(ct.spec.tools)}:${ct.spec.pendingTimeoutSeconds}` } : {}),
    };
    const env = this.env();
    if (ct) env[CODEX_CLIENT_TOOLS_TOKEN_ENV] = ct.session.token;
    const run = (prompt: string) =>
      runCodexWarmTurn({
        pool: this.warmPool,
        key: turn.session.key,
        signal: turn.signal,
        resume,
        prompt,
        ...(turn.images?.length ? { images: turn.images } : {}),
        settings,
        server: {
          label: "codex",
          command: bin,
          args: codexAppServerArgs(this.opts, ct ? { url: ct.entry.url, timeoutMs: ct.entry.timeout } : undefined),
          env,
          cwd: settings.cwd,
          killGraceMs: this.opts.killGraceSeconds * 1000,
          logger: childLogger(this.deps.logger, { backend: this.name }),
          clientInfo: CODEX_CLIENT_INFO,
          requestTimeoutMs: CODEX_REQUEST_TIMEOUT_MS,
          ...(ct ? { clientToolsServer: CLIENT_TOOLS_SERVER } : {}),
        },
        interruptGraceMs: this.opts.warm.interruptGraceSeconds * 1000,
        errorOf: (message, status) => codexError("codex", message, status, env.TZ || undefined),
        sessionNotFound: CODEX_SESSION_NOT_FOUND,
        cold: () => this.runCold(turn, bin),
        onWorker: (w) => (this.lastPid = w.pid),
        // Standbys: the same app-server for no thread yet, in a folder of its own (src/backends/codex/app-server.ts).
        ...(ct ? {} : { standby: this.standby(bin) }),
        ...(ct
          ? { tools: ct.session, onPark: parkIn<CodexAppServer>(ct.session, this.name, ct.spec.pendingTimeoutSeconds) }
          : {}),
      });
    if (!ct) return run(turn.prompt.text);
    return warmTurnWithClientTools({
      session: ct.session,
      spec: ct.spec,
      backend: this.name,
      signal: turn.signal,
      continuing: !!resume,
      text: turn.prompt.text,
      fresh: (text) => run(text ?? turn.prompt.text),
    });
  }

  /** The app-servers kept ready for turns without client tools (src/backends/codex/app-server.ts). */
  private standby(bin: string): { kind: unknown[]; server: CodexAppServerSpec } {
    if (this.standbySpec?.server.command === bin) return this.standbySpec;
    const args = codexAppServerArgs(this.opts, undefined);
    const cwd = this.opts.cwd ?? path.join(this.deps.dataDir, "work", "standby");
    mkdirSync(cwd, { recursive: true, mode: 0o700 });
    return (this.standbySpec = {
      kind: ["codex", bin, args, cwd],
      server: {
        label: "codex",
        command: bin,
        args,
        env: this.env(),
        cwd,
        killGraceMs: this.opts.killGraceSeconds * 1000,
        logger: childLogger(this.deps.logger, { backend: this.name }),
        clientInfo: CODEX_CLIENT_INFO,
        requestTimeoutMs: CODEX_REQUEST_TIMEOUT_MS,
      },
    });
  }
  private standbySpec: { kind: unknown[]; server: CodexAppServerSpec } | undefined;

  /** The turn with `codex exec` (a process of its own). */
  private async *runCold(turn: TurnInput, bin: string): AsyncGenerator<BackendEvent> {
    const resume = turn.session.backendSessionId;
    const env = this.env();
    const cwd = conversationCwd(turn, this.deps.dataDir, this.opts.cwd);
    let baseline: CodexTotals | null | undefined = null;
    if (resume) baseline = this.totals.get(resume) ?? (await codexRolloutTotals(this.codexHome(env), resume));
    const instructions =
      this.opts.systemPromptFile && turn.prompt.system
        ? writeTurnFile(this.deps.dataDir, "codex-system-", "instructions.md", turn.prompt.system)
        : undefined;
    // The person's images as files for `--image` (codex copies them into the thread; removed after the turn).
    const images = writeTurnImages(cwd, turn.images);
    if (images && "error" in images) {
      instructions?.remove();
      yield { type: "error", error: { code: "backend_failed", message: `codex: ${images.error}`, status: 500 } };
      return;
    }
    const mapper = new CodexStreamMapper("codex", !!resume, baseline, env.TZ || undefined);
    const log = childLogger(this.deps.logger, { backend: this.name });
    try {
      yield* this.cliTurn(
        turn,
        {
          label: "codex",
          bin,
          args: codexArgs(this.opts, turn, instructions?.file, images?.relative),
          env,
          cwd,
          logger: log,
        },
        mapper,
      );
    } finally {
      instructions?.remove();
      images?.remove();
      if (mapper.threadId && mapper.totals) this.remember(mapper.threadId, mapper.totals);
      if (resume && mapper.threadId && mapper.threadId !== resume)
        log.warn({ requested: resume, got: mapper.threadId }, "codex resumed a different thread than requested");
      if (mapper.warnings.length) log.debug({ warnings: mapper.warnings }, "codex reported warnings");
    }
  }
}

export const codexBackend: BackendModule<CodexOptions> = {
  ...codexDescriptor,
  create: (name, options, deps) => new CodexBackend(name, options, deps),
};
