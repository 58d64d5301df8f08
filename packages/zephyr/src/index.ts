/** @module @marin/zephyr: lazy Dataset pipelines: sources, readers and writers (JSONL, Parquet, Arrow, MediaWiki XML),
 * fused transforms, resumable execution. */
import pkg from '../package.json' with { type: 'json' }

export const name: string = pkg.name
export const version: string = pkg.version

export { ZEPHYR_ERROR_CODES, ZephyrError, isZephyrError } from './errors.js'
export type { ZephyrErrorCode, ZephyrErrorOptions } from './errors.js'
export { Dataset } from './dataset.js'
export type { Row } from './dataset.js'
export { col, evaluate, mayMatch } from './expr.js'
export type { ColumnRef, ColumnStats, Expr, ExprBuilder, Scalar } from './expr.js'
export { ZephyrContext } from './context.js'
export type { ZephyrContextOptions } from './context.js'
export type { ExecuteOptions, ExecuteResult } from './executor.js'
export type { StageCounters, TaskCounters } from './counters.js'
export type { ShardInfo } from './fuse.js'
export type { KeySpec } from './keys.js'
export { fnRef } from './user-fn.js'
export type { FnSpec, FunctionRef } from './user-fn.js'
export { ParquetReader } from './parquet-reader.js'
export type { ParquetReaderOptions } from './parquet-reader.js'
export { formatPattern } from './output-pattern.js'
export { wikitextToText } from './wikitext.js'
export { readWikiXml } from './readers/wiki-xml.js'
export type { WikiPage, WikiXmlOptions } from './readers/wiki-xml.js'
export type { WarcOptions, WarcPage, WarcSkip, WarcSkipReason } from './readers/warc.js'
export type { CorruptLinePolicy, JsonlOptions } from './readers/jsonl.js'
export type { ParquetWriteOptions } from './writers/parquet.js'
export type { ProgressMode } from './progress.js'
