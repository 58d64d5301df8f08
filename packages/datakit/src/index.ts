/** @module @marin/datakit: versioned datasets: ingestion, sampling, dedup passes, byte-level BPE tokenizers and token
 * caches. */
import pkg from '../package.json' with { type: 'json' }

export const name: string = pkg.name
export const version: string = pkg.version

// Errors
export { DATAKIT_ERROR_CODES, DatakitError } from './errors.js'
export type { DatakitErrorCode } from './errors.js'

// Tokenizers
export { BpeTokenizer, parseTokenizerJson } from './tokenizer/bpe-tokenizer.js'
export type {
  BpeTokenizerSpec,
  EncodeOptions,
  MetaspacePrepend,
  SpecialToken,
  TokenizerJson,
} from './tokenizer/bpe-tokenizer.js'
export { trainBpe } from './tokenizer/train-bpe.js'
export type { TrainBpeOptions } from './tokenizer/train-bpe.js'
export { BYTE_TO_CHAR } from './tokenizer/byte-level.js'
export { GPT2_PATTERN, LLAMA3_PATTERN } from './tokenizer/pretokenize.js'

// Datasets
export { ingest, INGEST_FORMATS } from './dataset/ingest.js'
export type { DatasetMetadata, IngestFormat, IngestOptions, IngestResult } from './dataset/ingest.js'
export { contentId, normalizeDocument, resolveNormalize } from './dataset/record.js'
export type { DatakitRecord, NormalizeConfig } from './dataset/record.js'
export { Dataset, fromDatakit } from './dataset/from-datakit.js'
export { openDataset, parseDatasetRef } from './dataset/open-dataset.js'
export type { DatasetVersion, OpenOptions } from './dataset/open-dataset.js'
export { idUnit, sample, split } from './dataset/sample.js'
export type { SampleOptions, SplitOptions } from './dataset/sample.js'
export { datasetArtifact, cacheArtifact } from './store.js'
export type { StoreAccess } from './store.js'

// Dedup
export { dedup } from './dedup/dedup.js'
export type { DedupLevelReport, DedupOptions, DedupReport, DedupResult } from './dedup/dedup.js'

// Decontamination
export { decontaminate, indexHash } from './decontam/decontaminate.js'
export type { DecontaminateOptions, DecontaminateResult, DecontamReport } from './decontam/decontaminate.js'
export { buildNgramIndex, DECONTAM_NGRAM, matchNgrams, ngramHashes, wordsOf } from './decontam/ngram-index.js'
export type { EvalTexts, NgramIndex, NgramMatch } from './decontam/ngram-index.js'

// Quality
export { Classifier, DEFAULT_ARGS as DEFAULT_CLASSIFIER_ARGS } from './quality/classifier.js'
export type { ClassifierArgs } from './quality/classifier.js'
export { trainClassifier } from './quality/train.js'
export type { LabelledExample, TrainResult, TrainStats } from './quality/train.js'
export { decodeClassifier, encodeClassifier, loadClassifier, saveClassifier } from './quality/model-file.js'
export { classifierArtifact, trainQualityClassifier } from './quality/train-quality.js'
export type { TrainQualityOptions, TrainQualityResult } from './quality/train-quality.js'
export { scoreQuality } from './quality/score-quality.js'
export type { QualityReport, ScoreQualityOptions, ScoreQualityResult } from './quality/score-quality.js'

// Web
export { filterLanguage, ingestWarc } from './web/ingest-warc.js'
export type { FilterLanguageOptions, IngestWarcOptions, WebStepResult } from './web/ingest-warc.js'
export type { WebStats } from './web/web-shard.js'
export { DEFAULT_MAX_HTML_BYTES, extractMainText } from './web/extract.js'
export type { ExtractMiss, ExtractOptions, Extracted } from './web/extract.js'
export { keepLanguage, languageIdentifier } from './web/language.js'
export type { LanguageFilter, LanguageGuess, LanguageIdentifier } from './web/language.js'

// Corpora
export { BROWN_HELD_OUT_FILES, brownParagraphs, readBrown, untagBrown } from './corpus/brown.js'
export type { BrownDocument, BrownPart, ReadBrownOptions } from './corpus/brown.js'

// Token caches
export { buildTokenCache } from './cache/build-token-cache.js'
export type { BuildTokenCacheOptions, BuildTokenCacheResult, TokenCacheLedger } from './cache/build-token-cache.js'
export type { ShardSummary } from './cache/tokenize-shard.js'
export { TokenCache } from './cache/token-cache.js'
export type { BatchOptions, OpenTokenCacheOptions } from './cache/token-cache.js'
export { FeistelPermutation } from './cache/feistel.js'

// CLI
export { runCli } from './cli.js'
