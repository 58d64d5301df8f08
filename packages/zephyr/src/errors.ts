/** @module The one error class of @marin/zephyr, with codes from a closed set. */

export const ZEPHYR_ERROR_CODES = [
  /** A pipeline was built wrong (bad argument, missing loader, writer not last). */
  'INVALID_PLAN',
  /** A glob matched nothing, or an input file is missing. */
  'INPUT_NOT_FOUND',
  /** A JSONL line that is not JSON (policy `fail`). */
  'CORRUPT_JSONL',
  /** A Parquet file that cannot be decoded (truncated, bad footer, bad page). */
  'CORRUPT_PARQUET',
  /** An Arrow IPC file that cannot be decoded. */
  'CORRUPT_ARROW',
  /** A MediaWiki XML export that is not well-formed. */
  'CORRUPT_XML',
  /** A WARC file that cannot be parsed, or that ends inside a record (`onTruncated: 'error'`). */
  'CORRUPT_WARC',
  /** A compressed input whose codec is unknown or whose bytes do not decode. */
  'CORRUPT_COMPRESSED',
  /** An output path already exists and neither `skipExisting` nor `overwrite` was set. */
  'OUTPUT_EXISTS',
  /** A record the writer cannot encode (e.g. no columns for Parquet). */
  'UNWRITABLE_RECORD',
  /** A user function threw; the message names the stage, shard and operation. */
  'USER_FUNCTION_FAILED',
  /** A function cannot be shipped to a worker process (it captures local variables or is native). */
  'FUNCTION_NOT_PORTABLE',
  /** A shard task failed on every attempt. */
  'TASK_FAILED',
  /** A single group or key is larger than the memory budget can hold. */
  'MEMORY_BUDGET_EXCEEDED',
] as const

export type ZephyrErrorCode = (typeof ZEPHYR_ERROR_CODES)[number]

export type ZephyrErrorOptions = ErrorOptions & {
  /** The input ended early (a cut download) rather than holding bad bytes. @default false */
  readonly truncated?: boolean
}

/**
 * Every failure zephyr reports. `code` is stable and safe to branch on; the
 * message says what failed, on what (file, line, stage, shard), and what to do.
 */
export class ZephyrError extends Error {
  override name = 'ZephyrError'
  /** The input ended early: everything before the cut was read, the rest is missing. */
  readonly truncated: boolean
  constructor(
    readonly code: ZephyrErrorCode,
    message: string,
    readonly retryable = false,
    options?: ZephyrErrorOptions,
  ) {
    super(message, options)
    this.truncated = options?.truncated ?? false
  }
}

export function isZephyrError(err: unknown, code?: ZephyrErrorCode): err is ZephyrError {
  return err instanceof ZephyrError && (code === undefined || err.code === code)
}
