/**
 * The backend boundary. A backend turns one conversational turn into a typed event stream.
 * The HTTP layer and the response encoders only ever see these types — never a CLI, a process or
 * an upstream URL.
 */
import type { Cancellation } from "../../core/util/cancel.js";
import type { ChatRequest } from "../../request/chat-api/schema.js";

/** Why a turn ended, in OpenAI's vocabulary. */
export type FinishReason = "stop" | "length" | "tool_calls" | "content_filter";

export interface Usage {
  promptTokens: number;
  completionTokens: number;
  totalTokens: number;
  /** True when the backend did not report usage and the bridge counted tokens itself. */
  estimated?: boolean;
  cachedTokens?: number;
  reasoningTokens?: number;
  /** True when the answer was replayed to a resent request (src/backends/client-tools/replay.ts): no model was called for it. */
  replayed?: boolean;
}

/** One event of a backend's answer, in the order the backend produced it. */
export type BackendEvent =
  /** Visible answer text, as soon as the backend produced it. */
  | { type: "text"; text: string }
  /** Reasoning / thinking text (sent to clients as `delta.reasoning_content`). */
  | { type: "reasoning"; text: string }
  /**
   * A tool call for the CLIENT to execute (OpenAI `tool_calls`). Each call's chunks arrive together:
   * the first chunk of a call carries `id` and `name`, later ones only `argumentsDelta`.
   */
  | {
      type: "tool_call";
      index: number;
      id?: string;
      name?: string;
      argumentsDelta: string;
      /** Set on a call the backend found written as text and turned into a real call (src/backends/openai/toolcalls), not one the model made natively. */
      extracted?: true;
    }
  /** The backend is working with one of ITS OWN tools (a CLI reading a file, running a search...). */
  | { type: "tool_activity"; name: string; status: "started" | "completed" | "failed"; detail?: string }
  | { type: "usage"; usage: Usage }
  /** The backend's own session/thread id for this conversation (confirmed by the backend). */
  | { type: "session"; id: string }
  /** A failure. After an error event no further events follow. */
  | { type: "error"; error: BackendError }
  /** The turn finished normally. */
  | { type: "done"; finishReason: FinishReason };

export type BackendErrorCode =
  | "backend_timeout"
  | "backend_unavailable"
  | "backend_failed"
  | "backend_rejected"
  | "upstream_error"
  | "session_not_found"
  /** A usage, rate or quota limit of the account or the upstream (status 429); `resetAt` when it said when. */
  | "limit_reached"
  /** The CLI's login or the upstream's key is missing, expired or refused (status 401). */
  | "auth_failed"
  | "aborted";

export interface BackendError {
  code: BackendErrorCode;
  /** Human-readable reason, safe to show to the user (no secrets). */
  message: string;
  /** HTTP-ish status that best describes the failure when it happens before any output. */
  status?: number;
  /** Whether the same turn may succeed if tried again later. */
  retryable?: boolean;
  /** `limit_reached`: when the limit resets (ms since the epoch), when the backend said (a reset time, a unix time, a Retry-After). */
  resetAt?: number;
}

/** What the bridge built for the backend out of the client's request. */
export interface PromptParts {
  /** Instructions for the agent (compressed system prompt or resume bootstrap). */
  system: string;
  /** The text the backend receives as the user's turn (stateless: the whole compact prompt). */
  text: string;
}

export interface SessionInfo {
  /** The conversation key this turn belongs to (see src/request/identity). */
  key: string;
  /** The backend's own session id to continue, when resuming. */
  backendSessionId?: string;
  /** Working directory for this conversation, when the backend needs one. */
  cwd?: string;
  /** How many turns this conversation has already had on this backend. */
  turn: number;
  /**
   * The pipeline keeps this conversation's backend session between turns (resume mode). Unset for
   * stateless turns, side calls and systems' steps, which start afresh every time: a warm backend
   * whose process is tied to one session runs those cold.
   */
  resume?: boolean;
}

/** One of the client's tools, as its request offered it (OpenAI `tools[].function`). */
export interface ClientToolDef {
  name: string;
  description?: string;
  /** The JSON schema of its arguments (always an object schema). */
  parameters: Record<string, unknown>;
}

/** A tool message of the request: the result of one call the previous response asked for. */
export interface ClientToolResult {
  id: string;
  name?: string;
  text: string;
}

/**
 * The client's tools on a turn of a model in `tools.mode: bridge` (src/backends/client-tools): a CLI backend
 * that can offers them to its agent as MCP tools; a call ends the response with `tool_calls` and
 * the agent's turn waits for the client's next request, whose `tool` messages are `results`.
 */
export interface ClientToolsTurn {
  tools: ClientToolDef[];
  pendingTimeoutSeconds: number;
  /** The request's trailing tool messages (empty when the last message is the person's). */
  results: ClientToolResult[];
  /**
   * Tool results AND, after them, the person's new message (OpenClaw sends both when the person
   * types while a tool runs): `results` is then empty (they do not trail), and these are the
   * results with the message that follows them.
   */
  resultsThenMessage?: { results: ClientToolResult[]; message: string };
}

/**
 * An image the person sent with this turn (an OpenAI `image_url` part, an Anthropic `image` block,
 * a Responses `input_image`), fetched and checked at the door (src/request/images): always bytes
 * here, never a URL. The pipeline hands a backend the images of the person's NEW message(s) only
 * (the trailing user messages), in order; a backend without `imageInput` never gets any.
 */
export interface TurnImage {
  /** `image/png`, `image/jpeg`, `image/gif` or `image/webp`. */
  mediaType: string;
  /** The image, base64 (as every wire format carries it). */
  base64: string;
  /** Its size in bytes. */
  bytes: number;
  /** A file name for CLIs that read images from files, unique in the turn: `image-1.png`. */
  name: string;
}

export interface TurnInput {
  /** The model name the backend is given (after remapping), e.g. `opencode/minimax-m2.5-free`. */
  model: string;
  prompt: PromptParts;
  /** The validated client request, for backends that pass requests through (OpenAI upstreams). */
  request: ChatRequest;
  session: SessionInfo;
  /**
   * The turn's cancellation: aborted when the client goes away, the bridge shuts down, or the
   * turn's deadline passes (the pipeline owns that one deadline; then `cancel.reason` is a
   * `TurnDeadline` and the backend should report `backend_timeout`). Plain listener functions,
   * cheaper than an EventTarget.
   */
  cancel: Cancellation;
  /** The same cancellation as a standard signal (made when first read: CLI processes, fetch). */
  signal: AbortSignal;
  /** The client's tools, offered to the agent (a model in `tools.mode: bridge`, resume mode). */
  clientTools?: ClientToolsTurn;
  /**
   * The images of the person's new message(s), for a backend with `imageInput` (a CLI gives them to
   * its agent in its own way: image blocks, files in the turn's working directory, image options).
   * A passthrough backend (openai) sends `request` as it is: its image parts are data URLs by then.
   */
  images?: TurnImage[];
}

export interface BackendHealth {
  usable: boolean;
  /** What was checked and what is wrong, in words a user can act on. */
  detail: string;
  version?: string;
}

/** A model a backend's CLI or server offers (src/backends/catalog). */
export interface DiscoveredModel {
  /** What the backend is given as its model, e.g. `opencode/big-pickle`, `sonnet`, `qwen3:8b`. */
  id: string;
  /** A display name, when the CLI gives one. */
  name?: string;
  /** Costs nothing to use (OpenCode's free tier, a local server). */
  free?: boolean;
  /** Context window in tokens, when known. */
  contextWindow?: number;
  /** Input types it takes, when known (`text`, `image`, `audio`, `video`, `pdf`). */
  input?: string[];
  /** It can call tools, when known. */
  toolCalls?: boolean;
}

export interface Backend {
  /** The name given in configuration (`backends.<name>`). */
  readonly name: string;
  /** The backend type (`opencode`, `claude-code`, `openai`...). */
  readonly type: string;
  /**
   * The turn deadline in seconds (the backend's `timeoutSeconds` option). The pipeline enforces it
   * for every turn (src/request/pipeline/enforce-contract.ts); a backend keeps no whole-turn timer of its own.
   */
  readonly timeoutSeconds?: number;
  /** Answer one turn. Must end with exactly one `done` or `error` event and must stop promptly when `cancel` aborts. */
  run(turn: TurnInput): AsyncIterable<BackendEvent>;
  /** Cheap check whether the backend can be used (binary present, upstream reachable...). */
  health(): Promise<BackendHealth>;
  /**
   * The models its CLI or server offers now (`opencode models`, an upstream's `GET /models`, a
   * CLI's documented aliases). Rejects when they cannot be listed (CLI missing, no answer).
   */
  models?(signal: AbortSignal): Promise<DiscoveredModel[]>;
  /**
   * `models()` lists every model it accepts: one it does not list is refused (OpenCode, a model
   * server). Otherwise (a CLI's documented aliases) the list is what it offers, not all it takes.
   */
  readonly modelsComplete?: boolean;
  /**
   * It gives the person's images to its model (`TurnInput.images`, or the request's image parts for
   * a passthrough backend). Without it the pipeline replaces each image with one line saying the
   * model cannot see it (and says so in the turn's event) instead of dropping it silently.
   */
  readonly imageInput?: boolean;
  /** Release pooled resources on shutdown. */
  close?(): Promise<void>;
  /** Present on a dispatching backend (the router): decides before the turn (see `Dispatcher`). */
  dispatch?: Dispatcher["dispatch"];
}

/**
 * What a dispatching backend (the router, src/workflows/router) is given before its turn: the person's own
 * words, with the client's wrappers stripped by the pipeline, and a little context.
 */
export interface DispatchInput {
  turn: TurnInput;
  /** What the person typed in the last user message ("" when the last message is not theirs). */
  userText: string;
  /**
   * Set when the last message is not a person's words: a tool result being handed back, the
   * client's heartbeat, or an internal-context message. Such a turn never triggers a system.
   */
  notFromPerson?: "tool_result" | "heartbeat" | "internal";
  /** A few turns before it, oldest first, wrappers stripped. */
  recent: Array<{ role: "user" | "assistant"; text: string }>;
  /**
   * Identity of this message: the same for a client's retry of the same request, different for a
   * new message with the same words (hash of the raw last message and its position).
   */
  messageKey: string;
}

/** A dispatching backend's verdict on one turn. */
export type Dispatch =
  /** Hand the turn over, transparently, to another configured model (by id); `preface` is streamed first. */
  | { kind: "handover"; model: string; preface?: string }
  /** The dispatching backend answers itself. */
  | { kind: "answer"; events: AsyncIterable<BackendEvent> };

/**
 * A backend that decides per turn whether to answer itself or hand the turn to another model
 * (`type: router`). The pipeline calls `dispatch` instead of `run` when the routed backend has it.
 */
export interface Dispatcher {
  dispatch(input: DispatchInput): Promise<Dispatch>;
}
