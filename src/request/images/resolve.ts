/**
 * The images of a request, made safe before its turn: every `image_url` part of the pipeline's
 * request (each door translates its own image kinds into these) ends up a checked data URL.
 * (Placeholder interface; the implementation follows in this room.)
 */
import type { ChatRequest } from "../chat-api/schema.js";

export interface ImageResolver {
  /** The request with every image a checked data URL; throws an `ApiError` (400) naming the image and what to fix. */
  resolve(request: ChatRequest, signal: AbortSignal): Promise<ChatRequest>;
}
