/** @module The one error class of @marin/datakit, with codes from a closed set. */

export const DATAKIT_ERROR_CODES = [
  'TOKENIZER_INVALID',
  'TOKENIZER_UNKNOWN_TOKEN',
  'TOKENIZER_TRAIN_INPUT',
  'INVALID_ARGUMENT',
  'SOURCE_EMPTY',
  'SOURCE_NOT_FOUND',
  'INVALID_UTF8',
  'DATASET_NOT_FOUND',
  'VERSION_NOT_FOUND',
  'CACHE_LEDGER_MISMATCH',
  'CACHE_INDEX_OUT_OF_RANGE',
] as const

export type DatakitErrorCode = (typeof DATAKIT_ERROR_CODES)[number]

/** Every failure datakit reports; the message says what failed, on what, and what to do. */
export class DatakitError extends Error {
  override name = 'DatakitError'
  constructor(
    readonly code: DatakitErrorCode,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options)
  }
}
