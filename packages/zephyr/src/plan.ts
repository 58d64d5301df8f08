/**
 * @module From a Dataset to stages. A stage is one fused pass per shard,
 * between boundaries (reshard, groupBy, deduplicate). Planning also pushes
 * expression filters and `select` into a preceding `loadParquet`, where they
 * become row-group skipping and column projection.
 */
import { ZephyrError } from './errors.js'
import type { Expr } from './expr.js'
import { globPrefix, globToRegExp, hasGlob } from './internal/glob.js'
import { joinUrl, splitUrl, storageAt } from './internal/location.js'
import type { KeySpec } from './keys.js'
import { isBoundary, opLabel } from './ops.js'
import type { FnSpec } from './user-fn.js'
import type { BoundaryOp, Op, RecordOp, Source, WriterSpec } from './ops.js'

export type StageInput =
  | { readonly kind: 'files'; readonly urls: readonly string[] }
  | { readonly kind: 'list'; readonly shards: readonly (readonly unknown[])[] }
  | { readonly kind: 'iterable'; readonly iterable: Iterable<unknown> | AsyncIterable<unknown> }
  /** One file of v8 frames per shard in scratch storage (an iterable materialized for workers). */
  | { readonly kind: 'frames'; readonly urls: readonly string[] }
  /** Records shuffled by the previous stage, combined on the way in. */
  | {
      readonly kind: 'shuffle'
      readonly reduce: ShuffleReduce
      /** The committed attempt of each map shard, filled in by the executor when the stage starts. */
      readonly attempts?: readonly string[]
    }

export type ShuffleReduce =
  | { readonly kind: 'concat' }
  | { readonly kind: 'group'; readonly key: KeySpec; readonly reducer: FnSpec; readonly args?: unknown }
  | { readonly kind: 'first'; readonly key: KeySpec }

export type StageOutput =
  | {
      readonly kind: 'shuffle'
      readonly numShards: number
      readonly partition: { readonly kind: 'roundRobin' } | { readonly kind: 'hash'; readonly key: KeySpec }
    }
  | { readonly kind: 'write'; readonly writer: WriterSpec }
  | { readonly kind: 'collect' }

export type StagePlan = {
  readonly index: number
  readonly name: string
  readonly input: StageInput
  readonly ops: readonly RecordOp[]
  readonly output: StageOutput
  /** Tasks (shards) in this stage. */
  readonly numShards: number
}

/** Every object path under the glob's folder that matches it, sorted. */
export async function expandGlob(pattern: string): Promise<string[]> {
  const { root, path } = splitUrl(pattern)
  const storage = await storageAt(root)
  if (!hasGlob(path)) {
    if (!(await storage.exists(path)))
      throw new ZephyrError('INPUT_NOT_FOUND', `fromFiles: ${pattern} does not exist; check the path`)
    return [joinUrl(root, path)]
  }
  const prefix = globPrefix(path)
  const re = globToRegExp(path)
  const found: string[] = []
  for await (const info of storage.list(prefix)) if (re.test(info.path)) found.push(info.path)
  if (found.length === 0)
    throw new ZephyrError(
      'INPUT_NOT_FOUND',
      `fromFiles: no files match ${pattern}; check the glob and that the files exist`,
    )
  return found.sort().map((p) => joinUrl(root, p))
}

/** Moves `filterExpr` and `select` right after a `loadParquet` into the loader. */
export function pushDown(ops: readonly RecordOp[]): RecordOp[] {
  const out: RecordOp[] = []
  for (const op of ops) {
    const prev = out[out.length - 1]
    if (prev?.kind === 'load' && prev.loader.format === 'parquet') {
      const o = prev.loader.options
      if (op.kind === 'filterExpr') {
        const filter: Expr = o.filter ? { op: 'and', args: [o.filter, op.expr] } : op.expr
        out[out.length - 1] = { kind: 'load', loader: { format: 'parquet', options: { ...o, filter } } }
        continue
      }
      if (op.kind === 'select' && (!o.columns || op.columns.every((c) => o.columns!.includes(c)))) {
        out[out.length - 1] = { kind: 'load', loader: { format: 'parquet', options: { ...o, columns: op.columns } } }
        continue
      }
    }
    out.push(op)
  }
  return out
}

function splitList(items: readonly unknown[], n: number): unknown[][] {
  const shards: unknown[][] = []
  const size = Math.ceil(items.length / n)
  for (let i = 0; i < n; i++) shards.push(items.slice(i * size, (i + 1) * size))
  return shards
}

/** Plans the stages of a pipeline; globs are expanded now, so the shard counts are final. */
export async function planStages(source: Source, ops: readonly Op[]): Promise<StagePlan[]> {
  let input: StageInput
  let shards: number
  let sourceLabel: string
  switch (source.kind) {
    case 'files': {
      const urls = await expandGlob(source.pattern)
      input = { kind: 'files', urls }
      shards = urls.length
      sourceLabel = 'fromFiles'
      break
    }
    case 'list':
      input = { kind: 'list', shards: splitList(source.items, source.numShards) }
      shards = source.numShards
      sourceLabel = 'fromList'
      break
    case 'iterable':
      input = { kind: 'iterable', iterable: source.iterable }
      shards = 1
      sourceLabel = 'fromIterable'
      break
  }
  const stages: StagePlan[] = []
  let pending: RecordOp[] = []
  let labels = [sourceLabel]
  const close = (output: StageOutput, label: string) => {
    const stageOps = pushDown(pending)
    stages.push({
      index: stages.length,
      name: [...labels, label].filter(Boolean).join(' → '),
      input,
      ops: stageOps,
      output,
      numShards: shards,
    })
    pending = []
  }
  for (const op of ops) {
    if (isBoundary(op)) {
      const b = op as BoundaryOp
      const next = b.kind === 'reshard' ? b.numShards : (b.numShards ?? shards)
      const partition =
        b.kind === 'reshard' ? ({ kind: 'roundRobin' } as const) : ({ kind: 'hash', key: b.key } as const)
      close({ kind: 'shuffle', numShards: next, partition }, `${b.kind}(${next})`)
      input = {
        kind: 'shuffle',
        reduce:
          b.kind === 'reshard'
            ? { kind: 'concat' }
            : b.kind === 'groupBy'
              ? { kind: 'group', key: b.key, reducer: b.reducer, args: b.args }
              : { kind: 'first', key: b.key },
      }
      shards = next
      labels = [b.kind === 'reshard' ? 'read' : b.kind === 'groupBy' ? 'reduce' : 'dedup']
    } else if (op.kind === 'write') {
      close({ kind: 'write', writer: op.writer }, opLabel(op))
      return stages
    } else {
      pending.push(op)
      labels.push(opLabel(op))
    }
  }
  close({ kind: 'collect' }, 'collect')
  return stages
}
