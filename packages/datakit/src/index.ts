/** @module @marin/datakit: versioned datasets: ingestion, sampling, dedup passes, byte-level BPE tokenizers and token caches. */
import pkg from '../package.json' with { type: 'json' }

export const name: string = pkg.name
export const version: string = pkg.version

// Errors
export { DATAKIT_ERROR_CODES, DatakitError } from './errors.js'
export type { DatakitErrorCode } from './errors.js'

// Tokenizers
export { BpeTokenizer, parseTokenizerJson } from './tokenizer/bpe-tokenizer.js'
export type { BpeTokenizerSpec, EncodeOptions, SpecialToken, TokenizerJson } from './tokenizer/bpe-tokenizer.js'
export { trainBpe } from './tokenizer/train-bpe.js'
export type { TrainBpeOptions } from './tokenizer/train-bpe.js'
export { BYTE_TO_CHAR } from './tokenizer/byte-level.js'
export { GPT2_PATTERN } from './tokenizer/pretokenize.js'
