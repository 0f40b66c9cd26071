/**
 * What a door is: one client API (Chat Completions, Responses, Anthropic Messages) in front of the
 * one pipeline. A door turns its API's request into the pipeline's language (a Chat Completions
 * request, images as `image_url` parts) and the pipeline's typed events back into its API's stream
 * (a `StreamDialect`) or JSON answer. The HTTP work every door shares (API keys, the body limit,
 * JSON, images, the model's route, the conversation, refusals, shutdown) is the door runner's
 * (src/request/http/door-route.ts); a door never knows which backend answers.
 */
import type { IncomingMessage } from "node:http";
import type { BackendError, BackendEvent } from "../../backends/contract/backend.js";
import type { ApiError } from "../chat-api/errors.js";
import type { ChatRequest } from "../chat-api/schema.js";
import type { StreamDialect } from "../encoder/stream.js";
import type { Conversation } from "../identity/conversation.js";

/** Facts about the turn a door's answer may carry (ids, the conversation, the model asked for). */
export interface DoorTurn {
  requestId: string;
  conversation: Conversation;
  /** The model id the client asked for, as it asked. */
  model: string;
  /** The model that answered (a fallback may answer for it): the `x-clawbridge-answered-by` header's value, read when the answer ends. */
  answeredBy(): string;
}

export type Collected = { ok: true; body: object } | { ok: false; error: BackendError };

/** One request, validated and translated by its door. */
export interface DoorRequest {
  /** The request in the pipeline's language: Chat Completions, images as `image_url` parts. */
  chat: ChatRequest;
  stream: boolean;
  /**
   * This API's own conversation identity (the root of a Responses chain, Anthropic's
   * `metadata.user_id`): used after the session headers and before anything derived.
   */
  conversation?: Conversation;
  /** The dialect of the streamed answer (one per response). */
  dialect(turn: DoorTurn): StreamDialect;
  /** The JSON answer collected from the events; a backend failure is returned, not thrown. */
  collect(events: AsyncIterable<BackendEvent>, turn: DoorTurn): Promise<Collected>;
}

export interface Door {
  /** `chat`, `responses`, `messages`: in logs and metrics. */
  readonly name: string;
  /** Its requests are the pipeline's own (Chat Completions): an error may name their fields as the pipeline sees them. */
  readonly native?: boolean;
  /** What the body must hold, for the error about a body that is no JSON object: "with `model` and `messages`". */
  readonly bodyHint: string;
  /** Whether the request line is this door's (POST and its path, with or without a query string). */
  matches(method: string | undefined, url: string | undefined): boolean;
  /** An error as this API shapes it (the status is the error's own). */
  errorBody(err: ApiError): object;
  /** Validate and translate a JSON object body; throws an `ApiError` (400 with the field) for a bad one. */
  parse(raw: Record<string, unknown>, req: IncomingMessage): DoorRequest | Promise<DoorRequest>;
}

/** Whether `url` is `path`, or `path` followed by a query string. */
export function isPath(url: string | undefined, path: string): boolean {
  return url !== undefined && (url === path || (url.startsWith(path) && url.charCodeAt(path.length) === 63)); // "?"
}
