/**
 * One turn as the pipeline sees it: the validated request, where it was routed, whose
 * conversation it is, its cancellation and logger. One object instead of the same six or seven
 * parameters threaded through every step.
 */
import type { Logger } from "pino";
import type {
  ClientToolsTurn,
  PromptParts,
  SessionInfo,
  TurnImage,
  TurnInput,
} from "../../backends/contract/backend.js";
import { hasImages, turnImages } from "../images/parts.js";
import type { SessionMode } from "../../core/config/schema.js";
import { findCurrentUserTurn } from "../context/metadata.js";
import type { LiveData } from "../context/stateless.js";
import type { Conversation } from "../identity/conversation.js";
import type { ChatRequest } from "../chat-api/schema.js";
import type { Route } from "../models/routes.js";
import type { Cancellation } from "../../core/util/cancel.js";

/** What the caller (the HTTP layer, a test, a future router) hands the pipeline: already routed and identified. */
export interface TurnRequest {
  request: ChatRequest;
  route: Route;
  conversation: Conversation;
}

export class Turn implements TurnRequest {
  readonly started = Date.now();
  /** Live data fetched before the model answers (tool pre-execution). */
  live: LiveData[] = [];
  /** Resume mode: turns of this conversation its backend's session missed (a fallback model answered them). */
  missedTurns = 0;

  constructor(
    readonly requestId: string,
    readonly request: ChatRequest,
    readonly route: Route,
    readonly conversation: Conversation,
    readonly cancel: Cancellation,
    readonly log: Logger,
  ) {}

  /** The session mode this turn runs in: resume needs a real conversation identity, else a model may fall back to stateless. */
  get mode(): SessionMode {
    const model = this.route.model;
    if (
      model.sessionMode === "resume" &&
      this.conversation.source === "derived" &&
      model.session.fallback === "stateless"
    )
      return "stateless";
    return model.sessionMode;
  }

  /** The same turn with its request changed (images replaced by lines for a model that cannot see them). */
  withRequest(request: ChatRequest): Turn {
    const t = new Turn(this.requestId, request, this.route, this.conversation, this.cancel, this.log);
    t.live = this.live;
    t.missedTurns = this.missedTurns;
    return t;
  }

  /** The same turn, answered by another route (a dispatching backend handed it over). */
  withRoute(route: Route): Turn {
    const t = new Turn(this.requestId, this.request, route, this.conversation, this.cancel, this.log);
    t.live = this.live;
    return t;
  }

  /**
   * The same turn on a fallback model: in resume mode its session is kept apart from the primary's
   * (`fallbackKey`), so the primary's own session is there to go back to.
   */
  onFallback(route: Route): Turn {
    const conversation = { ...this.conversation, key: fallbackKey(this.conversation.key, route.model.backend) };
    const t = new Turn(this.requestId, this.request, route, conversation, this.cancel, this.log);
    t.live = this.live;
    return t;
  }

  /** What the person typed this turn (found once: tool pre-execution, the resume marker and usage read it). */
  userText(): string {
    return (this.said ??= findCurrentUserTurn(this.request.messages).text);
  }
  private said?: string;

  /** The backend's input for this turn. */
  input(prompt: PromptParts, session: SessionInfo, clientTools?: ClientToolsTurn): TurnInput {
    const input = new BackendInput(this.route.model.backendModel, prompt, this.request, session, this.cancel);
    if (clientTools) input.clientTools = clientTools;
    // The person's new images, for a backend that gives them to its model (`answerOn` replaced
    // them with lines for one that cannot).
    if (this.route.backend.imageInput && hasImages(this.request.messages)) {
      const images = turnImages(this.request.messages);
      if (images.length) input.images = images;
    }
    return input;
  }
}

/**
 * A backend's input: `cancel`, and the standard `signal` made only when the backend reads it.
 * A class, not an object literal with a getter: V8 builds those slowly (seen per request).
 */
export class BackendInput implements TurnInput {
  constructor(
    readonly model: string,
    readonly prompt: PromptParts,
    readonly request: ChatRequest,
    readonly session: SessionInfo,
    readonly cancel: Cancellation,
  ) {}
  clientTools?: ClientToolsTurn;
  images?: TurnImage[];
  get signal(): AbortSignal {
    return this.cancel.signal;
  }
}

/**
 * A passthrough turn's prompt: the request goes to the backend as it is, and the prompt text is
 * only read to count usage when an upstream reports none, so it is found then.
 */
export class PassthroughPrompt implements PromptParts {
  readonly system = "";
  private found?: string;
  constructor(private readonly messages: ChatRequest["messages"]) {}
  get text(): string {
    return (this.found ??= findCurrentUserTurn(this.messages).text);
  }
}

/** The session key of a conversation on a fallback backend (resume mode). */
export const fallbackKey = (key: string, backend: string): string => `${key}~fallback:${backend}`;
