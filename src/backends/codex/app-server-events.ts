/**
 * Codex app-server notifications of ONE turn → bridge events (observed with codex 0.169.0; the
 * protocol's types: `codex app-server generate-ts`, docs/CLI_FORMATS.md):
 *
 * - `item/agentMessage/delta` {itemId, delta} → `text` as it streams (separate agent messages of
 *   one turn are joined with a blank line, as the cold path joins whole items); an
 *   `item/completed` agentMessage adds only what no delta carried.
 * - `item/reasoning/summaryTextDelta` {itemId, delta, summaryIndex} → `reasoning`.
 * - `item/started` / `item/completed` of `commandExecution`, `mcpToolCall`, `webSearch`,
 *   `fileChange` → `tool_activity` (`shell`, `<server>.<tool>`, `web_search`, `apply_patch`).
 * - `thread/tokenUsage/updated` {tokenUsage: {total, last}}: `total` is the THREAD's running total,
 *   `last` the latest model call's. This turn's usage = total now − (total − last) at the turn's
 *   first update.
 * - `error` {error: {message, codexErrorInfo}, willRetry}: a retry notice when `willRetry`, else
 *   the turn's failure; `turn/completed` {turn: {status: completed | failed | interrupted, error}}
 *   decides.
 * - An MCP tool call is an `mcpToolCall` item {id, server, tool, arguments, status, result, error}:
 *   `item/started` comes before codex calls the server (and before any approval request for it),
 *   `item/completed` when the call ended (`completed`, or `failed` with `error.message`).
 * Notifications of another thread or turn are ignored.
 */
import type { BackendError, BackendEvent, Usage } from "../contract/backend.js";

/** codex's error text (and the model API's HTTP status when codex names one) → a bridge error. */
export type CodexErrorOf = (message: string, httpStatus?: number) => BackendError;

/** A `TokenUsageBreakdown` reading. */
export interface CodexTokens {
  inputTokens: number;
  cachedInputTokens: number;
  outputTokens: number;
  reasoningOutputTokens: number;
}

const TOOL_ITEMS = new Set(["commandExecution", "mcpToolCall", "webSearch", "fileChange"]);

type Obj = Record<string, unknown>;
const obj = (v: unknown): Obj => (v && typeof v === "object" && !Array.isArray(v) ? (v as Obj) : {});
const str = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);

function tokens(v: unknown): CodexTokens | undefined {
  const o = obj(v);
  if (typeof o.inputTokens !== "number" && typeof o.outputTokens !== "number") return undefined;
  const n = (k: string) => (typeof o[k] === "number" && Number.isFinite(o[k]) ? (o[k] as number) : 0);
  return {
    inputTokens: n("inputTokens"),
    cachedInputTokens: n("cachedInputTokens"),
    outputTokens: n("outputTokens"),
    reasoningOutputTokens: n("reasoningOutputTokens"),
  };
}

/** The model API's HTTP status inside codex's `codexErrorInfo`, when it names one. */
export function codexErrorStatus(info: unknown): number | undefined {
  if (typeof info === "string") {
    const byName: Record<string, number> = {
      badRequest: 400,
      unauthorized: 401,
      modelNotFound: 404,
      rateLimitExceeded: 429,
      usageLimitExceeded: 429,
      internalServerError: 500,
      serverOverloaded: 503,
    };
    return byName[info];
  }
  for (const v of Object.values(obj(info))) {
    const code = obj(v).httpStatusCode;
    if (typeof code === "number") return code;
  }
  return undefined;
}

function toolName(item: Obj): string {
  switch (item.type) {
    case "commandExecution":
      return "shell";
    case "mcpToolCall":
      return [item.server, item.tool].filter((x) => typeof x === "string" && x).join(".") || "mcp";
    case "fileChange":
      return "apply_patch";
    case "webSearch":
      return "web_search";
    default:
      return String(item.type);
  }
}

function short(v: string | undefined, max = 200): string | undefined {
  if (!v) return undefined;
  return v.length > max ? `${v.slice(0, max - 3)}...` : v;
}

function toolDetail(item: Obj): string | undefined {
  if (typeof item.command === "string") return short(item.command);
  if (typeof item.query === "string") return short(item.query);
  if (Array.isArray(item.changes))
    return short(
      item.changes
        .map((c) => str(obj(c).path))
        .filter(Boolean)
        .join(", "),
    );
  return undefined;
}

/** An `mcpToolCall` item starting or ending (the driver counts the calls of the client's tools with it). */
export function mcpToolCallOf(
  method: string,
  params: unknown,
): { phase: "started" | "completed"; id: string; server: string } | undefined {
  if (method !== "item/started" && method !== "item/completed") return undefined;
  const item = obj(obj(params).item);
  const id = str(item.id);
  const server = str(item.server);
  if (item.type !== "mcpToolCall" || !id || !server) return undefined;
  return { phase: method === "item/started" ? "started" : "completed", id, server };
}

/** This turn's usage from the thread totals before and after it. */
export function codexUsage(after: CodexTokens, before: CodexTokens): Usage {
  const d = (k: keyof CodexTokens) => Math.max(0, after[k] - before[k]);
  const promptTokens = d("inputTokens");
  const completionTokens = d("outputTokens");
  const usage: Usage = { promptTokens, completionTokens, totalTokens: promptTokens + completionTokens };
  if (d("cachedInputTokens")) usage.cachedTokens = d("cachedInputTokens");
  if (d("reasoningOutputTokens")) usage.reasoningTokens = d("reasoningOutputTokens");
  return usage;
}

export class CodexTurnMapper {
  /** The turn's id once known (from `turn/start`'s answer or `turn/started`). */
  turnId: string | undefined;
  /** How the turn ended (`turn/completed`), undefined while it runs. */
  status: "completed" | "failed" | "interrupted" | undefined;
  /** Text, reasoning or tool activity was produced. */
  produced = false;
  /** Retry notices (`error` with willRetry) and warnings seen, for the log. */
  readonly notes: string[] = [];
  private failure: { message: string; httpStatus?: number } | undefined;
  private lastError: { message: string; httpStatus?: number } | undefined;
  private textTail = "";
  private textItem: string | undefined;
  private readonly streamed = new Map<string, string>();
  private reasoningKey: string | undefined;
  private readonly reasoned = new Set<string>();
  private readonly tools = new Map<string, string>();
  private baseline: CodexTokens | undefined;
  private latest: CodexTokens | undefined;

  constructor(
    private readonly label: string,
    private readonly threadId: string,
    private readonly errorOf: CodexErrorOf,
  ) {}

  /** Whether `turn/completed` for this turn has been seen. */
  get finished(): boolean {
    return this.status !== undefined;
  }

  private mine(p: Obj): boolean {
    const thread = str(p.threadId);
    if (thread && thread !== this.threadId) return false;
    const turn = str(p.turnId) ?? str(obj(p.turn).id);
    if (turn && this.turnId && turn !== this.turnId) return false;
    return true;
  }

  private text(itemId: string, delta: string): BackendEvent[] {
    if (!delta) return [];
    let sep = "";
    if (itemId !== this.textItem) {
      if (this.textTail && !/\s$/.test(this.textTail) && !/^\s/.test(delta)) sep = "\n\n";
      this.textItem = itemId;
    }
    this.streamed.set(itemId, (this.streamed.get(itemId) ?? "") + delta);
    this.textTail = (this.textTail + sep + delta).slice(-64);
    this.produced = true;
    return [{ type: "text", text: sep + delta }];
  }

  private reasoning(key: string, delta: string, itemId: string): BackendEvent[] {
    if (!delta) return [];
    const sep =
      this.reasoningKey !== undefined && this.reasoningKey !== key && this.reasoningKey.startsWith(`${itemId}#`)
        ? "\n\n"
        : "";
    this.reasoningKey = key;
    this.reasoned.add(itemId);
    this.produced = true;
    return [{ type: "reasoning", text: sep + delta }];
  }

  private tool(item: Obj, phase: "started" | "completed"): BackendEvent[] {
    const id = str(item.id);
    const out: BackendEvent[] = [];
    if (phase === "started") {
      if (id && this.tools.has(id)) return out;
      const name = toolName(item);
      if (id) this.tools.set(id, name);
      out.push({ type: "tool_activity", name, status: "started", detail: toolDetail(item) });
    } else {
      const name = (id && this.tools.get(id)) || toolName(item);
      if (!id || !this.tools.has(id))
        out.push({ type: "tool_activity", name, status: "started", detail: toolDetail(item) });
      if (id) this.tools.delete(id);
      const failed =
        item.status === "failed" ||
        item.status === "declined" ||
        (typeof item.exitCode === "number" && item.exitCode !== 0) ||
        !!item.error;
      const why = failed
        ? String(str(obj(item.error).message) ?? str(item.aggregatedOutput) ?? item.status ?? "")
            .trim()
            .slice(0, 300)
        : "";
      out.push({
        type: "tool_activity",
        name,
        status: failed ? "failed" : "completed",
        ...(why ? { detail: why } : {}),
      });
    }
    this.produced = true;
    return out;
  }

  /** One notification → events (never done/error: `final()` gives those). */
  onNotification(method: string, params: unknown): BackendEvent[] {
    const p = obj(params);
    if (!this.mine(p)) return [];
    switch (method) {
      case "turn/started":
        this.turnId ??= str(obj(p.turn).id);
        return [];
      case "item/agentMessage/delta":
        return this.text(str(p.itemId) ?? "", str(p.delta) ?? "");
      case "item/reasoning/summaryTextDelta": {
        const itemId = str(p.itemId) ?? "";
        return this.reasoning(`${itemId}#${String(p.summaryIndex ?? 0)}`, str(p.delta) ?? "", itemId);
      }
      case "item/started": {
        const item = obj(p.item);
        return TOOL_ITEMS.has(String(item.type)) ? this.tool(item, "started") : [];
      }
      case "item/completed": {
        const item = obj(p.item);
        const id = str(item.id) ?? "";
        if (item.type === "agentMessage") {
          // Only what the deltas did not carry (a CLI or provider that sent none, or a lost tail).
          const full = str(item.text) ?? "";
          const got = this.streamed.get(id) ?? "";
          this.streamed.delete(id);
          return full.length > got.length && full.startsWith(got) ? this.text(id, full.slice(got.length)) : [];
        }
        if (item.type === "reasoning") {
          const summary = Array.isArray(item.summary)
            ? item.summary.filter((s): s is string => typeof s === "string" && s !== "")
            : [];
          if (this.reasoned.has(id) || summary.length === 0) return [];
          return this.reasoning(`${id}#0`, summary.join("\n\n"), id);
        }
        return TOOL_ITEMS.has(String(item.type)) ? this.tool(item, "completed") : [];
      }
      case "thread/tokenUsage/updated": {
        const u = obj(p.tokenUsage);
        const total = tokens(u.total);
        if (!total) return [];
        if (!this.baseline) {
          const last = tokens(u.last) ?? {
            inputTokens: 0,
            cachedInputTokens: 0,
            outputTokens: 0,
            reasoningOutputTokens: 0,
          };
          this.baseline = {
            inputTokens: total.inputTokens - last.inputTokens,
            cachedInputTokens: total.cachedInputTokens - last.cachedInputTokens,
            outputTokens: total.outputTokens - last.outputTokens,
            reasoningOutputTokens: total.reasoningOutputTokens - last.reasoningOutputTokens,
          };
        }
        this.latest = total;
        return [];
      }
      case "error": {
        const e = obj(p.error);
        const message = str(e.message) ?? "codex reported an error";
        const httpStatus = codexErrorStatus(e.codexErrorInfo);
        if (p.willRetry === true) this.notes.push(message);
        else this.lastError = { message, ...(httpStatus !== undefined ? { httpStatus } : {}) };
        return [];
      }
      case "warning":
        if (typeof p.message === "string") this.notes.push(p.message);
        return [];
      case "turn/completed": {
        const turn = obj(p.turn);
        const status = str(turn.status);
        this.status = status === "failed" ? "failed" : status === "interrupted" ? "interrupted" : "completed";
        if (this.status === "failed") {
          const e = obj(turn.error);
          const message = str(e.message);
          const httpStatus = codexErrorStatus(e.codexErrorInfo);
          this.failure = message
            ? { message, ...(httpStatus !== undefined ? { httpStatus } : {}) }
            : (this.lastError ?? { message: "the turn failed" });
        }
        return [];
      }
      default:
        return [];
    }
  }

  /** The closing events once the turn completed: usage + done, or the error. */
  final(): BackendEvent[] {
    if (this.status === "failed") {
      const f = this.failure ?? this.lastError ?? { message: "the turn failed" };
      return [{ type: "error", error: this.errorOf(f.message, f.httpStatus) }];
    }
    if (this.status === "interrupted") {
      return [
        {
          type: "error",
          error: {
            code: "backend_failed",
            message: `${this.label} interrupted the turn`,
            status: 502,
            retryable: true,
          },
        },
      ];
    }
    const out: BackendEvent[] = [];
    if (this.latest && this.baseline) out.push({ type: "usage", usage: codexUsage(this.latest, this.baseline) });
    out.push({ type: "done", finishReason: "stop" });
    return out;
  }

  /** The error to report when the process ended mid-turn with a failure already announced. */
  pendingError(): BackendEvent | undefined {
    return this.lastError
      ? { type: "error", error: this.errorOf(this.lastError.message, this.lastError.httpStatus) }
      : undefined;
  }
}
