/** OpenAI-shaped errors: `{"error":{"message","type","code","param"}}` with an HTTP status. */
import type { BackendError } from "../backends/types.js";

export type ErrorType = "invalid_request_error" | "authentication_error" | "not_found_error" | "rate_limit_error" | "server_error" | "backend_error";

export interface ApiErrorBody {
  error: { message: string; type: ErrorType; code: string | null; param: string | null };
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly type: ErrorType,
    readonly code: string,
    message: string,
    readonly param: string | null = null,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = "ApiError";
  }

  body(): ApiErrorBody {
    return { error: { message: this.message, type: this.type, code: this.code, param: this.param } };
  }
}

export const badRequest = (message: string, code = "invalid_request", param: string | null = null) => new ApiError(400, "invalid_request_error", code, message, param);

export const unauthorized = () =>
  new ApiError(401, "authentication_error", "invalid_api_key", "Missing or wrong API key: send `Authorization: Bearer <key>` with one of server.apiKeys.");

export const internalError = () => new ApiError(500, "server_error", "internal_error", "Internal error in the bridge; see its log.");

/** The error a backend failure becomes, in a JSON body or an SSE data line. */
export function backendErrorBody(err: BackendError): ApiErrorBody {
  return {
    error: {
      message: err.message,
      type: errorType(err),
      code: err.code,
      param: null,
    },
  };
}

/**
 * A refusal that retrying cannot fix (an upstream 4xx other than 408/409/429) is an
 * `invalid_request_error`, so clients fail at once instead of retrying (OpenClaw 2026.9 retries
 * `backend_error`s for over a minute); rate limits are `rate_limit_error`; the rest `backend_error`.
 */
function errorType(err: BackendError): ErrorType {
  if (err.status === 429) return "rate_limit_error";
  if (err.status && err.status >= 400 && err.status < 500 && err.status !== 408 && err.status !== 409 && err.status !== 499 && !err.retryable) return "invalid_request_error";
  return "backend_error";
}

export function backendErrorStatus(err: BackendError): number {
  return err.status && err.status >= 400 && err.status < 600 ? err.status : 502;
}
