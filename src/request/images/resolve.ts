/**
 * The images of a request, made safe before its turn. Every door translates its own image kinds
 * (OpenAI `image_url` parts, Anthropic `image` blocks, Responses `input_image`) into the
 * pipeline's `image_url` parts; here each one becomes a checked data URL:
 * - a data URL is decoded and checked: base64, at most `images.maxBytes`, and really an image of a
 *   kind every model API takes (PNG, JPEG, GIF, WebP — recognised by its first bytes, which win
 *   over the media type the client claimed);
 * - an http(s) URL is fetched by the bridge through the network guard (src/core/net/netguard.ts:
 *   no loopback, private, link-local or metadata address, checked after DNS and on every redirect,
 *   unless `images.fetch` allows it), with a deadline and a byte cap, then checked the same way;
 * - anything else (another scheme, a file path) is refused.
 * A refused image is the client's error: a 400 naming the image's place in the request and what to
 * do instead, before anything is queued or streamed. The bytes then reach every backend the same
 * way (src/request/images/parts.ts): data URLs for a passthrough upstream, `TurnImage`s for a CLI.
 */
import type { Dispatcher } from "undici";
import type { ImagesConfig } from "../../core/config/schema.js";
import { NetGuard, systemResolve, type ResolveFn } from "../../core/net/netguard.js";
import { ApiError } from "../chat-api/errors.js";
import type { ChatRequest } from "../chat-api/schema.js";
import { guardedAgent, httpGet, ToolError } from "../web-tools/http-get.js";

export interface ImageResolver {
  /** The request with every image a checked data URL; throws an `ApiError` (400) naming the image and what to fix. */
  resolve(request: ChatRequest, signal: AbortSignal): Promise<ChatRequest>;
}

/** The image kinds every model API takes, by their first bytes. */
export function sniffImage(data: Uint8Array): string | undefined {
  const b = data;
  if (b.length >= 8 && b[0] === 0x89 && b[1] === 0x50 && b[2] === 0x4e && b[3] === 0x47) return "image/png";
  if (b.length >= 3 && b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff) return "image/jpeg";
  if (b.length >= 6 && b[0] === 0x47 && b[1] === 0x49 && b[2] === 0x46 && b[3] === 0x38) return "image/gif";
  if (
    b.length >= 12 &&
    b[0] === 0x52 &&
    b[1] === 0x49 &&
    b[2] === 0x46 &&
    b[3] === 0x46 &&
    b[8] === 0x57 &&
    b[9] === 0x45 &&
    b[10] === 0x42 &&
    b[11] === 0x50
  )
    return "image/webp";
  return undefined;
}

const KINDS = "PNG, JPEG, GIF or WebP";
const DATA_URL = /^data:([^;,]*)((?:;[^;,]*)*),/i;

/** A data URL's media type and bytes, or why it is not one the bridge takes. */
export function decodeDataUrl(
  url: string,
  maxBytes: number,
): { ok: true; mediaType: string; data: Buffer } | { ok: false; why: string } {
  const m = DATA_URL.exec(url);
  if (!m) return { ok: false, why: "is not a valid data URL (data:image/png;base64,...)" };
  if (!/;base64$/i.test(m[2] ?? "")) return { ok: false, why: "is a data URL without ;base64 (send the image base64)" };
  const payload = url.slice(m[0].length);
  // 4 base64 characters hold 3 bytes: refuse an oversized one before decoding it.
  const approx = Math.floor((payload.length * 3) / 4);
  if (approx > maxBytes + 3) return { ok: false, why: tooLarge(approx, maxBytes) };
  if (!/^[A-Za-z0-9+/_-]*={0,2}\s*$/.test(payload)) return { ok: false, why: "holds characters that are not base64" };
  const data = Buffer.from(payload, "base64");
  if (data.length > maxBytes) return { ok: false, why: tooLarge(data.length, maxBytes) };
  if (data.length === 0) return { ok: false, why: "is empty" };
  const mediaType = sniffImage(data);
  if (!mediaType) return { ok: false, why: `is not a ${KINDS} image (its bytes say otherwise)` };
  return { ok: true, mediaType, data };
}

function tooLarge(bytes: number, max: number): string {
  return `is ${mb(bytes)}, larger than the ${mb(max)} allowed (images.maxBytes): send a smaller image`;
}

const mb = (n: number) => (n >= 1024 * 1024 ? `${(n / 1024 / 1024).toFixed(1)} MB` : `${Math.ceil(n / 1024)} KB`);

/** The URL of an `image_url` part (`{url}` or, as some clients send it, the string itself). */
function urlOf(part: Record<string, unknown>): string | undefined {
  const v = part.image_url;
  if (typeof v === "string") return v;
  if (v && typeof v === "object" && typeof (v as { url?: unknown }).url === "string") return (v as { url: string }).url;
  return undefined;
}

export class Images implements ImageResolver {
  private readonly guard: NetGuard;
  private agent?: Dispatcher;

  constructor(
    private readonly config: ImagesConfig,
    private readonly resolveDns: ResolveFn = systemResolve,
  ) {
    this.guard = new NetGuard({
      allowPrivateAddresses: config.fetch.allowPrivateAddresses,
      allowHosts: config.fetch.allowHosts,
    });
  }

  async resolve(request: ChatRequest, signal: AbortSignal): Promise<ChatRequest> {
    const { maxBytes, maxPerRequest } = this.config;
    let count = 0;
    let messages: ChatRequest["messages"] | undefined;
    for (let i = 0; i < request.messages.length; i++) {
      const message = request.messages[i]!;
      if (!Array.isArray(message.content)) continue;
      let parts: typeof message.content | undefined;
      for (let j = 0; j < message.content.length; j++) {
        const part = message.content[j] as Record<string, unknown>;
        if (part.type !== "image_url") continue;
        const where = `messages[${i}].content[${j}].image_url`;
        if (++count > maxPerRequest)
          throw refused(
            `${where}: more than ${maxPerRequest} images in one request (images.maxPerRequest); send fewer`,
            "too_many_images",
            where,
          );
        const url = urlOf(part);
        let dataUrl: string;
        try {
          if (!url)
            throw refused(`${where}.url: an image part needs a URL (a data URL or http(s))`, "invalid_image", where);
          dataUrl = url.startsWith("data:")
            ? this.checked(url, where, maxBytes)
            : await this.fetched(url, where, signal);
        } catch (err) {
          throw err instanceof ApiError ? new ImageRefused(err, count, where) : err;
        }
        if (dataUrl === url) continue;
        parts ??= message.content.slice();
        const detail = typeof part.image_url === "object" ? (part.image_url as Record<string, unknown>) : {};
        parts[j] = { ...part, type: "image_url", image_url: { ...detail, url: dataUrl } };
      }
      if (parts) {
        messages ??= request.messages.slice();
        messages[i] = { ...message, content: parts };
      }
    }
    return messages ? { ...request, messages } : request;
  }

  /** A data URL as it is when it is a checked image; with its media type corrected when the client named another. */
  private checked(url: string, where: string, maxBytes: number): string {
    const d = decodeDataUrl(url, maxBytes);
    if (!d.ok)
      throw refused(
        `${where}.url ${d.why}`,
        d.why.startsWith("is ") && d.why.includes("larger") ? "image_too_large" : "invalid_image",
        where,
      );
    const claimed = DATA_URL.exec(url)?.[1]?.toLowerCase();
    return claimed === d.mediaType ? url : `data:${d.mediaType};base64,${d.data.toString("base64")}`;
  }

  private async fetched(url: string, where: string, signal: AbortSignal): Promise<string> {
    if (!/^https?:\/\//i.test(url))
      throw refused(
        `${where}.url: only data URLs and http(s) URLs are taken (got "${url.slice(0, 40)}"); send the image as a data URL`,
        "invalid_image_url",
        where,
      );
    const { fetch, maxBytes } = this.config;
    if (!fetch.enabled)
      throw refused(
        `${where}.url: this bridge does not fetch image URLs (images.fetch.enabled is false); send the image as a data URL`,
        "image_url_not_fetched",
        where,
      );
    const timeoutMs = fetch.timeoutSeconds * 1000;
    this.agent ??= guardedAgent(this.guard, this.resolveDns, timeoutMs);
    try {
      const got = await httpGet(url, {
        timeoutMs,
        maxBytes: maxBytes + 1,
        maxRedirects: 3,
        guard: this.guard,
        dispatcher: this.agent,
        signal,
        binary: true,
        accept: "image/png,image/jpeg,image/gif,image/webp,image/*;q=0.8",
      });
      if (got.truncated || got.data.length > maxBytes)
        throw refused(`${where}.url: the image ${tooLarge(got.data.length, maxBytes)}`, "image_too_large", where);
      const mediaType = sniffImage(got.data);
      if (!mediaType)
        throw refused(
          `${where}.url: what ${new URL(url).host} sent is not a ${KINDS} image (content-type ${got.contentType || "none"})`,
          "invalid_image",
          where,
        );
      return `data:${mediaType};base64,${got.data.toString("base64")}`;
    } catch (err) {
      if (err instanceof ApiError) throw err;
      const e = err as ToolError;
      if (e instanceof ToolError && e.code === "BLOCKED")
        throw refused(
          `${where}.url: the bridge does not fetch from this address (${e.message}); send the image as a data URL, or allow the host in images.fetch.allowHosts`,
          "image_url_blocked",
          where,
        );
      throw refused(
        `${where}.url: the image could not be fetched (${(err as Error).message}); send it as a data URL`,
        "image_url_unreachable",
        where,
      );
    }
  }

  async close(): Promise<void> {
    await (this.agent as { close?: () => Promise<void> } | undefined)?.close?.();
  }
}

const refused = (message: string, code: string, param: string) =>
  new ApiError(400, "invalid_request_error", code, message, param);

/**
 * A refused image, which also knows its place as "image N of the request": a door whose API is not
 * Chat Completions names it that way (`counted()`), since the pipeline's message positions are not
 * its client's.
 */
export class ImageRefused extends ApiError {
  constructor(
    err: ApiError,
    /** 1-based, counting every image of the request in order. */
    readonly ordinal: number,
    private readonly where: string,
  ) {
    super(err.status, err.type, err.code, err.message, err.param, err.headers);
  }

  counted(): ApiError {
    const rest = this.message.startsWith(this.where)
      ? this.message.slice(this.where.length).replace(/^\.url/, "")
      : `: ${this.message}`;
    return new ApiError(
      this.status,
      this.type,
      this.code,
      `image ${this.ordinal} of the request${rest}`,
      null,
      this.headers,
    );
  }
}
