/**
 * The images of a turn, as the backends get them. By the time a turn runs, every `image_url` part
 * of its request is a checked data URL (src/request/images/resolve.ts). Then:
 * - `turnImages`: the images of the person's NEW message(s) — the messages after the last
 *   assistant answer — as `TurnImage`s (bytes, media type, a file name) for a CLI backend, which
 *   hands them to its agent in its own way; earlier images are already in the agent's session
 *   (resume) or shown as a line in the history (stateless);
 * - `withoutImages`: for a model that cannot see images, each image becomes one line of text that
 *   says so, so the model can tell the person instead of answering as if nothing was sent.
 */
import type { TurnImage } from "../../backends/contract/backend.js";
import type { ChatMessage, ChatRequest } from "../chat-api/schema.js";

const EXT: Record<string, string> = {
  "image/png": "png",
  "image/jpeg": "jpg",
  "image/gif": "gif",
  "image/webp": "webp",
};
const DATA = /^data:([^;,]+);base64,/;

function dataUrlOf(part: unknown): string | undefined {
  const p = part as { type?: unknown; image_url?: unknown };
  if (p.type !== "image_url") return undefined;
  const v = p.image_url;
  const url = typeof v === "string" ? v : (v as { url?: unknown } | undefined)?.url;
  return typeof url === "string" && url.startsWith("data:") ? url : undefined;
}

/** Index of the first message after the last assistant answer. */
function newFrom(messages: readonly ChatMessage[]): number {
  for (let i = messages.length - 1; i >= 0; i--) if (messages[i]!.role === "assistant") return i + 1;
  return 0;
}

/** Whether the request holds an image part anywhere (cheap: most requests have none). */
export function hasImages(messages: readonly ChatMessage[]): boolean {
  for (const m of messages) {
    if (!Array.isArray(m.content)) continue;
    for (const p of m.content) if (p.type === "image_url") return true;
  }
  return false;
}

/** The images of the person's new message(s), in order. */
export function turnImages(messages: readonly ChatMessage[]): TurnImage[] {
  const out: TurnImage[] = [];
  for (let i = newFrom(messages); i < messages.length; i++) {
    const content = messages[i]!.content;
    if (!Array.isArray(content)) continue;
    for (const part of content) {
      const url = dataUrlOf(part);
      if (!url) continue;
      const m = DATA.exec(url);
      if (!m) continue;
      const mediaType = m[1]!.toLowerCase();
      const base64 = url.slice(m[0].length);
      out.push({
        mediaType,
        base64,
        bytes: Buffer.byteLength(base64, "base64"),
        name: `image-${out.length + 1}.${EXT[mediaType] ?? "bin"}`,
      });
    }
  }
  return out;
}

/** The line a model that cannot see images gets in place of one. */
export function imageLine(model: string, mediaType: string | undefined): string {
  return `[The person sent an image${mediaType ? ` (${mediaType})` : ""} here, but ${model} cannot see images, so it was not passed on. Say so if it matters.]`;
}

/** The request with each image part replaced by a line saying the model cannot see it, and how many were. */
export function withoutImages(request: ChatRequest, model: string): { request: ChatRequest; dropped: number } {
  let dropped = 0;
  const messages = request.messages.map((m) => {
    if (!Array.isArray(m.content) || !m.content.some((p) => p.type === "image_url")) return m;
    const content = m.content.map((p) => {
      if (p.type !== "image_url") return p;
      dropped++;
      const url = dataUrlOf(p);
      return { type: "text" as const, text: imageLine(model, url ? DATA.exec(url)?.[1] : undefined) };
    });
    return { ...m, content };
  });
  return { request: dropped ? { ...request, messages } : request, dropped };
}
