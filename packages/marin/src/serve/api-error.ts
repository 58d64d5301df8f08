/** @module Errors in OpenAI's shape: `{ error: { message, type, param, code } }` with an HTTP status. */

export type ApiErrorBody = { error: { message: string; type: string; param: string | null; code: string | null } }

/** A request the API rejects; the app turns it into its status, `headers` and OpenAI-shaped body. */
export class ApiError extends Error {
  override name = 'ApiError'
  constructor(
    readonly status: 400 | 401 | 404 | 405 | 413 | 429 | 500 | 503,
    message: string,
    readonly param: string | null = null,
    readonly code: string | null = null,
    /** Sent with the error: `Allow` with a 405, `Retry-After` with a 429. */
    readonly headers: Readonly<Record<string, string>> = {},
  ) {
    super(message)
  }

  get type(): string {
    if (this.status === 401) return 'authentication_error'
    if (this.status === 429) return 'rate_limit_error'
    if (this.status === 503) return 'service_unavailable'
    if (this.status === 500) return 'server_error'
    return 'invalid_request_error'
  }

  body(): ApiErrorBody {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.code } }
  }
}
