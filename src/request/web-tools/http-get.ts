/**
 * Small HTTP GET client for the tools: undici with its own Agent, a hard byte cap, an overall
 * deadline, manual redirects (each hop re-checked by the NetGuard when one is given), no
 * credentials (no Authorization/Cookie headers are ever added; the caller passes only what a
 * provider needs), and charset-aware decoding.
 */
import { Agent, request } from "undici";
import type { Dispatcher } from "undici";
import { createBrotliDecompress, createGunzip, createInflate } from "node:zlib";
import type { Transform } from "node:stream";
import { BlockedError, type NetGuard, type ResolveFn } from "../../core/net/netguard.js";

export const DEFAULT_USER_AGENT = "Mozilla/5.0 (compatible; clawbridge/0.1)";

export class ToolError extends Error {
  constructor(
    readonly code:
      | "TIMEOUT"
      | "NETWORK"
      | "HTTP"
      | "BLOCKED"
      | "PARSE"
      | "UNSUPPORTED"
      | "CONFIG"
      | "ABORTED"
      | "EMPTY",
    message: string,
  ) {
    super(message);
    this.name = "ToolError";
  }
}

export interface HttpGetOptions {
  timeoutMs: number;
  maxBytes: number;
  /** Redirects to follow (0 = none; a 3xx is then an error). */
  maxRedirects: number;
  headers?: Record<string, string>;
  signal?: AbortSignal;
  /** When set, every URL (first and each redirect) is checked and connections use `dispatcher`. */
  guard?: NetGuard;
  dispatcher: Dispatcher;
  /** The body is not text (an image): `text` stays empty, `data` holds it. */
  binary?: boolean;
  /** The `accept` header (default: HTML, JSON, text). */
  accept?: string;
}

export interface HttpResult {
  /** Final URL after redirects. */
  url: string;
  status: number;
  contentType: string;
  /** Decoded body text (possibly cut at maxBytes, see `truncated`). */
  text: string;
  /** The body's bytes, as they came (after content-encoding; cut at maxBytes too). */
  data: Buffer;
  bytes: number;
  truncated: boolean;
  redirects: number;
}

const FORBIDDEN_HEADERS = new Set(["authorization", "cookie", "proxy-authorization"]);

/** Create the Agent used for untrusted URLs: DNS results go through the guard at connect time. */
export function guardedAgent(guard: NetGuard, resolve: ResolveFn, timeoutMs: number): Agent {
  return new Agent({
    connect: { lookup: guard.lookupHook(resolve) as never, timeout: timeoutMs },
    headersTimeout: timeoutMs,
    bodyTimeout: timeoutMs,
    connections: 8,
  });
}

/** Agent for operator-configured (trusted) endpoints such as search providers. */
export function plainAgent(timeoutMs: number): Agent {
  return new Agent({
    connect: { timeout: timeoutMs },
    headersTimeout: timeoutMs,
    bodyTimeout: timeoutMs,
    connections: 8,
  });
}

function charsetOf(contentType: string, head: Uint8Array): string {
  const m = /charset\s*=\s*"?([\w.:-]+)/i.exec(contentType);
  if (m) return m[1]!.toLowerCase();
  if (/html/i.test(contentType)) {
    const sniff = Buffer.from(head.subarray(0, 2048)).toString("latin1");
    const meta = /<meta[^>]+charset\s*=\s*["']?([\w.:-]+)/i.exec(sniff);
    if (meta) return meta[1]!.toLowerCase();
  }
  return "utf-8";
}

function decode(buf: Uint8Array, contentType: string): string {
  const cs = charsetOf(contentType, buf);
  try {
    return new TextDecoder(cs).decode(buf);
  } catch {
    return new TextDecoder("utf-8").decode(buf);
  }
}

function decompressor(encoding: string): Transform | null {
  switch (encoding.trim().toLowerCase()) {
    case "gzip":
    case "x-gzip":
      return createGunzip();
    case "deflate":
      return createInflate();
    case "br":
      return createBrotliDecompress();
    default:
      return null;
  }
}

/** Read at most maxBytes of (decompressed) body, then stop the download. */
async function readCapped(
  body: AsyncIterable<Uint8Array> & { destroy(err?: Error): void },
  encoding: string,
  maxBytes: number,
): Promise<{ buf: Buffer; truncated: boolean }> {
  const chunks: Buffer[] = [];
  let total = 0;
  let truncated = false;
  const z = encoding && encoding !== "identity" ? decompressor(encoding) : null;
  if (encoding && encoding !== "identity" && !z)
    throw new ToolError("UNSUPPORTED", `unsupported content-encoding ${encoding}`);
  let source: AsyncIterable<Uint8Array> = body;
  if (z) {
    const raw = body as unknown as NodeJS.ReadableStream;
    // pipe() does not forward errors: a failed or aborted download must end the decompressor too.
    raw.on("error", (err: Error) => z.destroy(err));
    source = raw.pipe(z);
  }
  try {
    for await (const chunk of source) {
      const c = Buffer.from(chunk);
      if (total + c.length > maxBytes) {
        chunks.push(c.subarray(0, maxBytes - total));
        total = maxBytes;
        truncated = true;
        break;
      }
      chunks.push(c);
      total += c.length;
    }
  } catch (err) {
    if (z && err instanceof Error && /incorrect header|invalid|unexpected end/i.test(err.message)) {
      throw new ToolError("PARSE", `could not decompress body: ${err.message}`);
    }
    throw err;
  } finally {
    if (truncated) {
      body.destroy();
      z?.destroy();
    }
  }
  return { buf: Buffer.concat(chunks, total), truncated };
}

/** Map any low-level failure to a ToolError with a short, log-safe reason. */
export function toToolError(err: unknown, what: string, timedOut: boolean, aborted: boolean): ToolError {
  if (err instanceof ToolError) return err;
  if (err instanceof BlockedError) return new ToolError("BLOCKED", err.message);
  // The guard's error may arrive wrapped by undici / net.
  const cause = (err as { cause?: unknown })?.cause;
  if (cause instanceof BlockedError) return new ToolError("BLOCKED", cause.message);
  if (timedOut) return new ToolError("TIMEOUT", `${what} timed out`);
  if (aborted) return new ToolError("ABORTED", `${what} aborted`);
  const e = err as { code?: string; message?: string; name?: string };
  const code = e?.code ?? (cause as { code?: string })?.code;
  if (code === "UND_ERR_HEADERS_TIMEOUT" || code === "UND_ERR_BODY_TIMEOUT" || code === "UND_ERR_CONNECT_TIMEOUT") {
    return new ToolError("TIMEOUT", `${what} timed out`);
  }
  const msg = (e?.message ?? String(err)).replace(/\s+/g, " ").slice(0, 200);
  return new ToolError("NETWORK", `${what} failed: ${code ? `${code} ` : ""}${msg}`);
}

/**
 * GET a URL. Follows up to `maxRedirects` redirects (re-checking each hop with the guard), stops
 * reading at `maxBytes`, and gives up after `timeoutMs` in total.
 */
export async function httpGet(rawUrl: string, opts: HttpGetOptions): Promise<HttpResult> {
  const timeout = AbortSignal.timeout(opts.timeoutMs);
  const signal = opts.signal ? AbortSignal.any([timeout, opts.signal]) : timeout;
  const headers: Record<string, string> = {
    "user-agent": DEFAULT_USER_AGENT,
    accept: opts.accept ?? "text/html,application/xhtml+xml,application/json;q=0.9,text/plain;q=0.8,*/*;q=0.5",
    "accept-encoding": "gzip, deflate, br",
  };
  for (const [k, v] of Object.entries(opts.headers ?? {})) {
    if (!FORBIDDEN_HEADERS.has(k.toLowerCase())) headers[k.toLowerCase()] = v;
  }
  let url: URL;
  try {
    url = opts.guard ? opts.guard.checkUrl(rawUrl) : new URL(rawUrl);
  } catch (err) {
    throw toToolError(err, "request", false, false);
  }
  let redirects = 0;
  try {
    for (;;) {
      const res = await request(url, {
        method: "GET",
        headers,
        signal,
        dispatcher: opts.dispatcher,
      });
      if (res.statusCode >= 300 && res.statusCode < 400 && res.statusCode !== 304) {
        const location = res.headers.location;
        await res.body.dump({ limit: 64 * 1024 }).catch(() => undefined);
        const loc = Array.isArray(location) ? location[0] : location;
        if (!loc) throw new ToolError("HTTP", `HTTP ${res.statusCode} without Location`);
        if (redirects >= opts.maxRedirects) {
          throw new ToolError(
            "HTTP",
            opts.maxRedirects === 0
              ? `unexpected redirect (HTTP ${res.statusCode})`
              : `too many redirects (> ${opts.maxRedirects})`,
          );
        }
        redirects++;
        let next: URL;
        try {
          next = new URL(loc, url);
        } catch {
          throw new ToolError("HTTP", "redirect to an invalid URL");
        }
        url = opts.guard ? opts.guard.checkUrl(next) : next;
        continue;
      }
      const ctHeader = res.headers["content-type"];
      const contentType = (Array.isArray(ctHeader) ? ctHeader[0] : ctHeader) ?? "";
      if (res.statusCode < 200 || res.statusCode >= 300) {
        await res.body.dump({ limit: 64 * 1024 }).catch(() => undefined);
        throw new ToolError("HTTP", `HTTP ${res.statusCode}`);
      }
      const encHeader = res.headers["content-encoding"];
      const encoding = (Array.isArray(encHeader) ? encHeader[0] : encHeader) ?? "";
      const { buf, truncated } = await readCapped(res.body, encoding, opts.maxBytes);
      return {
        url: url.toString(),
        status: res.statusCode,
        contentType,
        text: opts.binary ? "" : decode(buf, contentType),
        data: buf,
        bytes: buf.length,
        truncated,
        redirects,
      };
    }
  } catch (err) {
    throw toToolError(err, `GET ${url.host}`, timeout.aborted, opts.signal?.aborted ?? false);
  }
}
