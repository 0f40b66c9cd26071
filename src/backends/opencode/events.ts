/**
 * The events of `opencode serve` (its `/global/event` SSE stream, OpenCode 1.18) turned into bridge
 * events for one turn. A turn owns one user message (whose id the bridge chose, `messageId`); the
 * assistant messages answering it carry it as `parentID`, and only their parts are the answer —
 * never the prompt's own text part, nor a late event of an earlier (aborted) turn of the session.
 *
 * What the server sends for a turn (observed): `message.updated` (the user message, then each
 * assistant message), `message.part.updated` (a part began or changed: `text` / `reasoning` with
 * the text so far and `time.end` once finished, `tool` with its state, `step-start`, `step-finish`
 * with tokens and reason), `message.part.delta` ({partID, field: "text", delta} — the tokens),
 * `session.error` ({error: {name, data: {message, statusCode?, isRetryable?}}}), then
 * `session.status` {type: "idle"} and `session.idle` when the turn is over.
 */
import { headerReset, limitError, recogniseHttpLimit, recogniseLimitText } from "../cli/limits.js";
import type { BackendEvent, Usage } from "../contract/backend.js";

/** One event's payload: `{type, properties}`. */
export interface OcEvent {
  type?: string;
  properties?: Record<string, unknown>;
}

interface OcPart {
  id?: string;
  messageID?: string;
  type?: string;
  text?: string;
  tool?: string;
  reason?: string;
  time?: { end?: number };
  state?: { status?: string; title?: string; error?: string };
  tokens?: OpencodeTokens;
}

interface OcError {
  name?: string;
  data?: {
    message?: string;
    statusCode?: number;
    isRetryable?: boolean;
    /** `APIError`: the provider's answer (OpenCode 1.18 passes them on). */
    responseHeaders?: Record<string, string>;
    responseBody?: string;
  };
}

export type OcTurnError = {
  code: "upstream_error" | "aborted" | "limit_reached" | "auth_failed";
  message: string;
  status: number;
  retryable?: boolean;
  resetAt?: number;
};

/** A message id in OpenCode's own ascending format (`msg_` + 12 hex of time + 14 random). */
let idCounter = 0;
let idLastMs = 0;
export function ascendingMessageId(now = Date.now()): string {
  if (now !== idLastMs) {
    idLastMs = now;
    idCounter = 0;
  }
  idCounter = Math.min(idCounter + 1, 0xfff);
  const hex = (BigInt(now) * 0x1000n + BigInt(idCounter)).toString(16).padStart(12, "0").slice(-12);
  const chars = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
  let rand = "";
  for (let i = 0; i < 14; i++) rand += chars[Math.floor(Math.random() * chars.length)];
  return `msg_${hex}${rand}`;
}

/** The state of one turn's answer, fed with the session's events in order. */
export class OpencodeTurnEvents {
  /** The user message was seen: the server took the prompt (later idle/error events are this turn's). */
  started = false;
  /** The session went idle after taking the prompt: the turn is over. */
  idle = false;
  /** Events produced so far that a client sees (text, reasoning, tools). */
  produced = 0;
  error: OcTurnError | undefined;
  finish: "stop" | "length" = "stop";
  usage: Usage = { promptTokens: 0, completionTokens: 0, totalTokens: 0 };
  sawUsage = false;
  steps = 0;
  private readonly assistant = new Set<string>();
  private readonly partType = new Map<string, string>();
  /** Characters of each text/reasoning part already emitted. */
  private readonly emitted = new Map<string, number>();
  private readonly toolStatus = new Map<string, string>();
  private lastTextPart: string | undefined;
  private lastText = "";
  /** Parts of calls of the client's tools (`bridged`) that have not finished: the calls the CLI is making now. */
  private readonly bridgedOpen = new Set<string>();

  /**
   * `bridged`: OpenCode's names of the client's tools (`openclaw_<tool>`, src/backends/client-tools). Their
   * tool parts are not the agent's own activity — each call reaches the bridge through its MCP
   * endpoint and is announced as a `tool_call` — so they are counted (`bridgedCalls`), never mapped.
   */
  constructor(
    readonly messageId: string,
    private readonly bridged?: ReadonlySet<string>,
  ) {}

  /** Calls of the client's tools the CLI has started and that have not finished (pending or running). */
  get bridgedCalls(): number {
    return this.bridgedOpen.size;
  }

  /** The answer goes on in a new response (after a client tool call): its first text needs no separator. */
  newResponse(): void {
    this.lastTextPart = undefined;
    this.lastText = "";
  }

  /** The bridge events for one server event of this turn's session. */
  map(ev: OcEvent): BackendEvent[] {
    const p = ev.properties ?? {};
    switch (ev.type) {
      case "message.updated": {
        const info = (p.info ?? {}) as { id?: string; role?: string; parentID?: string };
        if (info.id === this.messageId) this.started = true;
        else if (info.role === "assistant" && info.parentID === this.messageId && info.id) {
          this.started = true;
          this.assistant.add(info.id);
        }
        return [];
      }
      case "message.part.updated":
        return this.part((p.part ?? {}) as OcPart);
      case "message.part.delta": {
        const { messageID, partID, field, delta } = p as {
          messageID?: string;
          partID?: string;
          field?: string;
          delta?: string;
        };
        if (
          !messageID ||
          !partID ||
          !this.assistant.has(messageID) ||
          field !== "text" ||
          typeof delta !== "string" ||
          !delta
        )
          return [];
        const type = this.partType.get(partID);
        if (type !== "text" && type !== "reasoning") return [];
        this.emitted.set(partID, (this.emitted.get(partID) ?? 0) + delta.length);
        return [this.textEvent(type, partID, delta)];
      }
      case "session.error": {
        if (!this.started || this.error) return [];
        this.error = turnError(p.error as OcError | undefined);
        return [];
      }
      case "session.status": {
        const status = (p.status ?? {}) as { type?: string; message?: string };
        if (status.type === "idle" && this.started) this.idle = true;
        // OpenCode retries a retryable APIError without end. A quota or usage limit will not pass by
        // retrying: the turn ends with it (the session is then stopped, serve-turn.ts).
        if (status.type === "retry" && this.started && !this.error && typeof status.message === "string") {
          const found = recogniseLimitText(status.message, { now: Date.now() });
          if (found && (found.kind === "quota" || found.kind === "usage")) {
            const e = limitError("opencode", found);
            this.error = { ...e, code: "limit_reached", status: 429 };
          }
        }
        return [];
      }
      case "session.idle":
        if (this.started) this.idle = true;
        return [];
      default:
        return [];
    }
  }

  private part(part: OcPart): BackendEvent[] {
    if (!part.id || !part.messageID || !this.assistant.has(part.messageID)) return [];
    if (part.type) this.partType.set(part.id, part.type);
    switch (part.type) {
      case "text":
      case "reasoning": {
        // The deltas carried the text; a finished part the deltas did not (wholly) cover adds the rest.
        const text = part.text ?? "";
        const done = this.emitted.get(part.id) ?? 0;
        if (text.length <= done) return [];
        this.emitted.set(part.id, text.length);
        return [this.textEvent(part.type, part.id, text.slice(done))];
      }
      case "tool": {
        const status = part.state?.status;
        if (part.tool && this.bridged?.has(part.tool)) {
          if (status === "pending" || status === "running") this.bridgedOpen.add(part.id);
          else this.bridgedOpen.delete(part.id);
          return [];
        }
        const mapped =
          status === "error"
            ? "failed"
            : status === "completed"
              ? "completed"
              : status === "running"
                ? "started"
                : undefined;
        if (!mapped || this.toolStatus.get(part.id) === mapped) return [];
        this.toolStatus.set(part.id, mapped);
        this.produced++;
        const detail = part.state?.title || part.state?.error;
        return [{ type: "tool_activity", name: part.tool ?? "tool", status: mapped, ...(detail ? { detail } : {}) }];
      }
      case "step-finish": {
        this.steps++;
        if (part.tokens) {
          addOpencodeTokens(this.usage, part.tokens);
          this.sawUsage = true;
        }
        if (part.reason === "length") this.finish = "length";
        return [];
      }
      default:
        return [];
    }
  }

  private textEvent(type: "text" | "reasoning", partId: string, chunk: string): BackendEvent {
    this.produced++;
    if (type === "reasoning") return { type: "reasoning", text: chunk };
    let text = chunk;
    if (this.lastTextPart !== undefined && this.lastTextPart !== partId) {
      // A new text part (a later step): keep words of successive steps apart.
      text = textSeparator(this.lastText, chunk) + chunk;
    }
    this.lastTextPart = partId;
    this.lastText = (this.lastText + chunk).slice(-64);
    return { type: "text", text };
  }

  /** The events that end the turn once the session is idle (or the error that ended it). */
  finishEvents(): BackendEvent[] {
    if (this.error) return [{ type: "error", error: this.error }];
    const out: BackendEvent[] = [];
    if (this.sawUsage) out.push({ type: "usage", usage: { ...this.usage } });
    out.push({ type: "done", finishReason: this.finish });
    return out;
  }
}

/** As `joinSeparator` of the CLI backends: a blank line between two steps' texts unless spaced. */
function textSeparator(previous: string, next: string): string {
  if (!previous || /\s$/.test(previous) || /^\s/.test(next)) return "";
  return "\n\n";
}

/** A `session.error` as the bridge's error (the wording of the cold path's `error` events). */
export function turnError(err: OcError | undefined, now = Date.now()): OcTurnError {
  if (err?.name === "MessageAbortedError") return { code: "aborted", message: "the turn was cancelled", status: 499 };
  const limited = opencodeLimit(err, now);
  if (limited) return limited;
  const data = err?.data;
  const status = data?.statusCode;
  return {
    code: "upstream_error",
    message: `opencode: ${data?.message ?? err?.name ?? "unknown error"}${status ? ` (model API status ${status})` : ""}`,
    status: status === 429 ? 429 : 502,
    retryable: data?.isRetryable ?? status === 429,
  };
}

/** OpenCode's token counts of one step (`step-finish` / `step_finish` parts). */
export interface OpencodeTokens {
  input?: number;
  output?: number;
  reasoning?: number;
  cache?: { read?: number; write?: number };
}

/** Add one step's tokens to a turn's usage (cache reads and writes are prompt tokens; reasoning is completion). */
export function addOpencodeTokens(usage: Usage, t: OpencodeTokens): void {
  const cacheRead = t.cache?.read ?? 0;
  usage.promptTokens += (t.input ?? 0) + cacheRead + (t.cache?.write ?? 0);
  usage.completionTokens += (t.output ?? 0) + (t.reasoning ?? 0);
  usage.reasoningTokens = (usage.reasoningTokens ?? 0) + (t.reasoning ?? 0);
  usage.cachedTokens = (usage.cachedTokens ?? 0) + cacheRead;
  usage.totalTokens = usage.promptTokens + usage.completionTokens;
}

/**
 * An OpenCode error (`session.error` of `serve`, the `error` line of `run`) that is a provider's
 * limit or a refused key → `limit_reached` / `auth_failed` (src/backends/cli/limits.ts). OpenCode
 * retries a retryable APIError (a 429) by itself, without end, showing `session.status` `retry`;
 * what reaches an error is a 401/403/402, or a limit the provider's words or headers name
 * (`insufficient_quota`, "Rate limit reached…", `FreeUsageLimitError`, a Retry-After).
 */
export function opencodeLimit(err: OcError | undefined, now = Date.now()): OcTurnError | undefined {
  const data = err?.data;
  if (!err || !data) return undefined;
  const status = data.statusCode;
  const text = [data.message, data.responseBody].filter((t): t is string => typeof t === "string" && !!t).join("\n");
  const headerAt = data.responseHeaders ? headerReset(data.responseHeaders, now) : undefined;
  let found =
    status === 401 || status === 403 || status === 402
      ? recogniseHttpLimit(status, data.responseBody ?? data.message ?? "", data.responseHeaders, now)
      : recogniseLimitText(text, { now });
  if (!found && status === 429 && headerAt !== undefined) found = { kind: "rate", words: data.message ?? "HTTP 429" };
  if (!found) return undefined;
  if (found.kind !== "auth" && headerAt !== undefined) found.resetAt = headerAt;
  const e = limitError("opencode", found);
  return { ...e, code: e.code as "limit_reached" | "auth_failed", status: e.status ?? 429 };
}
