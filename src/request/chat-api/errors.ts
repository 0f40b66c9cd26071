/**
 * OpenAI-shaped errors: `{"error":{"message","type","code","param"}}` with an HTTP status. Every
 * error the bridge answers has this shape; the server maps the pipeline's typed refusals and the
 * encoders map backend failures (`src/request/encoder/backend-errors.ts`) onto it.
 */

export type ErrorType =
  | "invalid_request_error"
  | "authentication_error"
  | "not_found_error"
  | "rate_limit_error"
  | "server_error"
  | "backend_error";

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

export const badRequest = (message: string, code = "invalid_request", param: string | null = null) =>
  new ApiError(400, "invalid_request_error", code, message, param);

export const unauthorized = () =>
  new ApiError(
    401,
    "authentication_error",
    "invalid_api_key",
    "Missing or wrong API key: send `Authorization: Bearer <key>` with one of server.apiKeys.",
  );

export const internalError = () =>
  new ApiError(500, "server_error", "internal_error", "Internal error in the bridge; see its log.");
