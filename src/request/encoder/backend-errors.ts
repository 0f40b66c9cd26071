/** A backend failure as an HTTP status and an OpenAI-shaped error body (JSON answer or SSE data line). */
import type { BackendError } from "../../backends/contract/backend.js";
import { ApiError, type ApiErrorBody, type ErrorType } from "../chat-api/errors.js";

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
  if (
    err.status &&
    err.status >= 400 &&
    err.status < 500 &&
    err.status !== 408 &&
    err.status !== 409 &&
    err.status !== 499 &&
    !err.retryable
  )
    return "invalid_request_error";
  return "backend_error";
}

/** `Retry-After` (whole seconds, at least 1) for a reset time. */
export function retryAfter(resetAt: number): string {
  return String(Math.max(1, Math.ceil((resetAt - Date.now()) / 1000)));
}

export function backendErrorStatus(err: BackendError): number {
  return err.status && err.status >= 400 && err.status < 600 ? err.status : 502;
}

/** A backend failure as an `ApiError` (its status, type and code), for a door to shape. */
export function apiErrorOf(err: BackendError): ApiError {
  return new ApiError(backendErrorStatus(err), errorType(err), err.code, err.message);
}
