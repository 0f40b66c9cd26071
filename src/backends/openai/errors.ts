/**
 * Upstream error classification and messages of the OpenAI-compatible backend: network error
 * codes, HTTP error statuses, error payloads in a body or stream, and the bridge errors a stopped
 * request (abort, a deadline) or a failed one becomes.
 */
import type { BackendError } from "../contract/backend.js";
import { isMomentary, limitErrorOf, mask, recogniseHttpLimit } from "../cli/limits.js";

/** The network error code of `err` or of one of its causes (undici wraps them). */
export function errCode(err: unknown): string | undefined {
  let e: unknown = err;
  for (let i = 0; i < 5 && e && typeof e === "object"; i++) {
    const c = (e as { code?: unknown }).code;
    if (typeof c === "string" && c !== "UND_ERR_ABORTED" && !c.startsWith("ERR_")) return c;
    e = (e as { cause?: unknown }).cause;
  }
  const c = (err as { code?: unknown })?.code;
  return typeof c === "string" ? c : undefined;
}

/** Codes of an upstream that cannot be reached at all. */
export const UNREACHABLE = new Set([
  "ECONNREFUSED",
  "ENOTFOUND",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EAI_AGAIN",
  "UND_ERR_CONNECT_TIMEOUT",
  "ETIMEDOUT",
  "EADDRNOTAVAIL",
]);
/** Codes of a connection closed by the other side (a stale pooled keep-alive socket, before an answer). */
export const SOCKET_CLOSED = new Set(["UND_ERR_SOCKET", "ECONNRESET", "EPIPE", "UND_ERR_CLOSED"]);

export function describeUnreachable(code: string): string {
  switch (code) {
    case "ECONNREFUSED":
      return "connection refused — is the server running?";
    case "ENOTFOUND":
    case "EAI_AGAIN":
      return "host name not found";
    case "UND_ERR_CONNECT_TIMEOUT":
    case "ETIMEDOUT":
      return "connect timed out";
    default:
      return "network unreachable";
  }
}

/** The upstream's own error message from an error body (OpenAI, vLLM, Ollama, llama.cpp shapes, or text). */
export function upstreamErrorMessage(raw: string): string {
  const text = raw.trim();
  try {
    const j = JSON.parse(text) as unknown;
    if (j && typeof j === "object") {
      const o = j as { error?: unknown; message?: unknown; detail?: unknown };
      if (typeof o.error === "string") return o.error;
      if (o.error && typeof o.error === "object" && typeof (o.error as { message?: unknown }).message === "string")
        return (o.error as { message: string }).message;
      if (typeof o.message === "string") return o.message;
      if (typeof o.detail === "string") return o.detail;
      if (Array.isArray(o.detail)) return JSON.stringify(o.detail).slice(0, 500);
    }
  } catch {
    // not JSON: use the text
  }
  return text.length > 500 ? `${text.slice(0, 500)}…` : text || "(empty body)";
}

/** The error an HTTP error status of the upstream becomes (its own message, retry hint, retryable). */
export function statusError(
  status: number,
  headers: Record<string, string | string[] | undefined>,
  text: string,
  now = Date.now(),
): BackendError {
  const retry =
    status === 429 || status === 503 ? retryAfterText(headers["retry-after"], headers["retry-after-ms"]) : "";
  const message = `upstream ${status}: ${mask(upstreamErrorMessage(text))}${retry}`;
  // A limit (429, 402, insufficient_quota…) or a refused key (401, 403): src/backends/cli/limits.ts.
  // A 429 that clears within seconds (a full queue) stays a plain retryable upstream_error.
  const limit = status >= 400 && status < 500 ? recogniseHttpLimit(status, text, headers, now) : undefined;
  if (limit && !isMomentary(limit, now)) {
    if (limit.kind === "auth") return { code: "auth_failed", message, status: 401, retryable: false };
    return {
      code: "limit_reached",
      message,
      status: 429,
      retryable: true,
      ...(limit.resetAt !== undefined ? { resetAt: limit.resetAt } : {}),
    };
  }
  return {
    code: "upstream_error",
    message,
    status,
    retryable: status === 408 || status === 409 || status === 429 || status >= 500,
  };
}

function retryAfterText(h: string | string[] | undefined, hMs: string | string[] | undefined): string {
  const ms = Array.isArray(hMs) ? hMs[0] : hMs;
  if (ms && /^\d+(\.\d+)?$/.test(ms)) return ` (retry after ${Math.ceil(Number(ms) / 1000)} s)`;
  const v = Array.isArray(h) ? h[0] : h;
  if (!v) return "";
  if (/^\d+(\.\d+)?$/.test(v.trim())) return ` (retry after ${v.trim()} s)`;
  const when = Date.parse(v);
  if (!Number.isNaN(when)) return ` (retry after ${Math.max(0, Math.ceil((when - Date.now()) / 1000))} s)`;
  return ` (retry after ${v})`;
}

/** The URL without credentials, for messages and logs. */
export function safeUrl(u: URL): string {
  return `${u.protocol}//${u.host}${u.pathname.replace(/\/$/, "")}`;
}

/** Why the bridge stopped an upstream request. */
export type StopReason = "aborted" | "timeout" | "first_byte" | "idle";

/** The limits named in the timeout messages. */
interface Deadlines {
  timeoutSeconds: number;
  firstByteTimeoutSeconds: number;
  idleTimeoutSeconds: number;
}

/** The error of a request stopped by the bridge: the client went away, or a deadline passed. */
export function stopError(why: StopReason, url: string, o: Deadlines): BackendError {
  switch (why) {
    case "aborted":
      return { code: "aborted", message: "request aborted", retryable: false };
    case "timeout":
      return {
        code: "backend_timeout",
        message: `upstream ${url} did not finish within ${o.timeoutSeconds} s`,
        status: 504,
        retryable: true,
      };
    case "first_byte":
      return {
        code: "backend_timeout",
        message: `upstream ${url} sent nothing for ${o.firstByteTimeoutSeconds} s after the request (first-byte timeout)`,
        status: 504,
        retryable: true,
      };
    case "idle":
      return {
        code: "backend_timeout",
        message: `upstream ${url} went silent for ${o.idleTimeoutSeconds} s in the middle of the answer (idle timeout)`,
        status: 504,
        retryable: true,
      };
  }
}

/**
 * The error of a request that failed by itself (not stopped by the bridge): unreachable while
 * connecting, the connection closed, anything else. `display` is the upstream's root, `url` the
 * chat endpoint (both without credentials).
 */
export function requestError(err: unknown, phase: "connect" | "stream", display: string, url: string): BackendError {
  const code = errCode(err) ?? "";
  if (phase === "connect" && UNREACHABLE.has(code)) {
    return {
      code: "backend_unavailable",
      message: `cannot reach upstream ${display}: ${describeUnreachable(code)} (${code})`,
      status: 503,
      retryable: true,
    };
  }
  if (SOCKET_CLOSED.has(code)) {
    return {
      code: "upstream_error",
      message:
        phase === "connect"
          ? `upstream ${display} closed the connection before answering (${code})`
          : `upstream ${display} closed the connection in the middle of the answer (${code})`,
      status: 502,
      retryable: true,
    };
  }
  const msg = err instanceof Error ? err.message : String(err);
  return {
    code: "backend_failed",
    message: `request to upstream ${url} failed: ${msg}${code ? ` (${code})` : ""}`,
    status: 502,
    retryable: true,
  };
}

/** An error carried in a stream chunk or a JSON body (`{"error":{...}}` or vLLM's `{"object":"error",...}`). */
export function chunkError(obj: unknown, event?: string): BackendError | undefined {
  if (!obj || typeof obj !== "object") return undefined;
  const o = obj as { error?: unknown; object?: unknown; message?: unknown; code?: unknown };
  if (o.error === undefined && o.object !== "error" && event !== "error") return undefined;
  if (o.error === null) return undefined;
  const e = (o.error && typeof o.error === "object" ? o.error : o) as {
    message?: unknown;
    code?: unknown;
    status?: unknown;
  };
  const message =
    typeof o.error === "string"
      ? o.error
      : typeof e.message === "string"
        ? e.message
        : JSON.stringify(obj).slice(0, 300);
  const code = typeof e.code === "number" ? e.code : typeof e.status === "number" ? e.status : undefined;
  const status = code !== undefined && code >= 400 && code < 600 ? code : 502;
  // A limit or a refused key named inside the stream (`"code": 429`, `insufficient_quota`…).
  const limited = limitErrorOf("upstream error", JSON.stringify(obj), {
    now: Date.now(),
    ...(status === 429 || status === 401 || status === 402 ? { status } : {}),
  });
  if (limited && (status === 429 || status === 401 || status === 402 || /quota|rate.?limit/i.test(message)))
    return { ...limited, message: `upstream error: ${mask(message)}` };
  return {
    code: "upstream_error",
    message: `upstream error: ${message}`,
    status,
    retryable: status === 429 || status >= 500,
  };
}
