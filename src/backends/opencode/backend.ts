/**
 * OpenCode CLI backend. Warm (default): one `opencode serve` per backend driven through its HTTP
 * API, the answer streamed token by token (src/backends/opencode/warm.ts); resume turns (session mode
 * `resume`: the conversation's OpenCode session goes on) on a server of the conversation's own, which
 * is also where the client's tools (`tools.mode: bridge`) are offered, as the MCP server `openclaw`.
 * Cold (`warm.enabled: false`, or when the warm server is gone before a turn produced anything):
 * `opencode run --format json -m <model>` (`--session <id>` when resuming) with the prompt on stdin,
 * each stdout line one JSON event (step_start, text, reasoning, tool_use, step_finish, error; see
 * docs/CLI_FORMATS.md), text per finished part. `run` has no system-prompt flag: a stateless turn's
 * bootstrap leads its prompt; a resume turn's goes to the system prompt as an instructions file
 * (OPENCODE_CONFIG_CONTENT `instructions`), so the session's history keeps only the person's words,
 * as on the warm path. A model id that is not `provider/model` (e.g. `default`) means OpenCode's
 * own default model, on both paths. The person's images: `--file=<file>` per image cold (written
 * into the working directory for the turn, src/backends/cli/images.ts), data URL file parts of the
 * prompt warm (./serve-turn.ts). A session OpenCode does not have (`Error: Session not found`
 * from `run`, 404 from the server) is `session_not_found`, which the pipeline heals.
 */
import { childLogger } from "../../core/log/logger.js";
import { mkdirSync } from "node:fs";
import path from "node:path";
import type { ProcessEnd } from "../../core/util/process.js";
import { addOpencodeTokens, opencodeLimit, type OpencodeTokens } from "./events.js";
import { opencodeModel } from "./serve-turn.js";
import { OpencodeWarm } from "./warm.js";
import { warmClientTools } from "../cli/stream-json-warm.js";
import { CliBackendBase, joinSeparator, stderrTail, writeTurnFile } from "../cli/base.js";
import { writeTurnImages } from "../cli/images.js";
import type { BackendDeps, BackendModule } from "../module.js";
import { opencodeDescriptor, type OpencodeOptions } from "./options.js";
import type { BackendEvent, DiscoveredModel, TurnInput, Usage } from "../contract/backend.js";
import { parseOpencodeModels } from "./models.js";

export {
  opencodeOptionsSchema,
  type OpencodeOptions,
} from "./options.js";

interface OpencodeEvent {
  type?: string;
  sessionID?: string;
  part?: {
    type?: string;
    text?: string;
    tool?: string;
    reason?: string;
    state?: { status?: string; title?: string; error?: string };
    tokens?: OpencodeTokens;
  };
  error?: { name?: string; data?: { message?: string; statusCode?: number; isRetryable?: boolean } };
}

/** Map one parsed OpenCode event to bridge events; updates the running state. Exported for tests. */
export function mapOpencodeEvent(ev: OpencodeEvent, state: OpencodeTurnState): BackendEvent[] {
  const out: BackendEvent[] = [];
  if (ev.sessionID && !state.sessionId) {
    state.sessionId = ev.sessionID;
    out.push({ type: "session", id: ev.sessionID });
  }
  const part = ev.part ?? {};
  switch (ev.type) {
    case "text":
      if (part.text) {
        // Separate text parts of successive steps so words do not run together.
        const text = (state.sawText ? joinSeparator(state.lastText, part.text) : "") + part.text;
        state.sawText = true;
        state.lastText = part.text;
        out.push({ type: "text", text });
      }
      break;
    case "reasoning":
      if (part.text) out.push({ type: "reasoning", text: part.text });
      break;
    case "tool_use": {
      const status = part.state?.status;
      out.push({
        type: "tool_activity",
        name: part.tool ?? "tool",
        status: status === "error" ? "failed" : status === "completed" ? "completed" : "started",
        detail: part.state?.title ?? part.state?.error,
      });
      break;
    }
    case "step_finish": {
      state.steps++;
      if (part.tokens) {
        addOpencodeTokens(state.usage, part.tokens);
        state.sawUsage = true;
      }
      if (part.reason === "length") state.finish = "length";
      break;
    }
    case "error": {
      const data = ev.error?.data;
      const status = data?.statusCode;
      const limited = opencodeLimit(ev.error);
      if (limited) {
        state.error = {
          ...limited,
          code: limited.code as "limit_reached" | "auth_failed",
          retryable: !!limited.retryable,
        };
        break;
      }
      state.error = {
        code: "upstream_error",
        message: `opencode: ${data?.message ?? ev.error?.name ?? "unknown error"}${status ? ` (model API status ${status})` : ""}`,
        status: status === 429 ? 429 : 502,
        retryable: data?.isRetryable ?? status === 429,
      };
      break;
    }
  }
  return out;
}

export interface OpencodeTurnState {
  sessionId?: string;
  sawText: boolean;
  lastText: string;
  sawUsage: boolean;
  steps: number;
  usage: Usage;
  finish: "stop" | "length";
  error?: {
    code: "upstream_error" | "limit_reached" | "auth_failed";
    message: string;
    status: number;
    retryable: boolean;
    resetAt?: number;
  };
}

export function newOpencodeState(): OpencodeTurnState {
  return {
    sawText: false,
    lastText: "",
    sawUsage: false,
    steps: 0,
    usage: { promptTokens: 0, completionTokens: 0, totalTokens: 0 },
    finish: "stop",
  };
}

class OpencodeBackend extends CliBackendBase<OpencodeOptions> {
  readonly type = "opencode";
  /**
   * The person's images reach OpenCode: `--file` cold, data URL file parts warm. Whether they reach
   * the model is OpenCode's per model (`modalities.input`): one that takes no images is sent a line
   * saying it cannot read the image.
   */
  readonly imageInput = true;

  constructor(name: string, opts: OpencodeOptions, deps: BackendDeps) {
    super(name, opts, deps, { places: ["~/.opencode/bin/opencode"], label: "opencode CLI", npmPackage: "opencode-ai" });
  }

  private warm: OpencodeWarm | undefined;

  protected async *runTurn(turn: TurnInput, bin: string): AsyncGenerator<BackendEvent> {
    // A turn given a directory (a resumed conversation's own, a system's agent step's sandbox)
    // works there; ordinary stateless turns share one directory.
    const shared = this.opts.cwd ?? path.join(this.deps.dataDir, "work", "opencode");
    const cwd = this.opts.cwd ?? turn.session.cwd ?? shared;
    mkdirSync(cwd, { recursive: true, mode: 0o700 });
    if (!this.opts.warm.enabled) {
      yield* this.coldTurn(turn, bin, cwd);
      return;
    }
    mkdirSync(shared, { recursive: true, mode: 0o700 });
    this.warm ??= new OpencodeWarm({
      backend: this.name,
      warm: this.opts.warm,
      killGraceSeconds: this.opts.killGraceSeconds,
      logger: childLogger(this.deps.logger, { backend: this.name }),
      ...(this.opts.agent ? { agent: this.opts.agent } : {}),
    });
    // The client's tools go to resume turns only: a turn waits for their results on the
    // conversation's own server (src/backends/opencode/warm.ts).
    const tools = turn.session.resume ? warmClientTools(turn, this.deps.clientTools) : undefined;
    yield* this.warm.run(turn, {
      bin,
      env: this.env(),
      serverCwd: shared,
      cwd,
      cold: () => this.coldTurn(turn, bin, cwd),
      onPid: (pid) => (this.lastPid = pid),
      ...(tools ? { tools } : {}),
    });
  }

  /** OpenCode refuses a model it does not list ("Model not found"). */
  readonly modelsComplete = true;

  /** What `opencode models --verbose` lists (its config and environment are the backend's). */
  async models(signal: AbortSignal): Promise<DiscoveredModel[]> {
    return parseOpencodeModels(await this.cli.output(["models", "--verbose"], signal));
  }

  /** Pid of the warm server now (undefined when none runs). */
  get warmPid(): number | undefined {
    return this.warm?.pid;
  }

  async close(): Promise<void> {
    // The closed manager stays: a turn after shutdown runs cold rather than starting a server.
    await this.warm?.close();
  }

  /** One turn with `opencode run` of its own. */
  private async *coldTurn(turn: TurnInput, bin: string, cwd: string): AsyncGenerator<BackendEvent> {
    const args = ["run", "--format", "json"];
    // Not `provider/model`: OpenCode's default model (`-m default` would be refused), as on the warm path.
    if (opencodeModel(turn.model)) args.push("-m", turn.model);
    if (this.opts.agent) args.push("--agent", this.opts.agent);
    const resuming = turn.session.backendSessionId;
    if (resuming) args.push("--session", resuming);
    // The person's images as files (relative to the working directory, which is opencode's $PWD):
    // OpenCode reads each into its session as a data URL; removed after the turn.
    const images = writeTurnImages(cwd, turn.images);
    if (images && "error" in images) {
      yield { type: "error", error: { code: "backend_failed", message: `opencode: ${images.error}`, status: 500 } };
      return;
    }
    for (const file of images?.relative ?? []) args.push(`--file=${file}`);
    args.push(...this.opts.args);
    const system = turn.prompt.system;
    let env = this.env();
    // A resume turn's bootstrap goes to the system prompt (an instructions file, per turn, private,
    // removed afterwards): the session keeps only the person's words, turn after turn.
    const systemFile =
      turn.session.resume && system
        ? writeTurnFile(this.deps.dataDir, "opencode-system-", "clawbridge.md", system)
        : undefined;
    const withFile = systemFile && withInstructions(env, systemFile.file);
    if (withFile) env = withFile;
    // Otherwise (`run` has no system-prompt flag) the instructions lead the prompt.
    const prompt = system && !withFile ? `${system}\n\n${turn.prompt.text}` : turn.prompt.text;
    const state = newOpencodeState();
    /** The last line was a step's end that ends OpenCode's loop (`stop`, `length`: no tool call follows). */
    let lastStep = false;
    try {
      yield* this.cliTurn(
        turn,
        { label: "opencode", bin, args, env, cwd, stdin: prompt },
        {
          onEvent: (ev) => {
            const e = ev as OpencodeEvent;
            lastStep = e.type === "step_finish" && (e.part?.reason === "stop" || e.part?.reason === "length");
            return mapOpencodeEvent(e, state);
          },
          finish: (end) => finishOpencodeTurn(state, end, !!resuming),
          // The turn's last step ended without an error: a cold turn ends there (src/backends/cli/base.ts).
          settled: () => lastStep && !state.error,
        },
      );
    } finally {
      systemFile?.remove();
      images?.remove();
    }
  }
}

/**
 * `env` with `file` added to the `instructions` of OPENCODE_CONFIG_CONTENT (OpenCode joins the
 * instructions of all its config sources and puts each file into the system prompt); undefined when
 * that variable holds something other than a JSON object (the caller then leads the prompt with it).
 */
export function withInstructions(env: NodeJS.ProcessEnv, file: string): NodeJS.ProcessEnv | undefined {
  const raw = env.OPENCODE_CONFIG_CONTENT;
  let config: Record<string, unknown> = {};
  if (raw?.trim()) {
    try {
      const parsed: unknown = JSON.parse(raw);
      if (!parsed || typeof parsed !== "object" || Array.isArray(parsed)) return undefined;
      config = parsed as Record<string, unknown>;
    } catch {
      return undefined;
    }
  }
  const instructions = Array.isArray(config.instructions) ? config.instructions : [];
  return { ...env, OPENCODE_CONFIG_CONTENT: JSON.stringify({ ...config, instructions: [...instructions, file] }) };
}

/** How `opencode run --session <id>` says it has no such session (stderr, exit 1, nothing on stdout). */
const SESSION_NOT_FOUND = /Session not found/i;

/** The events that end a turn, from what the run printed and how the process ended (`resuming`: it was given `--session`). */
export function finishOpencodeTurn(state: OpencodeTurnState, end: ProcessEnd, resuming = false): BackendEvent[] {
  if (state.error) return [{ type: "error", error: state.error }];
  if (!state.sawText && state.steps === 0) {
    const why = stderrTail(end.stderr, 3, 500);
    if (resuming && SESSION_NOT_FOUND.test(why)) {
      const line = why.split(" | ").find((l) => SESSION_NOT_FOUND.test(l)) ?? why;
      return [
        {
          type: "error",
          error: { code: "session_not_found", message: `opencode: ${line.replace(/^Error:\s*/, "")}`, status: 404 },
        },
      ];
    }
    return [
      {
        type: "error",
        error: {
          code: "backend_failed",
          message: `opencode exited ${end.code ?? end.signal} without an answer${why ? `: ${why}` : ""}`,
          status: 502,
        },
      },
    ];
  }
  const out: BackendEvent[] = [];
  if (state.sawUsage) out.push({ type: "usage", usage: state.usage });
  out.push({ type: "done", finishReason: state.finish });
  return out;
}

export const opencodeBackend: BackendModule<OpencodeOptions> = {
  ...opencodeDescriptor,
  create: (name, options, deps) => new OpencodeBackend(name, options, deps),
};
