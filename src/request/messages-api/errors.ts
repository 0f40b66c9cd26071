/**
 * Errors as the Anthropic Messages API shapes them: `{"type":"error","error":{"type","message"}}`,
 * the type named by the HTTP status as the real API names it (400 invalid_request_error, 401
 * authentication_error, 403 permission_error, 404 not_found_error, 413 request_too_large, 429
 * rate_limit_error, 500 api_error, 503/529 overloaded_error, 504 timeout_error). The status is kept:
 * the official SDK picks its error class by status (BadRequestError, AuthenticationError,
 * NotFoundError, RateLimitError, InternalServerError…) and retries 408, 409, 429 and 5xx, which
 * is right for a full queue (429) and a bridge shutting down (503). A failure in the middle of a
 * stream is `event: error` with the same body.
 */
import type { BackendError } from "../../backends/contract/backend.js";
import type { ApiError } from "../chat-api/errors.js";
import { apiErrorOf } from "../encoder/backend-errors.js";

export type AnthropicErrorType =
  | "invalid_request_error"
  | "authentication_error"
  | "billing_error"
  | "permission_error"
  | "not_found_error"
  | "request_too_large"
  | "rate_limit_error"
  | "api_error"
  | "timeout_error"
  | "overloaded_error";

export interface AnthropicErrorBody {
  type: "error";
  error: { type: AnthropicErrorType; message: string };
}

/** The Anthropic error type of an HTTP status. */
export function anthropicErrorType(status: number): AnthropicErrorType {
  switch (status) {
    case 400:
      return "invalid_request_error";
    case 401:
      return "authentication_error";
    case 402:
      return "billing_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 413:
      return "request_too_large";
    case 429:
      return "rate_limit_error";
    case 503:
    case 529:
      return "overloaded_error";
    case 504:
      return "timeout_error";
    default:
      return status >= 500 ? "api_error" : "invalid_request_error";
  }
}

/** An `ApiError` (the door runner's, a route's) in Anthropic's shape. */
export function anthropicErrorBody(err: ApiError): AnthropicErrorBody {
  return { type: "error", error: { type: anthropicErrorType(err.status), message: err.message } };
}

/** A backend failure as an HTTP status and Anthropic body (statuses as every door maps them). */
export function backendFailure(err: BackendError): { status: number; body: AnthropicErrorBody } {
  const api = apiErrorOf(err);
  return { status: api.status, body: anthropicErrorBody(api) };
}

/** A backend failure as the stream's `event: error` frame. */
export function errorFrame(err: BackendError): string {
  return `event: error\ndata: ${JSON.stringify(backendFailure(err).body)}\n\n`;
}
