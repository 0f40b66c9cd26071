/**
 * Gemini CLI backend: `gemini -o stream-json --skip-trust` with the prompt on stdin and
 * `--resume <session id>` on later turns. Deltas come from `message` lines (role assistant,
 * `delta: true`); the final `result` line {status, error, stats} decides (gemini exits 144 after a
 * stream-json error, 42 when a resume fails — exit codes are not trusted).
 *
 * The bootstrap reaches the model on EVERY turn (resumed ones too), in one of two ways:
 * - `replace` (default): a per-turn file named by env `GEMINI_SYSTEM_MD` becomes the whole
 *   `systemInstruction` (Gemini CLI's own ~30k-character prompt is dropped);
 * - `context`: `<cwd>/GEMINI.md`, which gemini re-reads every run and puts into the first user
 *   content (`<session_context>...<project_context>`), next to its own system prompt.
 * Why `replace` is the default: docs/CLI_FORMATS.md.
 *
 * The person's images (`imageInput`): cold, written into the working directory for the turn
 * (src/backends/cli/images.ts) and named in the prompt as `@<path>` references, which gemini reads
 * and sends as `inlineData` parts (also non-interactively); warm, ACP `image` content blocks, which
 * gemini 0.61 (`promptCapabilities.image`) turns into `inlineData` parts itself.
 *
 * Warm mode (`warm.enabled`, on by default): one `gemini --acp` per conversation, kept between its
 * turns (`warm.ts`, over `src/backends/gemini-cli/acp.ts`); `warm: {enabled: false}` is the path above.
 * The client's tools (`tools: bridge`) need it: they reach gemini as an MCP server of its ACP
 * sessions, and a turn waits for a call's result in the process kept between requests.
 */
import { childLogger } from "../../core/log/logger.js";
import { existsSync, mkdirSync, readFileSync, unlinkSync, writeFileSync } from "node:fs";
import path from "node:path";
import type { ProcessEnd } from "../../core/util/process.js";
import { toolsFingerprint } from "../client-tools/types.js";
import type { AcpFailure } from "./acp-worker.js";
import { warmClientTools } from "../cli/stream-json-warm.js";
import {
  CliBackendBase,
  conversationCwd,
  joinSeparator,
  stderrTail,
  toolDetail,
  writeTurnFile,
  type CliTurnMapper,
} from "../cli/base.js";
import type { GeminiStandby, GeminiWarm } from "./warm.js";
import { writeTurnImages } from "../cli/images.js";
import { limitErrorOf } from "../cli/limits.js";
import type { BackendDeps, BackendModule } from "../module.js";
import { geminiCliDescriptor, type GeminiCliOptions } from "./options.js";
import type { BackendError, BackendEvent, DiscoveredModel, TurnInput, Usage } from "../contract/backend.js";

export {
  geminiCliOptionsSchema,
  type GeminiCliOptions,
} from "./options.js";

/** What gemini prints (stderr, exit 42) when `--resume` names a session it cannot load. */
export const GEMINI_SESSION_NOT_FOUND = /Error resuming session|Invalid session identifier|No previous sessions found/i;

/** First line of a GEMINI.md the bridge wrote; a file without it is the user's and is never touched. */
export const GEMINI_MD_MARKER = "<!-- clawbridge: this file is rewritten on every turn -->";

export function geminiArgs(opts: GeminiCliOptions, turn: Pick<TurnInput, "model" | "session">, acp = false): string[] {
  const args = acp ? ["--acp"] : ["-o", "stream-json"];
  if (opts.skipTrust) args.push("--skip-trust");
  if (turn.model && turn.model !== opts.defaultModelName) args.push("-m", turn.model);
  if (turn.session.backendSessionId && !acp) args.push("--resume", turn.session.backendSessionId);
  args.push("--approval-mode", opts.approvalMode);
  args.push(...opts.args);
  return args;
}

/** Pull the model API's own message and status out of gemini's error text (`[API Error: {json}]`). */
export function parseGeminiApiError(message: string): { message: string; status?: number } {
  const start = message.indexOf("{");
  const end = message.lastIndexOf("}");
  if (start >= 0 && end > start) {
    try {
      const obj = JSON.parse(message.slice(start, end + 1));
      const e = obj?.error ?? obj;
      if (e && typeof e.message === "string") {
        const status = typeof e.code === "number" ? e.code : undefined;
        return { message: e.message, ...(status ? { status } : {}) };
      }
    } catch {
      /* not JSON */
    }
  }
  const m = /\b(?:status|code)\W{0,3}(\d{3})\b/i.exec(message);
  return { message, ...(m ? { status: Number(m[1]) } : {}) };
}

/** Maps Gemini CLI's stream-json lines to bridge events for one turn. Exported for unit tests. */
export class GeminiStreamMapper implements CliTurnMapper {
  sessionId: string | undefined;
  private result: Record<string, any> | undefined;
  private lastError: string | undefined;
  private textSoFar = "";
  private pendingSeparator = false;
  private readonly tools = new Map<string, string>();

  constructor(
    private readonly label: string,
    private readonly resuming: boolean,
  ) {}

  onEvent(ev: Record<string, any>): BackendEvent[] {
    const out: BackendEvent[] = [];
    switch (ev.type) {
      case "init":
        if (typeof ev.session_id === "string" && !this.sessionId) {
          this.sessionId = ev.session_id;
          out.push({ type: "session", id: ev.session_id });
        }
        break;
      case "message":
        if (ev.role === "assistant" && typeof ev.content === "string" && ev.content) {
          const sep = this.pendingSeparator ? joinSeparator(this.textSoFar, ev.content) : "";
          this.pendingSeparator = false;
          this.textSoFar = (this.textSoFar + sep + ev.content).slice(-64);
          out.push({ type: "text", text: sep + ev.content });
        }
        break;
      case "tool_use": {
        const name = String(ev.tool_name ?? "tool");
        if (typeof ev.tool_id === "string") this.tools.set(ev.tool_id, name);
        out.push({ type: "tool_activity", name, status: "started", detail: toolDetail(ev.parameters) });
        break;
      }
      case "tool_result": {
        const name = (typeof ev.tool_id === "string" && this.tools.get(ev.tool_id)) || "tool";
        if (typeof ev.tool_id === "string") this.tools.delete(ev.tool_id);
        const failed = ev.status === "error";
        const detail = failed ? String(ev.error?.message ?? ev.output ?? "").slice(0, 300) : undefined;
        out.push({
          type: "tool_activity",
          name,
          status: failed ? "failed" : "completed",
          ...(detail ? { detail } : {}),
        });
        if (this.textSoFar) this.pendingSeparator = true;
        break;
      }
      case "error":
        if (ev.severity !== "warning" && typeof ev.message === "string") this.lastError = ev.message;
        break;
      case "result":
        this.result = ev;
        break;
    }
    return out;
  }

  /** The `result` line said `success` (a cold turn ends there, src/backends/cli/base.ts; an error waits for the exit). */
  settled(): boolean {
    return this.result?.status === "success";
  }

  finish(end: ProcessEnd): BackendEvent[] {
    const r = this.result;
    if (!r) {
      const stderr = stderrTail(end.stderr);
      if (this.resuming && GEMINI_SESSION_NOT_FOUND.test(end.stderr)) {
        const line =
          end.stderr
            .split("\n")
            .find((l) => GEMINI_SESSION_NOT_FOUND.test(l))
            ?.trim() ?? stderr;
        return [
          { type: "error", error: { code: "session_not_found", message: `${this.label}: ${line}`, status: 404 } },
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
    if (r.status !== "success") {
      const raw = String(r.error?.message ?? this.lastError ?? stderrTail(end.stderr) ?? "unknown error");
      if (GEMINI_SESSION_NOT_FOUND.test(raw) && this.resuming) {
        return [{ type: "error", error: { code: "session_not_found", message: `${this.label}: ${raw}`, status: 404 } }];
      }
      const api = parseGeminiApiError(raw);
      const limited = limitErrorOf(this.label, raw, { now: Date.now(), ...(api.status ? { status: api.status } : {}) });
      if (limited) return [{ type: "error", error: limited }];
      if (/API Error/i.test(raw) || api.status)
        return [{ type: "error", error: geminiUpstreamError(this.label, api.message, api.status) }];
      return [
        { type: "error", error: { code: "backend_failed", message: `${this.label} failed: ${raw}`, status: 502 } },
      ];
    }
    const out: BackendEvent[] = [];
    const s = r.stats;
    if (s && typeof s === "object" && (typeof s.input_tokens === "number" || typeof s.output_tokens === "number")) {
      const promptTokens = Number(s.input_tokens ?? s.input ?? 0);
      const completionTokens = Number(s.output_tokens ?? 0);
      const usage: Usage = {
        promptTokens,
        completionTokens,
        totalTokens: Number(s.total_tokens ?? promptTokens + completionTokens),
      };
      if (typeof s.cached === "number" && s.cached > 0) usage.cachedTokens = s.cached;
      out.push({ type: "usage", usage });
    }
    out.push({ type: "done", finishReason: "stop" });
    return out;
  }
}

/** An ACP error answer of `gemini --acp` → the turn's error, worded as the cold path's. */
export function geminiAcpError(label: string, f: AcpFailure, stderr: string, resuming: boolean): BackendError {
  const raw = [f.details, f.message].filter(Boolean).join(": ");
  if (f.method === "session/load" && (resuming || GEMINI_SESSION_NOT_FOUND.test(raw))) {
    return { code: "session_not_found", message: `${label}: ${f.details ?? f.message}`, status: 404 };
  }
  if (f.method === "session/prompt") {
    const api = parseGeminiApiError(f.details ?? f.message);
    const status = api.status ?? (f.code && f.code >= 400 && f.code < 600 ? f.code : undefined);
    const limited = limitErrorOf(label, raw, { now: Date.now(), ...(status ? { status } : {}) });
    if (limited) return limited;
    if (status) return geminiUpstreamError(label, api.message, status);
  }
  const tail = stderrTail(stderr);
  return {
    code: "backend_failed",
    message: `${label} ${f.method} failed: ${raw}${tail ? ` (${tail})` : ""}`,
    status: 502,
  };
}

function geminiUpstreamError(label: string, message: string, apiStatus: number | undefined): BackendError {
  return {
    code: "upstream_error",
    message: `${label}: ${message}${apiStatus ? ` (model API status ${apiStatus})` : ""}`,
    status: apiStatus === 429 ? 429 : 502,
    retryable: apiStatus === 429 || (apiStatus !== undefined && apiStatus >= 500),
  };
}

/** The models Gemini CLI accepts (`VALID_GEMINI_MODELS` of @google/gemini-cli 0.4x, and its `auto` routing). */
export const GEMINI_MODELS: readonly DiscoveredModel[] = [
  { id: "auto", name: "Gemini CLI's own choice per request" },
  { id: "gemini-2.5-pro", contextWindow: 1_048_576 },
  { id: "gemini-2.5-flash", contextWindow: 1_048_576 },
  { id: "gemini-2.5-flash-lite", contextWindow: 1_048_576 },
  { id: "gemini-3-pro-preview", contextWindow: 1_048_576 },
  { id: "gemini-3-flash-preview", contextWindow: 1_048_576 },
  { id: "gemini-3.5-flash", contextWindow: 1_048_576 },
  { id: "gemini-3.1-flash-lite", contextWindow: 1_048_576 },
].map((m) => ({ ...m, input: ["text", "image", "audio", "video", "pdf"], toolCalls: true }));

/**
 * The prompt with the turn's image files as `@<path>` references (paths relative to the working
 * directory, which is gemini's workspace): gemini reads each with its read_many_files tool before
 * the model call and sends it as an `inlineData` part after the text. Each reference on a line of its
 * own (a path ends at whitespace and at `,;!?()[]{}`; ours have none).
 */
export function geminiPromptWithImages(text: string, files: readonly string[]): string {
  if (!files.length) return text;
  return `${text}\n\n${files.length === 1 ? "Attached image:" : "Attached images:"}\n${files.map((f) => `@${f}`).join("\n")}`;
}

export class GeminiCliBackend extends CliBackendBase<GeminiCliOptions> {
  /** What Gemini CLI accepts as `--model` (it has no command that lists them), when it is installed. */
  models(): Promise<DiscoveredModel[]> {
    return this.documentedModels(GEMINI_MODELS);
  }

  readonly type = "gemini-cli";
  /** The person's images reach the model as `inlineData`: `@<file>` references cold, ACP image blocks warm. */
  readonly imageInput = true;

  constructor(name: string, opts: GeminiCliOptions, deps: BackendDeps) {
    super(name, opts, deps, { places: [], label: "Gemini CLI", npmPackage: "@google/gemini-cli" });
  }

  /** The warm room, loaded on the first warm turn (the ACP client library costs ~6 MB resident). */
  private warmRoom: Promise<GeminiWarm> | undefined;

  private warm(): Promise<GeminiWarm> {
    return (this.warmRoom ??= import("./warm.js").then(
      ({ GeminiWarm }) =>
        new GeminiWarm({
          name: this.name,
          warm: this.opts.warm,
          killGraceSeconds: this.opts.killGraceSeconds,
          approvalMode: this.opts.approvalMode,
          logger: childLogger(this.deps.logger, { backend: this.name }),
          onWorker: (pid) => (this.lastPid = pid),
          error: (f, stderr, resuming) => geminiAcpError("gemini", f, stderr, resuming),
        }),
    ));
  }

  /** Ends the warm processes (bridge shutdown). */
  async close(): Promise<void> {
    await (await this.warmRoom)?.close();
  }

  protected async *runTurn(turn: TurnInput, bin: string): AsyncGenerator<BackendEvent> {
    if (!this.opts.warm.enabled) {
      yield* this.coldTurn(turn, bin);
      return;
    }
    const cwd = conversationCwd(turn, this.deps.dataDir, this.opts.cwd);
    const system = turn.prompt.system;
    const warm = await this.warm();
    const ct = warmClientTools(turn, this.deps.clientTools);
    yield* warm.run(
      turn,
      cwd,
      // A new tool set starts a new process (its sessions list the tools once).
      [
        bin,
        cwd,
        this.opts.systemPromptMode,
        system,
        turn.model,
        this.opts.approvalMode,
        this.opts.args,
        toolsFingerprint(ct?.spec.tools),
      ],
      () => {
        const env = this.env();
        const mode = this.bootstrapMode(cwd, system);
        // Read by gemini whenever it builds the system instruction: kept for the process's life.
        const file =
          mode === "replace" && system
            ? writeTurnFile(this.deps.dataDir, "gemini-system-", "system.md", system)
            : undefined;
        if (file) env.GEMINI_SYSTEM_MD = file.file;
        return { bin, args: geminiArgs(this.opts, turn, true), env, cwd, file };
      },
      () => this.coldTurn(turn, bin),
      ct,
      this.standby(turn, bin, cwd),
    );
  }

  /**
   * The standbys a turn may start on (src/backends/gemini-cli/warm.ts): `gemini --acp` with this
   * backend's options and the turn's model, in `<dataDir>/work/standby` (or the fixed `cwd`), with a
   * private GEMINI_SYSTEM_MD that the conversation taking it fills (`replace` mode), or none.
   */
  private standby(turn: TurnInput, bin: string, cwd: string): GeminiStandby {
    const system = turn.prompt.system;
    const withFile = this.opts.systemPromptMode === "replace" && !!system;
    const model = turn.model;
    return {
      kind: ["gemini", bin, model ?? null, withFile, this.opts.cwd ?? null],
      start: () => {
        const env = this.env();
        const dir = this.opts.cwd ?? path.join(this.deps.dataDir, "work", "standby");
        mkdirSync(dir, { recursive: true, mode: 0o700 });
        const file = withFile ? writeTurnFile(this.deps.dataDir, "gemini-system-", "system.md", "") : undefined;
        if (file) env.GEMINI_SYSTEM_MD = file.file;
        return {
          bin,
          args: geminiArgs(this.opts, { model, session: { key: "", turn: 0 } }, true),
          env,
          cwd: dir,
          file,
          ...(file ? { bootstrapFile: file.file } : {}),
        };
      },
      adopt: (bootstrapFile) => {
        // Where the bootstrap goes now (`context` turns to `replace` beside a GEMINI.md of the user's own).
        const mode = this.bootstrapMode(cwd, system);
        if ((mode === "replace" && !!system) !== withFile) return false;
        if (bootstrapFile) writeFileSync(bootstrapFile, system, { mode: 0o600 });
        return true;
      },
    };
  }

  /**
   * Where the bootstrap goes for a process started now: `context` writes (or removes) the
   * bridge's GEMINI.md in `cwd`; `replace` (also when the user has a GEMINI.md of their own there)
   * removes a GEMINI.md the bridge left. The caller passes GEMINI_SYSTEM_MD for `replace`.
   */
  private bootstrapMode(cwd: string, system: string): "replace" | "context" {
    let mode = this.opts.systemPromptMode;
    if (mode === "context") {
      const file = path.join(cwd, "GEMINI.md");
      const ours = !existsSync(file) || readFileSync(file, "utf8").startsWith(GEMINI_MD_MARKER);
      if (!ours) {
        this.deps.logger.warn(
          { backend: this.name, file },
          "GEMINI.md in the working directory is not the bridge's; passing the bootstrap as GEMINI_SYSTEM_MD instead",
        );
        mode = "replace";
      } else if (system) writeFileSync(file, `${GEMINI_MD_MARKER}\n${system}\n`, { mode: 0o600 });
      else if (existsSync(file)) unlinkSync(file);
    }
    if (mode === "replace") {
      // A GEMINI.md left by an earlier `context` configuration would add a stale bootstrap.
      const stale = path.join(cwd, "GEMINI.md");
      if (existsSync(stale) && readFileSync(stale, "utf8").startsWith(GEMINI_MD_MARKER)) unlinkSync(stale);
    }
    return mode;
  }

  /** One turn with a `gemini -o stream-json` process of its own. */
  private async *coldTurn(turn: TurnInput, bin: string): AsyncGenerator<BackendEvent> {
    const cwd = conversationCwd(turn, this.deps.dataDir, this.opts.cwd);
    const env = this.env();
    const system = turn.prompt.system;
    const mode = this.bootstrapMode(cwd, system);
    // Per turn, private, removed afterwards: parallel turns never share or race on the file.
    const systemFile =
      mode === "replace" && system
        ? writeTurnFile(this.deps.dataDir, "gemini-system-", "system.md", system)
        : undefined;
    if (systemFile) env.GEMINI_SYSTEM_MD = systemFile.file;
    // The person's images as files in the workspace for `@` references (gemini records their bytes
    // in the session; removed after the turn).
    const images = writeTurnImages(cwd, turn.images);
    if (images && "error" in images) {
      systemFile?.remove();
      yield { type: "error", error: { code: "backend_failed", message: `gemini: ${images.error}`, status: 500 } };
      return;
    }
    try {
      yield* this.cliTurn(
        turn,
        {
          label: "gemini",
          bin,
          args: geminiArgs(this.opts, turn),
          env,
          cwd,
          ...(images ? { stdin: geminiPromptWithImages(turn.prompt.text, images.relative) } : {}),
        },
        new GeminiStreamMapper("gemini", !!turn.session.backendSessionId),
      );
    } finally {
      systemFile?.remove();
      images?.remove();
    }
  }
}

export const geminiCliBackend: BackendModule<GeminiCliOptions> = {
  ...geminiCliDescriptor,
  create: (name, options, deps) => new GeminiCliBackend(name, options, deps),
};
