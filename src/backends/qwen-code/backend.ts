/**
 * Qwen Code backend: `qwen -o stream-json --include-partial-messages` with the prompt on stdin and
 * `--resume <session id>` on later turns. Qwen Code (a Gemini CLI fork) prints the SAME stream-json
 * schema as Claude Code (`system/init`, `stream_event`, `assistant`, `user`, `result`), so the
 * Claude mapper does the work; this file adds what differs:
 * - a model API error is NOT an error result: qwen streams `[API Error: <msg>]` as answer text and
 *   ends with `result` {is_error: false, result: "...[API Error: <msg>]"}, exit 0. The mapper keeps
 *   that text out of the answer and turns it into an `upstream_error`;
 * - after a thinking block qwen starts the text block of a NEW message id without a
 *   `message_start`, so with partial messages on, whole `assistant` text is never used (it would
 *   repeat the streamed text);
 * - `usage.input_tokens` already includes `cache_read_input_tokens` (OpenAI semantics);
 * - an unknown session prints `No saved session found with ID <id>. ...` on stderr, exit 1.
 * The bootstrap goes through env `QWEN_SYSTEM_MD=<per-turn file>` (replaces qwen's own system
 * prompt; mode `replace`, default) or `--append-system-prompt <text>` (mode `append`).
 * Images: qwen turns an image block of its stream-json input into JSON TEXT (qwen 0.15
 * `extractUserMessageText`), so a turn's images are written as files in the turn's working
 * directory (src/backends/cli/images.ts) and referenced after the text as `@<path>`: qwen's own
 * `@` reading (`handleAtCommand`, cold and warm alike) puts each into the user message as
 * `inlineData`, which its OpenAI-compatible client sends as an `image_url` data-URL part — when
 * qwen counts the model as taking images (its own table by model name, e.g. `coder-model`,
 * `qwen3-vl-*`, `gpt-*`, or `modalities` in its settings); otherwise qwen itself tells the model
 * in a line that it cannot see the file. The files are removed when the turn ends (qwen keeps the
 * bytes in its session).
 * Observed formats: docs/CLI_FORMATS.md.
 */
import { writeFileSync } from "node:fs";
import { childLogger } from "../../core/log/logger.js";
import type { ProcessEnd } from "../../core/util/process.js";
import { CLIENT_TOOLS_SERVER, toolsFingerprint } from "../client-tools/types.js";
import {
  standbyBootstrapFile,
  StreamJsonWarm,
  warmClientTools,
  type StreamJsonStandby,
} from "../cli/stream-json-warm.js";
import { userMessage } from "../cli/stream-json.js";
import { ClaudeStreamMapper } from "../claude-code/backend.js";
import { CliBackendBase, conversationCwd, stderrTail, writeTurnFile, type CliTurnMapper } from "../cli/base.js";
import { writeTurnImages, type TurnImageFiles } from "../cli/images.js";
import { limitErrorOf } from "../cli/limits.js";
import type { BackendDeps, BackendModule } from "../module.js";
import { qwenCodeDescriptor, type QwenCodeOptions } from "./options.js";
import type { BackendError, BackendEvent, DiscoveredModel, TurnInput } from "../contract/backend.js";

export {
  QWEN_SAFE_EXCLUDED_TOOLS,
  qwenCodeOptionsSchema,
  type QwenCodeOptions,
} from "./options.js";

/** What qwen prints (stderr, exit 1, no stdout) when `--resume` names a session it cannot load (unknown id, deleted file, other cwd). */
export const QWEN_SESSION_NOT_FOUND = /No saved session found with (?:ID|title)/i;

/** The prefix qwen puts before a model API error it reports as answer text. */
export const QWEN_API_ERROR_PREFIX = "[API Error: ";

export function qwenArgs(opts: QwenCodeOptions, turn: Pick<TurnInput, "model" | "prompt" | "session">): string[] {
  const args = ["-o", "stream-json"];
  if (opts.includePartialMessages) args.push("--include-partial-messages");
  if (turn.model && turn.model !== opts.defaultModelName) args.push("-m", turn.model);
  if (turn.session.backendSessionId) args.push("--resume", turn.session.backendSessionId);
  if (opts.systemPromptMode === "append" && turn.prompt.system) args.push("--append-system-prompt", turn.prompt.system);
  args.push("--approval-mode", opts.approvalMode);
  if (opts.excludeTools.length) args.push("--exclude-tools", opts.excludeTools.join(","));
  args.push(...opts.args);
  return args;
}

/**
 * The turn's text with its image files referenced after it, each on a line of its own, the way qwen
 * reads a file into the message (`@<path>`, relative to the working directory; a path ends at
 * whitespace and at `,;!?()[]{}`, ours have none). The same wording as Gemini CLI's.
 */
export function qwenImageText(text: string, relativePaths: readonly string[]): string {
  if (!relativePaths.length) return text;
  const label = relativePaths.length === 1 ? "Attached image:" : "Attached images:";
  return `${text}\n\n${label}\n${relativePaths.map((p) => `@${p}`).join("\n")}`;
}

/** `[API Error: 400 fake says ...]` (+ qwen's rate-limit advice) → the message and the HTTP status when it names one. */
export function parseQwenApiError(text: string): { message: string; status?: number } {
  let inner = text.startsWith(QWEN_API_ERROR_PREFIX) ? text.slice(QWEN_API_ERROR_PREFIX.length) : text;
  const close = inner.lastIndexOf("]");
  if (close >= 0) inner = inner.slice(0, close);
  inner = inner.trim();
  const m =
    /^(\d{3})\b/.exec(inner) ?? /\(Status: (\d{3})\)/i.exec(inner) ?? /\bstatus(?: code)?:? (\d{3})\b/i.exec(inner);
  return { message: inner || text.trim(), ...(m ? { status: Number(m[1]) } : {}) };
}

function qwenUpstreamError(label: string, text: string): BackendError {
  const { message, status } = parseQwenApiError(text);
  // Qwen OAuth's quota, a provider's 429/insufficient_quota, a refused key: src/backends/cli/limits.ts.
  const limited = limitErrorOf(label, text, { now: Date.now(), ...(status ? { status } : {}) });
  if (limited) return limited;
  const transient = status === undefined && /terminated|connection|timed? ?out|ECONN|socket|network/i.test(message);
  return {
    code: "upstream_error",
    message: `${label}: ${message}${status && !message.includes(String(status)) ? ` (model API status ${status})` : ""}`,
    status: status === 429 ? 429 : 502,
    retryable: status === 429 || (status !== undefined && status >= 500) || transient,
  };
}

/**
 * Qwen's stream-json lines → bridge events, through `ClaudeStreamMapper` with the differences
 * listed at the top of this file. Exported for unit tests.
 */
export class QwenStreamMapper implements CliTurnMapper {
  private readonly inner: ClaudeStreamMapper;
  /** A `stream_event` was seen: text comes from deltas only. */
  private streaming = false;
  private apiError: string | undefined;
  private sawResult = false;

  constructor(
    private readonly label: string,
    private readonly resuming: boolean,
  ) {
    this.inner = new ClaudeStreamMapper(label, resuming);
  }

  get sessionId(): string | undefined {
    return this.inner.sessionId;
  }

  onEvent(ev: Record<string, any>): BackendEvent[] {
    if (ev.parent_tool_use_id) return this.inner.onEvent(ev);
    switch (ev.type) {
      case "stream_event": {
        this.streaming = true;
        const d = ev.event?.type === "content_block_delta" ? ev.event.delta : undefined;
        if (d?.type === "text_delta" && typeof d.text === "string") {
          if (this.apiError !== undefined) {
            this.apiError += d.text;
            return [];
          }
          const at = d.text.indexOf(QWEN_API_ERROR_PREFIX);
          if (at >= 0) {
            this.apiError = d.text.slice(at);
            if (at === 0) return [];
            return this.inner.onEvent({ ...ev, event: { ...ev.event, delta: { ...d, text: d.text.slice(0, at) } } });
          }
        }
        return this.inner.onEvent(ev);
      }
      case "assistant": {
        const content: any[] = Array.isArray(ev.message?.content) ? ev.message.content : [];
        const kept: any[] = [];
        for (const block of content) {
          const isText = block?.type === "text" || block?.type === "thinking";
          // Streamed already (qwen does not always announce the message id with message_start).
          if (isText && this.streaming) continue;
          if (block?.type === "text" && typeof block.text === "string") {
            if (this.apiError !== undefined) continue;
            const at = block.text.indexOf(QWEN_API_ERROR_PREFIX);
            if (at >= 0) {
              this.apiError = block.text.slice(at);
              if (at > 0) kept.push({ ...block, text: block.text.slice(0, at) });
              continue;
            }
          }
          kept.push(block);
        }
        return this.inner.onEvent({ ...ev, message: { ...ev.message, content: kept } });
      }
      case "result": {
        this.sawResult = true;
        const r: Record<string, any> = { ...ev };
        if (!r.is_error && typeof r.result === "string" && this.apiError === undefined) {
          const at = r.result.indexOf(QWEN_API_ERROR_PREFIX);
          if (at >= 0) this.apiError = r.result.slice(at);
        }
        // qwen: input_tokens = prompt tokens INCLUDING cached ones; the Claude mapper adds cache reads on top.
        if (r.usage && typeof r.usage === "object") {
          const cached = Number(r.usage.cache_read_input_tokens ?? 0) || 0;
          const input = Number(r.usage.input_tokens ?? 0) || 0;
          r.usage = {
            input_tokens: Math.max(0, input - cached),
            cache_read_input_tokens: Math.min(cached, input),
            output_tokens: Number(r.usage.output_tokens ?? 0) || 0,
          };
        }
        if (r.is_error && r.error && typeof r.error.message === "string" && !Array.isArray(r.errors))
          r.errors = [r.error.message];
        return this.inner.onEvent(r);
      }
      default:
        return this.inner.onEvent(ev);
    }
  }

  /** A `result` that is a success and no `[API Error: …]` answer text (a cold turn ends there, src/backends/cli/base.ts). */
  settled(): boolean {
    return this.sawResult && this.apiError === undefined && this.inner.settled();
  }

  finish(end: ProcessEnd): BackendEvent[] {
    if (this.apiError !== undefined) return [{ type: "error", error: qwenUpstreamError(this.label, this.apiError) }];
    if (!this.sawResult && this.resuming && QWEN_SESSION_NOT_FOUND.test(end.stderr)) {
      const line =
        end.stderr
          .split("\n")
          .find((l) => QWEN_SESSION_NOT_FOUND.test(l))
          ?.trim() ?? stderrTail(end.stderr);
      return [{ type: "error", error: { code: "session_not_found", message: `${this.label}: ${line}`, status: 404 } }];
    }
    return this.inner.finish(end);
  }
}

/** Qwen Code's model with Qwen OAuth (`QWEN_OAUTH_MODELS`); with an OpenAI-compatible key (`OPENAI_MODEL`) it takes any name that provider serves. */
export const QWEN_MODELS: readonly DiscoveredModel[] = [
  { id: "coder-model", name: "Qwen coder model (Qwen OAuth)", input: ["text", "image"], toolCalls: true },
];

export class QwenCodeBackend extends CliBackendBase<QwenCodeOptions> {
  /** The person's images reach qwen as files it reads into the user message (`@<path>`), cold and warm. */
  readonly imageInput = true;

  /** Qwen Code's documented model (it has no command that lists them), when it is installed. */
  models(): Promise<DiscoveredModel[]> {
    return this.documentedModels(QWEN_MODELS);
  }

  readonly type = "qwen-code";
  /** The warm pool (warm mode only). */
  readonly warm: StreamJsonWarm | undefined;

  constructor(name: string, opts: QwenCodeOptions, deps: BackendDeps) {
    super(name, opts, deps, { places: [], label: "Qwen Code CLI", npmPackage: "@qwen-code/qwen-code" });
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
    return this.warmTurn(this.warm, turn, bin);
  }

  /** A warm turn; its images go as files referenced in the text (the process reads no image block). */
  private async *warmTurn(warm: StreamJsonWarm, turn: TurnInput, bin: string): AsyncGenerator<BackendEvent> {
    const cwd = conversationCwd(turn, this.deps.dataDir, this.opts.cwd);
    const images = qwenImageTurn(cwd, turn);
    if ("error" in images) {
      yield images.error;
      return;
    }
    try {
      yield* this.warmProcessTurn(warm, images.turn, turn, bin, cwd);
    } finally {
      images.files?.remove();
    }
  }

  private warmProcessTurn(
    warm: StreamJsonWarm,
    turn: TurnInput,
    original: TurnInput,
    bin: string,
    cwd: string,
  ): AsyncGenerator<BackendEvent> {
    const ct = warmClientTools(turn, this.deps.clientTools);
    return warm.run(
      turn,
      // The MCP entry too (endpoint, the conversation's token, the call limit): a process keeps the one it was started with.
      [bin, turn.model, turn.prompt.system, cwd, toolsFingerprint(ct?.spec.tools), ct?.entry],
      () => {
        const env = this.env();
        const files: Array<{ file: string; remove(): void }> = [];
        if (this.opts.systemPromptMode === "replace" && turn.prompt.system) {
          const file = writeTurnFile(this.deps.dataDir, "qwen-system-", "system.md", turn.prompt.system);
          env.QWEN_SYSTEM_MD = file.file;
          files.push(file);
        }
        const args = qwenArgs(this.opts, turn);
        args.unshift("--input-format", "stream-json");
        if (ct) {
          // Streamable HTTP is `httpUrl` for qwen (`url` means the old SSE transport). The tools are
          // marked read-only, so qwen runs them without asking for approval.
          const { url, ...rest } = ct.entry;
          const mcp = writeTurnFile(
            this.deps.dataDir,
            "qwen-mcp-",
            "mcp.json",
            JSON.stringify({ mcpServers: { [CLIENT_TOOLS_SERVER]: { httpUrl: url, ...rest } } }),
          );
          files.push(mcp);
          args.push("--mcp-config", mcp.file);
        }
        // Qwen's control channel is off unless `initialize` comes first: no interrupt, and a tool
        // needing approval would hang the turn (docs/CLI_FORMATS.md).
        return {
          label: "qwen",
          bin,
          args,
          env,
          cwd,
          file: { remove: () => files.forEach((f) => f.remove()) },
          controlInit: true,
        };
      },
      new QwenStreamMapper("qwen", !!turn.session.backendSessionId),
      () => this.coldTurn(original, bin),
      ct?.session,
      this.standby(turn, bin, cwd),
    );
  }

  /**
   * The standbys a new conversation's first turn may start on (src/backends/cli/stream-json-warm.ts),
   * in `replace` mode with a bootstrap. qwen reads its system prompt (QWEN_SYSTEM_MD) when its chat
   * starts — at start-up, and again on `/clear` (qwen 0.15: `resetChat`, which also starts a new
   * session) — and has no other way to take one later (`--append-system-prompt` is read once too),
   * so a standby is started with a private, empty system prompt file and warmed up with one `/clear`
   * (its first slash command costs ~200 ms); the conversation that takes it writes its bootstrap
   * into that file and sends `/clear` before its message (~20-50 ms more on its first turn).
   */
  private standby(turn: TurnInput, bin: string, cwd: string): StreamJsonStandby | undefined {
    if (this.opts.systemPromptMode !== "replace" || !turn.prompt.system) return undefined;
    const model = turn.model;
    const system = turn.prompt.system;
    const clear = () => userMessage("/clear");
    return {
      kind: ["qwen", bin, model ?? null, this.opts.cwd ?? null],
      dataDir: this.deps.dataDir,
      ...(this.opts.cwd !== undefined ? { fixedCwd: this.opts.cwd } : {}),
      cwd,
      start: (dir) => {
        const env = this.env();
        const file = writeTurnFile(this.deps.dataDir, "qwen-system-", "system.md", "");
        env.QWEN_SYSTEM_MD = file.file;
        const args = qwenArgs(this.opts, { model, prompt: { system: "", text: "" }, session: { key: "", turn: 0 } });
        args.unshift("--input-format", "stream-json");
        return {
          label: "qwen",
          bin,
          args,
          env,
          cwd: dir,
          file,
          controlInit: true,
          warmUp: { messages: [clear()], turns: 1 },
          bootstrapFile: file.file,
        };
      },
      preamble: (w) => {
        const file = standbyBootstrapFile(w);
        if (!file) return undefined;
        writeFileSync(file, system, { mode: 0o600 });
        return { messages: [clear()], skipTurns: 1 };
      },
    };
  }

  async close(): Promise<void> {
    await this.warm?.close();
  }

  private async *coldTurn(turn: TurnInput, bin: string): AsyncGenerator<BackendEvent> {
    const cwd = conversationCwd(turn, this.deps.dataDir, this.opts.cwd);
    const env = this.env();
    // Per turn, private, removed afterwards: parallel turns never share or race on the file.
    const systemFile =
      this.opts.systemPromptMode === "replace" && turn.prompt.system
        ? writeTurnFile(this.deps.dataDir, "qwen-system-", "system.md", turn.prompt.system)
        : undefined;
    if (systemFile) env.QWEN_SYSTEM_MD = systemFile.file;
    const images = qwenImageTurn(cwd, turn);
    if ("error" in images) {
      systemFile?.remove();
      yield images.error;
      return;
    }
    try {
      yield* this.cliTurn(
        turn,
        {
          label: "qwen",
          bin,
          args: qwenArgs(this.opts, turn),
          env,
          cwd,
          stdin: images.turn.prompt.text,
        },
        new QwenStreamMapper("qwen", !!turn.session.backendSessionId),
      );
    } finally {
      systemFile?.remove();
      images.files?.remove();
    }
  }
}

/**
 * The turn's images written under `cwd`, and the turn as qwen is given it: the text with the files
 * referenced after it, no `images` (qwen reads the files itself). An error event when they could
 * not be written (the turn is not run without them).
 */
export function qwenImageTurn(
  cwd: string,
  turn: TurnInput,
): { turn: TurnInput; files?: TurnImageFiles } | { error: BackendEvent } {
  const files = writeTurnImages(cwd, turn.images);
  if (!files) return { turn };
  if ("error" in files)
    return {
      error: { type: "error", error: { code: "backend_failed", message: `qwen: ${files.error}`, status: 500 } },
    };
  // The same turn with two fields shadowed: a spread would lose the getters of the pipeline's
  // input class (`signal`).
  const given: TurnInput = Object.create(turn, {
    prompt: { value: { system: turn.prompt.system, text: qwenImageText(turn.prompt.text, files.relative) } },
    images: { value: undefined },
  });
  return { turn: given, files };
}

export const qwenCodeBackend: BackendModule<QwenCodeOptions> = {
  ...qwenCodeDescriptor,
  create: (name, options, deps) => new QwenCodeBackend(name, options, deps),
};
