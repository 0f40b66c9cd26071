/**
 * Claude Code backend: `claude -p --output-format stream-json --verbose --include-partial-messages`
 * with the prompt on stdin, `--resume <session id>` on later turns and the bootstrap through
 * `--append-system-prompt` (or `--system-prompt`) on every turn. A turn with images sends one
 * `--input-format stream-json` user message instead: the same text, then the images as Anthropic
 * image blocks (the warm process always reads such messages). Token deltas come from
 * `stream_event` lines; the final `result` line decides success (exit codes are not trusted).
 * Observed formats: docs/CLI_FORMATS.md.
 */
import { randomUUID } from "node:crypto";
import { childLogger } from "../../core/log/logger.js";
import type { ProcessEnd } from "../../core/util/process.js";
import { CLIENT_TOOLS_SERVER, toolsFingerprint } from "../client-tools/types.js";
import { StreamJsonWarm, warmClientTools, type StreamJsonStandby } from "../cli/stream-json-warm.js";
import { userMessage } from "../cli/stream-json.js";
import {
  CliBackendBase,
  conversationCwd,
  joinSeparator,
  stderrTail,
  toolDetail,
  writeTurnFile,
  type CliTurnMapper,
} from "../cli/base.js";
import { limitError, limitErrorOf, recogniseLimitText } from "../cli/limits.js";
import type { BackendDeps, BackendModule } from "../module.js";
import { claudeCodeDescriptor, type ClaudeCodeOptions } from "./options.js";
import type {
  BackendError,
  BackendEvent,
  DiscoveredModel,
  FinishReason,
  TurnInput,
  Usage,
} from "../contract/backend.js";

export {
  CLAUDE_PERMISSION_MODES,
  CLAUDE_SAFE_ALLOWED_TOOLS,
  CLAUDE_SAFE_DISALLOWED_TOOLS,
  claudeCodeOptionsSchema,
  type ClaudeCodeOptions,
} from "./options.js";

/** What claude prints when `--resume` names a session it cannot load (unknown id, deleted transcript, other cwd). */
export const CLAUDE_SESSION_NOT_FOUND =
  /No conversation found with session ID|--resume requires a valid session ID|is not a UUID and does not match any session title|session .{0,80}not found/i;

/**
 * The control request that gives a started claude (a standby) its bootstrap: `initialize` with
 * `appendSystemPrompt` (or `systemPrompt` in `replace` mode), which claude 2.1.197 keeps for the
 * process's life, exactly as the flags (checked: the same system prompt). Only the first
 * `initialize` of a process is applied.
 */
export function claudeInitialize(system: string, mode: ClaudeCodeOptions["systemPromptMode"]): Record<string, unknown> {
  return {
    type: "control_request",
    request_id: `clawbridge-init-${randomUUID()}`,
    request: {
      subtype: "initialize",
      ...(mode === "replace" ? { systemPrompt: system } : { appendSystemPrompt: system }),
    },
  };
}

/** Build the argv for one turn (exported for tests and docs). `mcpConfig`: the client's tools as an MCP server (a private file). */
export function claudeArgs(
  opts: ClaudeCodeOptions,
  turn: Pick<TurnInput, "model" | "prompt" | "session">,
  systemFile?: string,
  mcpConfig?: string,
): string[] {
  const args = ["-p", "--output-format", "stream-json", "--verbose"];
  if (opts.includePartialMessages) args.push("--include-partial-messages");
  if (turn.model && turn.model !== opts.defaultModelName) args.push("--model", turn.model);
  if (turn.session.backendSessionId) args.push("--resume", turn.session.backendSessionId);
  if (turn.prompt.system) {
    const flag = opts.systemPromptMode === "replace" ? "--system-prompt" : "--append-system-prompt";
    if (systemFile) args.push(`${flag}-file`, systemFile);
    else args.push(flag, turn.prompt.system);
  }
  args.push("--permission-mode", opts.permissionMode);
  // -p cannot ask for permission: the client's tools are allowed as a whole server.
  const allowed = mcpConfig ? [...opts.allowedTools, `mcp__${CLIENT_TOOLS_SERVER}`] : opts.allowedTools;
  if (mcpConfig) args.push("--mcp-config", mcpConfig);
  if (allowed.length) args.push("--allowedTools", allowed.join(","));
  if (opts.disallowedTools.length) args.push("--disallowedTools", opts.disallowedTools.join(","));
  if (opts.tools) args.push("--tools", opts.tools.join(","));
  args.push(...opts.args);
  return args;
}

interface ClaudeUsage {
  input_tokens?: number;
  output_tokens?: number;
  cache_creation_input_tokens?: number;
  cache_read_input_tokens?: number;
}

function toUsage(u: ClaudeUsage): Usage {
  const cached = u.cache_read_input_tokens ?? 0;
  const promptTokens = (u.input_tokens ?? 0) + (u.cache_creation_input_tokens ?? 0) + cached;
  const completionTokens = u.output_tokens ?? 0;
  return {
    promptTokens,
    completionTokens,
    totalTokens: promptTokens + completionTokens,
    ...(cached ? { cachedTokens: cached } : {}),
  };
}

function upstreamError(label: string, message: string, apiStatus: number | undefined): BackendError {
  const retryable = apiStatus === 429 || apiStatus === 529 || (apiStatus !== undefined && apiStatus >= 500);
  return {
    code: "upstream_error",
    message: `${label}: ${message}${apiStatus && !message.includes(String(apiStatus)) ? ` (model API status ${apiStatus})` : ""}`,
    status: apiStatus === 429 ? 429 : 502,
    retryable,
  };
}

/**
 * Maps Claude Code's stream-json lines to bridge events for one turn. Exported for unit tests.
 * Text comes from `stream_event` deltas; a whole `assistant` message only counts when no delta of
 * that message was seen (partial messages off) and it is not a synthetic error message.
 */
export class ClaudeStreamMapper implements CliTurnMapper {
  sessionId: string | undefined;
  private result: Record<string, any> | undefined;
  private readonly streamedMessages = new Set<string>();
  private currentMessageId: string | undefined;
  private textSoFar = "";
  private blockIsText = new Map<number, boolean>();
  private pendingSeparator = false;
  private readonly tools = new Map<string, string>();
  /** A `rate_limit_event` said the account's limit was hit: when it resets (ms), exact to the second. */
  private limitResetAt: number | undefined;

  constructor(
    private readonly label: string,
    private readonly resuming: boolean,
  ) {}

  onEvent(ev: Record<string, any>): BackendEvent[] {
    const out: BackendEvent[] = [];
    switch (ev.type) {
      case "system":
        if (ev.subtype === "init" && typeof ev.session_id === "string" && !this.sessionId) {
          this.sessionId = ev.session_id;
          out.push({ type: "session", id: ev.session_id });
        }
        break;
      case "stream_event": {
        // Sub-agent (Task) output is the agent's own business, not the answer.
        if (ev.parent_tool_use_id) break;
        const e = ev.event ?? {};
        if (e.type === "message_start") {
          this.currentMessageId = e.message?.id;
          if (this.currentMessageId) this.streamedMessages.add(this.currentMessageId);
          this.blockIsText.clear();
        } else if (e.type === "content_block_start") {
          const isText = e.content_block?.type === "text";
          this.blockIsText.set(e.index, isText);
          if (isText && this.textSoFar) this.pendingSeparator = true;
        } else if (e.type === "content_block_delta") {
          const d = e.delta ?? {};
          if (d.type === "text_delta" && typeof d.text === "string" && d.text) out.push(...this.text(d.text));
          else if (d.type === "thinking_delta" && typeof d.thinking === "string" && d.thinking)
            out.push({ type: "reasoning", text: d.thinking });
        }
        break;
      }
      case "assistant": {
        const msg = ev.message ?? {};
        const content: any[] = Array.isArray(msg.content) ? msg.content : [];
        const synthetic = msg.model === "<synthetic>" || ev.error !== undefined;
        const streamed = typeof msg.id === "string" && this.streamedMessages.has(msg.id);
        for (const block of content) {
          if (block?.type === "tool_use" && typeof block.id === "string") {
            if (this.tools.has(block.id)) continue;
            this.tools.set(block.id, String(block.name ?? "tool"));
            out.push({
              type: "tool_activity",
              name: String(block.name ?? "tool"),
              status: "started",
              detail: toolDetail(block.input),
            });
          } else if (!streamed && !synthetic && !ev.parent_tool_use_id) {
            if (block?.type === "text" && typeof block.text === "string" && block.text) {
              if (this.textSoFar) this.pendingSeparator = true;
              out.push(...this.text(block.text));
            } else if (block?.type === "thinking" && typeof block.thinking === "string" && block.thinking) {
              out.push({ type: "reasoning", text: block.thinking });
            }
          }
        }
        break;
      }
      case "user": {
        const content: any[] = Array.isArray(ev.message?.content) ? ev.message.content : [];
        for (const block of content) {
          if (block?.type !== "tool_result" || typeof block.tool_use_id !== "string") continue;
          const name = this.tools.get(block.tool_use_id);
          if (!name) continue;
          this.tools.delete(block.tool_use_id);
          const errText = block.is_error ? resultText(block.content) : undefined;
          out.push({
            type: "tool_activity",
            name,
            status: block.is_error ? "failed" : "completed",
            ...(errText ? { detail: errText.slice(0, 300) } : {}),
          });
        }
        break;
      }
      case "rate_limit_event": {
        // Claude Code 2.1.19x, logged in with a subscription: the API's unified limit headers, before its message.
        const info = ev.rate_limit_info ?? {};
        if (info.status === "rejected" && typeof info.resetsAt === "number" && info.resetsAt > 0)
          this.limitResetAt = info.resetsAt < 1e11 ? info.resetsAt * 1000 : info.resetsAt;
        break;
      }
      case "result":
        this.result = ev;
        if (!this.sessionId && typeof ev.session_id === "string" && !ev.is_error) {
          this.sessionId = ev.session_id;
          out.push({ type: "session", id: ev.session_id });
        }
        break;
    }
    return out;
  }

  private text(t: string): BackendEvent[] {
    const sep = this.pendingSeparator ? joinSeparator(this.textSoFar, t) : "";
    this.pendingSeparator = false;
    this.textSoFar = (this.textSoFar + sep + t).slice(-64);
    return [{ type: "text", text: sep + t }];
  }

  /** The `result` line said the turn succeeded (a cold turn ends there, src/backends/cli/base.ts). */
  settled(): boolean {
    const r = this.result;
    return !!r && !r.is_error && (!r.subtype || r.subtype === "success");
  }

  finish(end: ProcessEnd): BackendEvent[] {
    const r = this.result;
    const stderr = stderrTail(end.stderr);
    if (!r) {
      if (this.resuming && CLAUDE_SESSION_NOT_FOUND.test(end.stderr)) {
        return [
          { type: "error", error: { code: "session_not_found", message: `${this.label}: ${stderr}`, status: 404 } },
        ];
      }
      const limited = stderr ? limitErrorOf(this.label, stderr, { now: Date.now() }) : undefined;
      if (limited) return [{ type: "error", error: limited }];
      return [
        {
          type: "error",
          error: {
            code: "backend_failed",
            message: `${this.label} exited ${end.code ?? end.signal} without a result${stderr ? `: ${stderr}` : ""}`,
            status: 502,
          },
        },
      ];
    }
    const errors: string[] = Array.isArray(r.errors) ? r.errors.map(String) : [];
    const resultText = typeof r.result === "string" ? r.result : "";
    if (r.is_error || (r.subtype && r.subtype !== "success")) {
      const why = [...errors, resultText].filter(Boolean).join("; ") || stderr || String(r.subtype ?? "unknown error");
      if (CLAUDE_SESSION_NOT_FOUND.test(why) || (this.resuming && CLAUDE_SESSION_NOT_FOUND.test(end.stderr))) {
        return [{ type: "error", error: { code: "session_not_found", message: `${this.label}: ${why}`, status: 404 } }];
      }
      const apiStatus = typeof r.api_error_status === "number" ? r.api_error_status : undefined;
      const limit = recogniseLimitText(why, { now: Date.now(), ...(apiStatus ? { status: apiStatus } : {}) });
      if (limit) {
        if (limit.kind !== "auth" && this.limitResetAt !== undefined) limit.resetAt = this.limitResetAt;
        return [{ type: "error", error: limitError(this.label, limit) }];
      }
      if (apiStatus !== undefined) return [{ type: "error", error: upstreamError(this.label, why, apiStatus) }];
      if (/^API Error/i.test(resultText)) return [{ type: "error", error: upstreamError(this.label, why, undefined) }];
      if (r.subtype === "error_max_turns") {
        return [
          {
            type: "error",
            error: {
              code: "backend_failed",
              message: `${this.label} stopped: maximum number of agent turns reached`,
              status: 502,
            },
          },
        ];
      }
      return [
        {
          type: "error",
          error: {
            code: "backend_failed",
            message: `${this.label} failed (${r.subtype ?? "error"}): ${why}`,
            status: 502,
          },
        },
      ];
    }
    const out: BackendEvent[] = [];
    // Partial messages off and nothing streamed: the result text is the answer.
    if (!this.textSoFar && resultText) out.push({ type: "text", text: resultText });
    if (r.usage && typeof r.usage === "object") out.push({ type: "usage", usage: toUsage(r.usage as ClaudeUsage) });
    const finish: FinishReason = r.stop_reason === "max_tokens" ? "length" : "stop";
    out.push({ type: "done", finishReason: finish });
    return out;
  }
}

function resultText(content: unknown): string {
  if (typeof content === "string") return content;
  if (Array.isArray(content))
    return content
      .map((c) => (c && typeof c === "object" && typeof (c as any).text === "string" ? (c as any).text : ""))
      .join(" ");
  return "";
}

/** Claude Code's model aliases (`--model`); each follows the newest model of its kind, so they do not go stale. */
export const CLAUDE_MODELS: readonly DiscoveredModel[] = [
  { id: "default", name: "the account's default", input: ["text", "image"], toolCalls: true },
  { id: "sonnet", name: "Claude Sonnet (newest)", input: ["text", "image"], toolCalls: true, contextWindow: 200_000 },
  { id: "opus", name: "Claude Opus (newest)", input: ["text", "image"], toolCalls: true, contextWindow: 200_000 },
  { id: "haiku", name: "Claude Haiku (newest)", input: ["text", "image"], toolCalls: true, contextWindow: 200_000 },
];

export class ClaudeCodeBackend extends CliBackendBase<ClaudeCodeOptions> {
  readonly type = "claude-code";
  /** The person's images reach the model as image blocks of the turn's user message, cold and warm. */
  readonly imageInput = true;

  /** Claude Code's aliases (it has no command that lists models), when the CLI is installed. */
  models(): Promise<DiscoveredModel[]> {
    return this.documentedModels(CLAUDE_MODELS);
  }
  /** The warm pool (warm mode only). */
  readonly warm: StreamJsonWarm | undefined;

  constructor(name: string, opts: ClaudeCodeOptions, deps: BackendDeps) {
    super(name, opts, deps, {
      places: ["~/.claude/local/claude", "~/.local/bin/claude"],
      label: "Claude Code CLI",
      npmPackage: "@anthropic-ai/claude-code",
    });
    if (opts.warm.enabled)
      this.warm = new StreamJsonWarm(
        name,
        opts.warm,
        opts.killGraceSeconds,
        childLogger(deps.logger, { backend: name }),
        (pid) => (this.lastPid = pid),
      );
  }

  protected runTurn(turn: TurnInput, bin: string): AsyncGenerator<BackendEvent> {
    // A warm process lives in one CLI session: a turn the pipeline does not resume runs cold.
    if (!this.warm || !turn.session.resume) return this.coldTurn(turn, bin);
    const cwd = conversationCwd(turn, this.deps.dataDir, this.opts.cwd);
    const ct = warmClientTools(turn, this.deps.clientTools);
    return this.warm.run(
      turn,
      // The MCP entry too (endpoint, the conversation's token, the call limit): a process keeps the one it was started with.
      [bin, turn.model, turn.prompt.system, cwd, toolsFingerprint(ct?.spec.tools), ct?.entry],
      () => {
        const files: Array<{ file: string; remove(): void }> = [];
        if (this.opts.systemPromptFile && turn.prompt.system)
          files.push(writeTurnFile(this.deps.dataDir, "claude-system-", "system.md", turn.prompt.system));
        if (ct) {
          const entry = { type: "http", ...ct.entry, alwaysLoad: true };
          files.push(
            writeTurnFile(
              this.deps.dataDir,
              "claude-mcp-",
              "mcp.json",
              JSON.stringify({ mcpServers: { [CLIENT_TOOLS_SERVER]: entry } }),
            ),
          );
        }
        const system = this.opts.systemPromptFile && turn.prompt.system ? files[0]?.file : undefined;
        const args = claudeArgs(this.opts, turn, system, ct ? files.at(-1)!.file : undefined);
        args.splice(1, 0, "--input-format", "stream-json");
        return {
          label: "claude",
          bin,
          args,
          env: this.env(),
          cwd,
          file: { remove: () => files.forEach((f) => f.remove()) },
        };
      },
      new ClaudeStreamMapper("claude", !!turn.session.backendSessionId),
      () => this.coldTurn(turn, bin),
      ct?.session,
      this.standby(turn, bin, cwd),
    );
  }

  /**
   * The standbys a new conversation's first turn may start on (src/backends/cli/stream-json-warm.ts):
   * claude with this backend's options and the turn's model, no session, no bootstrap. The
   * conversation's bootstrap reaches the taken standby in the `initialize` control request, which
   * claude applies like `--append-system-prompt` / `--system-prompt` (the same system prompt).
   */
  private standby(turn: TurnInput, bin: string, cwd: string): StreamJsonStandby {
    const model = turn.model;
    const system = turn.prompt.system;
    return {
      kind: ["claude", bin, model ?? null, this.opts.cwd ?? null],
      dataDir: this.deps.dataDir,
      ...(this.opts.cwd !== undefined ? { fixedCwd: this.opts.cwd } : {}),
      cwd,
      start: (dir) => {
        const args = claudeArgs(this.opts, { model, prompt: { system: "", text: "" }, session: { key: "", turn: 0 } });
        args.splice(1, 0, "--input-format", "stream-json");
        return { label: "claude", bin, args, env: this.env(), cwd: dir };
      },
      preamble: () =>
        system ? { messages: [claudeInitialize(system, this.opts.systemPromptMode)], skipTurns: 0 } : undefined,
    };
  }

  async close(): Promise<void> {
    await this.warm?.close();
  }

  private async *coldTurn(turn: TurnInput, bin: string): AsyncGenerator<BackendEvent> {
    const cwd = conversationCwd(turn, this.deps.dataDir, this.opts.cwd);
    const resuming = !!turn.session.backendSessionId;
    const systemFile =
      this.opts.systemPromptFile && turn.prompt.system
        ? writeTurnFile(this.deps.dataDir, "claude-system-", "system.md", turn.prompt.system)
        : undefined;
    const args = claudeArgs(this.opts, turn, systemFile?.file);
    // Plain text on stdin, unless the turn has images: then one stream-json user message, its text
    // (the same text) and its images as image blocks.
    const images = turn.images ?? [];
    if (images.length) args.splice(1, 0, "--input-format", "stream-json");
    try {
      yield* this.cliTurn(
        turn,
        {
          label: "claude",
          bin,
          args,
          env: this.env(),
          cwd,
          ...(images.length ? { stdin: `${JSON.stringify(userMessage(turn.prompt.text, images))}\n` } : {}),
        },
        new ClaudeStreamMapper("claude", resuming),
      );
    } finally {
      systemFile?.remove();
    }
  }
}

export const claudeCodeBackend: BackendModule<ClaudeCodeOptions> = {
  ...claudeCodeDescriptor,
  create: (name, options, deps) => new ClaudeCodeBackend(name, options, deps),
};
