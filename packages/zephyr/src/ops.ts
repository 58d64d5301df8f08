/**
 * @module The operations of a plan, as data. Functions stay functions in
 * process; `portable.ts` turns them into source text for worker processes.
 * A user function is inline or a module reference (`user-fn.ts`), with
 * optional bound `args` passed as its last argument.
 */
import type { Expr } from './expr.js'
import type { KeySpec } from './keys.js'
import type { ArrowReadOptions } from './readers/arrow.js'
import type { JsonlOptions } from './readers/jsonl.js'
import type { TextOptions } from './readers/text.js'
import type { WarcOptions } from './readers/warc.js'
import type { WikiXmlOptions } from './readers/wiki-xml.js'
import type { ParquetWriteOptions } from './writers/parquet.js'
import type { FnSpec } from './user-fn.js'

// `any`: a pipeline stage takes and returns whatever the previous stage made.
export type AnyFn = (...args: any[]) => any

export type LoaderSpec =
  | { readonly format: 'jsonl'; readonly options: JsonlOptions }
  | { readonly format: 'parquet'; readonly options: { readonly columns?: readonly string[]; readonly filter?: Expr } }
  | { readonly format: 'arrow'; readonly options: ArrowReadOptions }
  | { readonly format: 'text'; readonly options: TextOptions }
  | { readonly format: 'wikiXml'; readonly options: WikiXmlOptions }
  | { readonly format: 'warc'; readonly options: WarcOptions }

export type WriterSpec =
  | { readonly format: 'jsonl'; readonly pattern: string }
  | { readonly format: 'parquet'; readonly pattern: string; readonly options: ParquetWriteOptions }
  | { readonly format: 'arrow'; readonly pattern: string }

/** Operations fused into one pass over a shard. */
export type RecordOp =
  | { readonly kind: 'load'; readonly loader: LoaderSpec }
  | { readonly kind: 'map'; readonly fn: FnSpec; readonly args?: unknown }
  | { readonly kind: 'filter'; readonly fn: FnSpec; readonly args?: unknown }
  | { readonly kind: 'filterExpr'; readonly expr: Expr }
  | { readonly kind: 'flatMap'; readonly fn: FnSpec; readonly args?: unknown }
  | { readonly kind: 'select'; readonly columns: readonly string[] }
  | { readonly kind: 'mapShard'; readonly fn: FnSpec; readonly args?: unknown }
  | { readonly kind: 'window'; readonly size: number }
  | { readonly kind: 'take'; readonly n: number }

/** Operations that end a stage: records move between shards. */
export type BoundaryOp =
  | { readonly kind: 'reshard'; readonly numShards: number }
  | {
      readonly kind: 'groupBy'
      readonly key: KeySpec
      readonly reducer: FnSpec
      readonly args?: unknown
      readonly numShards?: number
    }
  | { readonly kind: 'deduplicate'; readonly key: KeySpec; readonly numShards?: number }

export type Op = RecordOp | BoundaryOp | { readonly kind: 'write'; readonly writer: WriterSpec }

export type Source =
  | { readonly kind: 'files'; readonly pattern: string }
  | { readonly kind: 'list'; readonly items: readonly unknown[]; readonly numShards: number }
  | { readonly kind: 'iterable'; readonly iterable: Iterable<unknown> | AsyncIterable<unknown> }

export function isBoundary(op: Op): op is BoundaryOp {
  return op.kind === 'reshard' || op.kind === 'groupBy' || op.kind === 'deduplicate'
}

/** A short label for progress lines and errors, e.g. `loadJsonl`, `map`, `writeParquet`. */
export function opLabel(op: Op): string {
  if (op.kind === 'load') return `load${op.loader.format[0]!.toUpperCase()}${op.loader.format.slice(1)}`
  if (op.kind === 'write') return `write${op.writer.format[0]!.toUpperCase()}${op.writer.format.slice(1)}`
  return op.kind
}
