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
 * - The client's tools (`tools: { mode: "bridge" }`, warm only): the app-server is started with
 *   `-c mcp_servers.openclaw.url=<the bridge's endpoint>` and
 *   `bearer_token_env_var="CLAWBRIDGE_CLIENT_TOOLS_TOKEN"` (the conversation's token goes in the
 *   process's environment, never in argv), `tool_timeout_sec` past the bridge's pending timeout
 *   (the bridge ends a call, not codex), `supports_parallel_tool_calls`. codex 0.169 needs no
 *   experimental flag for streamable HTTP servers; a cold `codex exec` turn has no client tools.
 * Observed formats: docs/CLI_FORMATS.md.
 */
import { homedir } from "node:os";
import path from "node:path";
import { z } from "zod";
import { CLIENT_TOOLS_SERVER, toolsFingerprint } from "../client-tools/types.js";
import type { ProcessEnd } from "../../core/util/process.js";
import { parkIn, warmTurnWithClientTools } from "../warm/client-tool-turns.js";
import { type CodexAppServer, runCodexWarmTurn, type CodexThreadSettings } from "./app-server.js";
import { warmOption } from "../warm/options.js";
import { WarmPool } from "../warm/pool.js";
import {
  CliBackendBase,
  cliBaseOptions,
  conversationCwd,
  joinSeparator,
  stderrTail,
  writeTurnFile,
  type CliTurnMapper,
} from "../cli/base.js";
import { warmClientTools } from "../cli/stream-json-warm.js";
import { CODEX_THREAD_ID, codexRolloutTotals, codexTurnUsage, totalsOf, type CodexTotals } from "./usage.js";
import type { BackendDeps, BackendModule } from "../module.js";
import type { BackendError, BackendEvent, TurnInput } from "../contract/backend.js";

export const codexOptionsSchema = z.strictObject({
  ...cliBaseOptions("codex"),
  /** `sandbox_mode` for commands the agent runs. */
  sandbox: z.enum(["read-only", "workspace-write", "danger-full-access"]).default("read-only"),
  /** `approval_policy`. Nobody can answer an approval prompt in `exec`: keep `never`. */
  approvalPolicy: z.enum(["never", "on-request", "on-failure", "untrusted"]).default("never"),
  /** Offer codex's command tool (`exec_command`) to the model; it then runs inside `sandbox`. */
  shellTool: z.boolean().default(false),
  /** Pass `--skip-git-repo-check` (the bridge's per-conversation folders are not git repositories). */
  skipGitRepoCheck: z.boolean().default(true),
  /** Pass the bootstrap as `model_instructions_file` (replacing codex's own base instructions). false: never. */
  systemPromptFile: z.boolean().default(true),
  /** Keep one `codex app-server` per conversation between turns (token deltas); `enabled: false`: `codex exec` per turn. */
  warm: warmOption(true),
});
export type CodexOptions = z.infer<typeof codexOptionsSchema>;

/**
 * What codex prints (stderr, exit 1) when `exec resume` names a thread it cannot load — but not
 * `thread/resume failed: thread <id> already has an active writer`: the thread exists and another
 * codex process (a warm app-server of another backend) holds it (`CODEX_THREAD_BUSY`).
 */
export const CODEX_SESSION_NOT_FOUND =
  /no rollout found for thread id|thread\/resume failed(?!.*already has an active writer)|no (?:thread|session) found/i;
/** Another codex process has the thread open for writing. */
export const CODEX_THREAD_BUSY = /already has an active writer/i;

export { CODEX_THREAD_ID, codexRolloutTotals, codexTurnUsage, type CodexTotals } from "./usage.js";

/** A TOML value for `-c key=value` (a JSON string literal is a valid TOML basic string). */
const toml = (s: string) => JSON.stringify(s);

/** Build the argv for one turn (exported for tests and docs). */
export function codexArgs(
  opts: CodexOptions,
  turn: Pick<TurnInput, "model" | "session">,
  instructionsFile?: string,
): string[] {
  const resume = turn.session.backendSessionId;
  const args = resume ? ["exec", "resume", "--json"] : ["exec", "--json"];
  if (opts.skipGitRepoCheck) args.push("--skip-git-repo-check");
  if (turn.model && turn.model !== opts.defaultModelName) args.push("-m", turn.model);
  args.push("-c", `sandbox_mode=${toml(opts.sandbox)}`, "-c", `approval_policy=${toml(opts.approvalPolicy)}`);
  if (!opts.shellTool) args.push("-c", "features.shell_tool=false");
  if (instructionsFile) args.push("-c", `model_instructions_file=${toml(instructionsFile)}`);
  args.push(...opts.args);
  if (resume) args.push(resume);
  args.push("-");
  return args;
}

/** The environment variable codex reads the client-tools token from (`bearer_token_env_var`): the token never appears in argv. */
export const CODEX_CLIENT_TOOLS_TOKEN_ENV = "CLAWBRIDGE_CLIENT_TOOLS_TOKEN";
/** How long codex may take to connect to the client tools' MCP server and list its tools (`startup_timeout_sec`). */
const CODEX_MCP_STARTUP_SECONDS = 30;

/** The bridge's MCP endpoint of the client's tools, as a codex app-server is given it. */
export interface CodexClientToolsServer {
  url: string;
  /** codex's own limit for one call (`tool_timeout_sec`): past the bridge's pending timeout. */
  timeoutMs: number;
}

/**
 * The `-c` overrides that give codex the client's tools: a streamable HTTP MCP server
 * `mcp_servers.openclaw` with the token read from `CODEX_CLIENT_TOOLS_TOKEN_ENV`. (Checked with
 * codex 0.169.0: the model is offered them inside a `namespace` tool `mcp__openclaw`.)
 */
export function codexClientToolsArgs(server: CodexClientToolsServer): string[] {
  const key = `mcp_servers.${CLIENT_TOOLS_SERVER}`;
  return [
    "-c",
    `${key}.url=${toml(server.url)}`,
    "-c",
    `${key}.bearer_token_env_var=${toml(CODEX_CLIENT_TOOLS_TOKEN_ENV)}`,
    "-c",
    `${key}.startup_timeout_sec=${CODEX_MCP_STARTUP_SECONDS}`,
    "-c",
    `${key}.tool_timeout_sec=${Math.ceil(server.timeoutMs / 1000)}`,
    // A reply's calls run together, so the client gets them in one response (they are read-only for codex).
    "-c",
    `${key}.supports_parallel_tool_calls=true`,
  ];
}

/**
 * `codex app-server`'s arguments: the same safe settings as `codex exec` gets, and of the extra
 * `args` only the config flags the app-server takes too (`-c k=v`, `--config`, `--enable`,
 * `--disable`); then, with `clientTools`, the MCP server of the client's tools (last: the user's
 * flags do not change it).
 */
export function codexAppServerArgs(opts: CodexOptions, clientTools?: CodexClientToolsServer): string[] {
  const args = [
    "app-server",
    "-c",
    `sandbox_mode=${toml(opts.sandbox)}`,
    "-c",
    `approval_policy=${toml(opts.approvalPolicy)}`,
  ];
  if (!opts.shellTool) args.push("-c", "features.shell_tool=false");
  for (let i = 0; i < opts.args.length; i++) {
    const a = opts.args[i]!;
    if (["-c", "--config", "--enable", "--disable"].includes(a) && i + 1 < opts.args.length)
      args.push(a, opts.args[++i]!);
    else if (/^--(?:config|enable|disable)=/.test(a)) args.push(a);
  }
  if (clientTools) args.push(...codexClientToolsArgs(clientTools));
  return args;
}

/** What `initialize` tells codex about its client: codex derives the model requests' `originator` and User-Agent from it. */
const CODEX_CLIENT_INFO = { name: "codex_exec", title: "clawbridge", version: "0.1.0" };
/** Limit for each of the app-server's answers (initialize, thread, turn start). */
const CODEX_REQUEST_TIMEOUT_MS = 30_000;

/**
 * codex's error text → a bridge error. Formats: docs/CLI_FORMATS.md. `knownStatus`: the model
 * API's HTTP status when codex reported it apart from the text (the app-server's `codexErrorInfo`).
 */
export function codexError(label: string, raw: string, knownStatus?: number): BackendError {
  let message = raw.trim();
  let status: number | undefined;
  const start = message.indexOf("{");
  if (start >= 0) {
    try {
      const obj = JSON.parse(message.slice(start));
      const e = obj?.error ?? obj;
      if (e && typeof e.message === "string") {
        message = e.message;
        if (typeof e.status === "number") status = e.status;
        else if (e.type === "invalid_request_error") status = 400;
      }
    } catch {
      /* not JSON */
    }
  }
  const m = /\b(?:unexpected )?status:? (\d{3})\b/i.exec(raw);
  if (!status && m) status = Number(m[1]);
  if (!status && knownStatus && knownStatus >= 400) status = knownStatus;
  message = message.replace(/,? url: \S+$/, "");
  const transient =
    status === undefined && /high demand|stream disconnected|connection|timed? ?out|reconnecting/i.test(message);
  return {
    code: "upstream_error",
    message: `${label}: ${message}${status && !message.includes(String(status)) ? ` (model API status ${status})` : ""}`,
    status: status === 429 ? 429 : 502,
    retryable: status === 429 || (status !== undefined && status >= 500) || transient,
  };
}

const TOOL_ITEMS = new Set(["command_execution", "mcp_tool_call", "web_search", "file_change"]);

function toolName(item: Record<string, any>): string {
  switch (item.type) {
    case "command_execution":
      return "shell";
    case "mcp_tool_call":
      return [item.server, item.tool].filter((x) => typeof x === "string" && x).join(".") || "mcp";
    case "file_change":
      return "apply_patch";
    default:
      return String(item.type);
  }
}

function toolDetail(item: Record<string, any>): string | undefined {
  const v =
    typeof item.command === "string"
      ? item.command
      : typeof item.query === "string"
        ? item.query
        : Array.isArray(item.changes)
          ? item.changes
              .map((c: any) => c?.path)
              .filter(Boolean)
              .join(", ")
          : undefined;
  if (!v) return undefined;
  return v.length > 200 ? `${v.slice(0, 197)}...` : v;
}

/** Maps `codex exec --json` lines to bridge events for one turn. Exported for unit tests. */
export class CodexStreamMapper implements CliTurnMapper {
  threadId: string | undefined;
  /** Running total reported by `turn.completed` (for the next turn's baseline). */
  totals: CodexTotals | undefined;
  /** Non-fatal `error` items (e.g. "Model metadata for `x` not found"). */
  readonly warnings: string[] = [];
  private completed = false;
  private failed: string | undefined;
  private lastError: string | undefined;
  private textSoFar = "";
  private readonly tools = new Map<string, string>();

  /**
   * @param baseline the thread's running total before this turn: null for a new thread,
   *   undefined when resuming without a known total (then no usage is reported).
   */
  constructor(
    private readonly label: string,
    private readonly resuming: boolean,
    private readonly baseline: CodexTotals | null | undefined,
  ) {}

  onEvent(ev: Record<string, any>): BackendEvent[] {
    const out: BackendEvent[] = [];
    const item: Record<string, any> = ev.item && typeof ev.item === "object" ? ev.item : {};
    switch (ev.type) {
      case "thread.started":
        if (typeof ev.thread_id === "string" && !this.threadId) {
          this.threadId = ev.thread_id;
          out.push({ type: "session", id: ev.thread_id });
        }
        break;
      case "item.started":
        if (TOOL_ITEMS.has(item.type) && typeof item.id === "string" && !this.tools.has(item.id)) {
          const name = toolName(item);
          this.tools.set(item.id, name);
          out.push({ type: "tool_activity", name, status: "started", detail: toolDetail(item) });
        }
        break;
      case "item.completed":
        if (item.type === "agent_message" && typeof item.text === "string" && item.text) {
          const sep = joinSeparator(this.textSoFar, item.text);
          this.textSoFar = (this.textSoFar + sep + item.text).slice(-64);
          out.push({ type: "text", text: sep + item.text });
        } else if (item.type === "reasoning" && typeof item.text === "string" && item.text) {
          out.push({ type: "reasoning", text: item.text });
        } else if (TOOL_ITEMS.has(item.type)) {
          const name = (typeof item.id === "string" && this.tools.get(item.id)) || toolName(item);
          const started = typeof item.id === "string" && this.tools.has(item.id);
          if (typeof item.id === "string") this.tools.delete(item.id);
          if (!started) out.push({ type: "tool_activity", name, status: "started", detail: toolDetail(item) });
          const failed =
            item.status === "failed" || (typeof item.exit_code === "number" && item.exit_code !== 0) || !!item.error;
          const why = failed
            ? String(item.error?.message ?? item.aggregated_output ?? "")
                .trim()
                .slice(0, 300)
            : "";
          out.push({
            type: "tool_activity",
            name,
            status: failed ? "failed" : "completed",
            ...(why ? { detail: why } : {}),
          });
        } else if (item.type === "error" && typeof item.message === "string") {
          this.warnings.push(item.message);
        }
        break;
      case "turn.completed":
        this.completed = true;
        this.totals = totalsOf(ev.usage);
        break;
      case "turn.failed":
        this.failed = String(ev.error?.message ?? this.lastError ?? "turn failed");
        break;
      case "error":
        if (typeof ev.message === "string") this.lastError = ev.message;
        break;
    }
    return out;
  }

  finish(end: ProcessEnd): BackendEvent[] {
    if (this.failed !== undefined) {
      if (this.resuming && CODEX_SESSION_NOT_FOUND.test(this.failed)) {
        return [
          {
            type: "error",
            error: { code: "session_not_found", message: `${this.label}: ${this.failed}`, status: 404 },
          },
        ];
      }
      return [{ type: "error", error: codexError(this.label, this.failed) }];
    }
    if (this.completed) {
      const out: BackendEvent[] = [];
      if (this.totals && this.baseline !== undefined)
        out.push({ type: "usage", usage: codexTurnUsage(this.totals, this.baseline ?? undefined) });
      out.push({ type: "done", finishReason: "stop" });
      return out;
    }
    if (this.resuming && !this.threadId && CODEX_THREAD_BUSY.test(end.stderr)) {
      const line =
        end.stderr
          .split("\n")
          .find((l) => CODEX_THREAD_BUSY.test(l))
          ?.trim() ?? "";
      return [
        {
          type: "error",
          error: {
            code: "backend_failed",
            message: `${this.label}: ${line.replace(/^Error:\s*/, "")}`,
            status: 409,
            retryable: true,
          },
        },
      ];
    }
    if (this.resuming && !this.threadId && CODEX_SESSION_NOT_FOUND.test(end.stderr)) {
      const line =
        end.stderr
          .split("\n")
          .find((l) => CODEX_SESSION_NOT_FOUND.test(l))
          ?.trim() ?? stderrTail(end.stderr);
      return [
        {
          type: "error",
          error: {
            code: "session_not_found",
            message: `${this.label}: ${line.replace(/^Error:\s*/, "")}`,
            status: 404,
          },
        },
      ];
    }
    if (this.lastError) return [{ type: "error", error: codexError(this.label, this.lastError) }];
    const stderr = stderrTail(end.stderr);
    return [
      {
        type: "error",
        error: {
          code: "backend_failed",
          message: `${this.label} exited ${end.code ?? end.signal} without finishing the turn${stderr ? `: ${stderr}` : ""}`,
          status: 502,
        },
      },
    ];
  }
}

/** Running totals remembered per thread (for the next turn's usage); bounded. */
const MAX_REMEMBERED_THREADS = 2000;

export class CodexBackend extends CliBackendBase<CodexOptions> {
  readonly type = "codex";
  private readonly totals = new Map<string, CodexTotals>();
  private pool: WarmPool<CodexAppServer> | undefined;

  constructor(name: string, opts: CodexOptions, deps: BackendDeps) {
    super(name, opts, deps, { places: [], label: "Codex CLI", npmPackage: "@openai/codex" });
  }

  /** The warm app-servers (made on the first warm turn). */
  get warmPool(): WarmPool<CodexAppServer> {
    return (this.pool ??= new WarmPool<CodexAppServer>(
      this.name,
      this.opts.warm,
      this.deps.logger.child({ backend: this.name, warm: "codex" }),
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
        settings,
        server: {
          label: "codex",
          command: bin,
          args: codexAppServerArgs(this.opts, ct ? { url: ct.entry.url, timeoutMs: ct.entry.timeout } : undefined),
          env,
          cwd: settings.cwd,
          killGraceMs: this.opts.killGraceSeconds * 1000,
          logger: this.deps.logger.child({ backend: this.name }),
          clientInfo: CODEX_CLIENT_INFO,
          requestTimeoutMs: CODEX_REQUEST_TIMEOUT_MS,
          ...(ct ? { clientToolsServer: CLIENT_TOOLS_SERVER } : {}),
        },
        interruptGraceMs: this.opts.warm.interruptGraceSeconds * 1000,
        errorOf: (message, status) => codexError("codex", message, status),
        sessionNotFound: CODEX_SESSION_NOT_FOUND,
        cold: () => this.runCold(turn, bin),
        onWorker: (w) => (this.lastPid = w.pid),
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
    const mapper = new CodexStreamMapper("codex", !!resume, baseline);
    const log = this.deps.logger.child({ backend: this.name });
    try {
      yield* this.cliTurn(
        turn,
        {
          label: "codex",
          bin,
          args: codexArgs(this.opts, turn, instructions?.file),
          env,
          cwd,
          logger: log,
        },
        mapper,
      );
    } finally {
      instructions?.remove();
      if (mapper.threadId && mapper.totals) this.remember(mapper.threadId, mapper.totals);
      if (resume && mapper.threadId && mapper.threadId !== resume)
        log.warn({ requested: resume, got: mapper.threadId }, "codex resumed a different thread than requested");
      if (mapper.warnings.length) log.debug({ warnings: mapper.warnings }, "codex reported warnings");
    }
  }
}

export const codexBackend: BackendModule<CodexOptions> = {
  type: "codex",
  schema: codexOptionsSchema,
  defaultSessionMode: "resume",
  sessionModes: ["resume", "stateless"],
  create: (name, options, deps) => new CodexBackend(name, options, deps),
  clientTools: (o) =>
    o.warm.enabled
      ? undefined
      : "needs warm processes (this backend has warm.enabled: false): the agent's turn waits for the tool's result in a process kept between requests",
};
