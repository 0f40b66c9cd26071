/**
 * What `codex exec --json` prints, as bridge events for one turn (`CodexStreamMapper`): the
 * thread's id, agent messages, reasoning, tool items as tool_activity, the thread's running usage
 * turned into the turn's, and how the turn ended. Also codex's error text as a bridge error
 * (`codexError`, the warm path's too) and the stderr that means an unknown or busy thread.
 */
import type { ProcessEnd } from "../../core/util/process.js";
import { type CliTurnMapper, joinSeparator, stderrTail } from "../cli/base.js";
import { limitErrorOf } from "../cli/limits.js";
import type { BackendError, BackendEvent } from "../contract/backend.js";
import { type CodexTotals, codexTurnUsage, totalsOf } from "./usage.js";

/**
 * What codex prints (stderr, exit 1) when `exec resume` names a thread it cannot load — but not
 * `thread/resume failed: thread <id> already has an active writer`: the thread exists and another
 * codex process (a warm app-server of another backend) holds it (`CODEX_THREAD_BUSY`).
 */
export const CODEX_SESSION_NOT_FOUND =
  /no rollout found for thread id|thread\/resume failed(?!.*already has an active writer)|no (?:thread|session) found/i;
/** Another codex process has the thread open for writing. */
export const CODEX_THREAD_BUSY = /already has an active writer/i;

/**
 * codex's error text → a bridge error. Formats: docs/CLI_FORMATS.md. `knownStatus`: the model
 * API's HTTP status when codex reported it apart from the text (the app-server's `codexErrorInfo`).
 */
export function codexError(label: string, raw: string, knownStatus?: number, timeZone?: string): BackendError {
  // A usage limit ("You've hit your usage limit … try again at 6:37 AM", codex's local time), a
  // quota, a 429 after codex's own retries, a refused key or login: src/backends/cli/limits.ts.
  const limited = limitErrorOf(label, raw, {
    now: Date.now(),
    ...(knownStatus ? { status: knownStatus } : {}),
    timeZone,
  });
  if (limited) return limited;
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
    /** The CLI's `TZ`: codex prints a usage limit's reset in its local time. */
    private readonly timeZone?: string,
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

  /** `turn.completed` came and no `turn.failed` (a cold turn ends there, src/backends/cli/base.ts). */
  settled(): boolean {
    return this.completed && this.failed === undefined;
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
      return [{ type: "error", error: codexError(this.label, this.failed, undefined, this.timeZone) }];
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
    if (this.lastError)
      return [{ type: "error", error: codexError(this.label, this.lastError, undefined, this.timeZone) }];
    const stderr = stderrTail(end.stderr);
    const limited = stderr ? limitErrorOf(this.label, stderr, { now: Date.now() }) : undefined;
    if (limited) return [{ type: "error", error: limited }];
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
