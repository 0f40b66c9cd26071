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
 * Observed formats: docs/CLI_FORMATS.md.
 */
import { createReadStream } from "node:fs";
import { readdir } from "node:fs/promises";
import { homedir } from "node:os";
import path from "node:path";
import { createInterface } from "node:readline";
import { z } from "zod";
import type { ProcessEnd } from "../util/process.js";
import { CliBackendBase, cliBaseOptions, conversationCwd, joinSeparator, stderrTail, writeTurnFile, type CliTurnMapper } from "./cli-common.js";
import type { BackendDeps, BackendModule } from "./module.js";
import type { BackendError, BackendEvent, TurnInput, Usage } from "./types.js";

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
});
export type CodexOptions = z.infer<typeof codexOptionsSchema>;

/** What codex prints (stderr, exit 1) when `exec resume` names a thread it cannot load. */
export const CODEX_SESSION_NOT_FOUND = /no rollout found for thread id|thread\/resume failed|no (?:thread|session) found/i;

/** Codex's thread ids are UUIDs; anything else would be looked up as a thread NAME (and silently start a new thread). */
export const CODEX_THREAD_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A TOML value for `-c key=value` (a JSON string literal is a valid TOML basic string). */
const toml = (s: string) => JSON.stringify(s);

/** Build the argv for one turn (exported for tests and docs). */
export function codexArgs(opts: CodexOptions, turn: Pick<TurnInput, "model" | "session">, instructionsFile?: string): string[] {
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

/** Codex's token counters (`turn.completed.usage`, rollout `token_count.info.total_token_usage`). */
export interface CodexTotals {
  input_tokens: number;
  cached_input_tokens: number;
  output_tokens: number;
  reasoning_output_tokens: number;
}

function totalsOf(u: unknown): CodexTotals | undefined {
  if (!u || typeof u !== "object") return undefined;
  const o = u as Record<string, unknown>;
  const n = (k: string) => (typeof o[k] === "number" && Number.isFinite(o[k]) ? (o[k] as number) : 0);
  if (typeof o.input_tokens !== "number" && typeof o.output_tokens !== "number") return undefined;
  return { input_tokens: n("input_tokens"), cached_input_tokens: n("cached_input_tokens"), output_tokens: n("output_tokens"), reasoning_output_tokens: n("reasoning_output_tokens") };
}

/** This turn's usage: the running total after it minus the total before it. */
export function codexTurnUsage(after: CodexTotals, before: CodexTotals | undefined): Usage {
  const b = before ?? { input_tokens: 0, cached_input_tokens: 0, output_tokens: 0, reasoning_output_tokens: 0 };
  const d = (k: keyof CodexTotals) => Math.max(0, after[k] - b[k]);
  const promptTokens = d("input_tokens");
  const completionTokens = d("output_tokens");
  const usage: Usage = { promptTokens, completionTokens, totalTokens: promptTokens + completionTokens };
  if (d("cached_input_tokens")) usage.cachedTokens = d("cached_input_tokens");
  if (d("reasoning_output_tokens")) usage.reasoningTokens = d("reasoning_output_tokens");
  return usage;
}

/**
 * The thread's running token total as recorded in its rollout file
 * (`<codexHome>/sessions/YYYY/MM/DD/rollout-<time>-<thread id>.jsonl`, last `token_count` event).
 * Zero totals when the file has no count yet; undefined when the file is not found or unreadable.
 */
export async function codexRolloutTotals(codexHome: string, threadId: string): Promise<CodexTotals | undefined> {
  if (!CODEX_THREAD_ID.test(threadId)) return undefined;
  const file = await findRollout(path.join(codexHome, "sessions"), `-${threadId}.jsonl`);
  if (!file) return undefined;
  let last: CodexTotals = { input_tokens: 0, cached_input_tokens: 0, output_tokens: 0, reasoning_output_tokens: 0 };
  try {
    const rl = createInterface({ input: createReadStream(file, "utf8"), crlfDelay: Infinity });
    for await (const line of rl) {
      if (!line.includes('"token_count"')) continue;
      try {
        const t = totalsOf(JSON.parse(line)?.payload?.info?.total_token_usage);
        if (t) last = t;
      } catch {
        /* a partial line */
      }
    }
  } catch {
    return undefined;
  }
  return last;
}

async function sortedDirs(dir: string): Promise<string[]> {
  try {
    const entries = await readdir(dir, { withFileTypes: true });
    return entries
      .filter((e) => e.isDirectory())
      .map((e) => e.name)
      .sort()
      .reverse();
  } catch {
    return [];
  }
}

/** Newest day first; bounded: sessions/<year>/<month>/<day>/ only. */
async function findRollout(sessions: string, suffix: string): Promise<string | undefined> {
  for (const y of await sortedDirs(sessions)) {
    for (const m of await sortedDirs(path.join(sessions, y))) {
      for (const d of await sortedDirs(path.join(sessions, y, m))) {
        const dir = path.join(sessions, y, m, d);
        let names: string[] = [];
        try {
          names = await readdir(dir);
        } catch {
          continue;
        }
        const hit = names.find((n) => n.startsWith("rollout-") && n.endsWith(suffix));
        if (hit) return path.join(dir, hit);
      }
    }
  }
  return undefined;
}

/** codex's error text → a bridge error. Formats: docs/CLI_FORMATS.md. */
export function codexError(label: string, raw: string): BackendError {
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
  message = message.replace(/,? url: \S+$/, "");
  const transient = status === undefined && /high demand|stream disconnected|connection|timed? ?out|reconnecting/i.test(message);
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
          ? item.changes.map((c: any) => c?.path).filter(Boolean).join(", ")
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
          const failed = item.status === "failed" || (typeof item.exit_code === "number" && item.exit_code !== 0) || !!item.error;
          const why = failed ? String(item.error?.message ?? item.aggregated_output ?? "").trim().slice(0, 300) : "";
          out.push({ type: "tool_activity", name, status: failed ? "failed" : "completed", ...(why ? { detail: why } : {}) });
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
        return [{ type: "error", error: { code: "session_not_found", message: `${this.label}: ${this.failed}`, status: 404 } }];
      }
      return [{ type: "error", error: codexError(this.label, this.failed) }];
    }
    if (this.completed) {
      const out: BackendEvent[] = [];
      if (this.totals && this.baseline !== undefined) out.push({ type: "usage", usage: codexTurnUsage(this.totals, this.baseline ?? undefined) });
      out.push({ type: "done", finishReason: "stop" });
      return out;
    }
    if (this.resuming && !this.threadId && CODEX_SESSION_NOT_FOUND.test(end.stderr)) {
      const line = end.stderr.split("\n").find((l) => CODEX_SESSION_NOT_FOUND.test(l))?.trim() ?? stderrTail(end.stderr);
      return [{ type: "error", error: { code: "session_not_found", message: `${this.label}: ${line.replace(/^Error:\s*/, "")}`, status: 404 } }];
    }
    if (this.lastError) return [{ type: "error", error: codexError(this.label, this.lastError) }];
    const stderr = stderrTail(end.stderr);
    return [
      {
        type: "error",
        error: { code: "backend_failed", message: `${this.label} exited ${end.code ?? end.signal} without finishing the turn${stderr ? `: ${stderr}` : ""}`, status: 502 },
      },
    ];
  }
}

/** Running totals remembered per thread (for the next turn's usage); bounded. */
const MAX_REMEMBERED_THREADS = 2000;

export class CodexBackend extends CliBackendBase<CodexOptions> {
  readonly type = "codex";
  private readonly totals = new Map<string, CodexTotals>();
  /** Pid of the most recent turn's process (for tests and diagnostics). */

  constructor(name: string, opts: CodexOptions, deps: BackendDeps) {
    super(name, opts, deps, { places: [], label: "Codex CLI", npmPackage: "@openai/codex" });
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
      yield { type: "error", error: { code: "session_not_found", message: `codex: "${resume.slice(0, 80)}" is not a codex thread id`, status: 404 } };
      return;
    }
    const env = this.env();
    const cwd = conversationCwd(turn, this.deps.dataDir, this.opts.cwd);
    let baseline: CodexTotals | null | undefined = null;
    if (resume) baseline = this.totals.get(resume) ?? (await codexRolloutTotals(this.codexHome(env), resume));
    const instructions =
      this.opts.systemPromptFile && turn.prompt.system ? writeTurnFile(this.deps.dataDir, "codex-system-", "instructions.md", turn.prompt.system) : undefined;
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
      if (resume && mapper.threadId && mapper.threadId !== resume) log.warn({ requested: resume, got: mapper.threadId }, "codex resumed a different thread than requested");
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
};
