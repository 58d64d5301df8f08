/**
 * @module One pass per stage: consecutive record operations (map, filter,
 * flatMap, select, window, take) are composed into a single push chain that
 * runs over each batch with no intermediate arrays or async hops; only loaders
 * and `mapShard`, which own a stream, sit between chains.
 */
import type { TaskCounters } from './counters.js'
import { ZephyrError } from './errors.js'
import { evaluate } from './expr.js'
import type { AnyFn, RecordOp } from './ops.js'
import type { FnSpec } from './user-fn.js'

export type Batches = AsyncIterable<unknown[]>

export type ShardInfo = { readonly stage: number; readonly shard: number; readonly total: number }

/** Pushes one record downstream; `false` means "stop, I need no more input". */
type Sink = { push(record: unknown): boolean; end(): void }

const BATCH = 1024

function userError(op: string, where: ShardInfo, err: unknown): ZephyrError {
  if (err instanceof ZephyrError) return err
  const msg = err instanceof Error ? err.message : String(err)
  if (err instanceof ReferenceError && process.env.ZEPHYR_WORKER === '1') {
    return new ZephyrError(
      'FUNCTION_NOT_PORTABLE',
      `stage ${where.stage} shard ${where.shard}: ${op} uses a ` +
        `variable the worker does not have (${msg}); functions sent to ` +
        `workers must be self-contained: pass the value as bound args (` +
        `${op}(fn, { args })), export the function and pass ` +
        `fnRef(import.meta.url, 'name'), or run in process (inProcess: true)`,
      false,
      { cause: err },
    )
  }
  return new ZephyrError(
    'USER_FUNCTION_FAILED',
    `stage ${where.stage} shard ${where.shard}: ${op} threw: ${msg}; ` +
      `fix the function or filter out the record first`,
    false,
    { cause: err },
  )
}

/** A resolved user function (`resolve-stage.ts` runs before any task). */
function callable(f: FnSpec): AnyFn {
  if (typeof f !== 'function') throw new Error(`function ${f.module}#${f.name} was not resolved before the task ran`)
  return f
}

function link(op: RecordOp, next: Sink, where: ShardInfo): Sink {
  switch (op.kind) {
    case 'map': {
      const fn = callable(op.fn)
      return {
        push(r) {
          let v
          try {
            v = fn(r)
          } catch (err) {
            throw userError('map', where, err)
          }
          return next.push(v)
        },
        end: () => next.end(),
      }
    }
    case 'filter': {
      const fn = callable(op.fn)
      return {
        push(r) {
          let keep
          try {
            keep = fn(r)
          } catch (err) {
            throw userError('filter', where, err)
          }
          return keep ? next.push(r) : true
        },
        end: () => next.end(),
      }
    }
    case 'filterExpr': {
      const expr = op.expr
      return { push: (r) => (evaluate(expr, r) ? next.push(r) : true), end: () => next.end() }
    }
    case 'flatMap': {
      const fn = callable(op.fn)
      return {
        push(r) {
          let xs: Iterable<unknown>
          try {
            xs = fn(r)
          } catch (err) {
            throw userError('flatMap', where, err)
          }
          for (const x of xs) if (!next.push(x)) return false
          return true
        },
        end: () => next.end(),
      }
    }
    case 'select': {
      const cols = op.columns
      return {
        push(r) {
          const src = r as Record<string, unknown>
          const o: Record<string, unknown> = {}
          for (const c of cols) o[c] = src[c]
          return next.push(o)
        },
        end: () => next.end(),
      }
    }
    case 'take': {
      let left = op.n
      return {
        push(r) {
          if (left <= 0) return false
          left--
          return next.push(r) && left > 0
        },
        end: () => next.end(),
      }
    }
    case 'window': {
      const size = op.size
      let buf: unknown[] = []
      return {
        push(r) {
          buf.push(r)
          if (buf.length < size) return true
          const w = buf
          buf = []
          return next.push(w)
        },
        end() {
          if (buf.length) next.push(buf)
          buf = []
          next.end()
        },
      }
    }
    default:
      throw new Error(`not a record op: ${op.kind}`)
  }
}

/** Runs a chain of record ops over a batch stream. */
async function* runChain(input: Batches, ops: readonly RecordOp[], where: ShardInfo): Batches {
  let out: unknown[] = []
  let sink: Sink = { push: (r) => (out.push(r), true), end: () => {} }
  for (let i = ops.length - 1; i >= 0; i--) sink = link(ops[i]!, sink, where)
  for await (const batch of input) {
    let go = true
    for (let i = 0; i < batch.length && go; i++) go = sink.push(batch[i])
    if (out.length) {
      yield out
      out = []
    }
    if (!go) break
  }
  sink.end()
  if (out.length) yield out
}

async function* load(input: Batches, op: Extract<RecordOp, { kind: 'load' }>, counters: TaskCounters): Batches {
  const { loader } = op
  for await (const batch of input) {
    for (const url of batch) {
      if (typeof url !== 'string')
        throw new ZephyrError(
          'INVALID_PLAN',
          `load${loader.format}: expected file URLs from fromFiles(), got ` +
            `${typeof url}; call the loader right after fromFiles()`,
        )
      // readers load on first use: a worker imports only the formats it reads
      switch (loader.format) {
        case 'jsonl':
          yield* (await import('./readers/jsonl.js')).readJsonl(url, loader.options, counters)
          break
        case 'text':
          yield* (await import('./readers/text.js')).readText(url, loader.options, counters)
          break
        case 'arrow':
          yield* (await import('./readers/arrow.js')).readArrow(url, loader.options, counters)
          break
        case 'wikiXml':
          yield* (await import('./readers/wiki-xml.js')).readWikiXml(url, loader.options, counters)
          break
        case 'warc':
          yield* (await import('./readers/warc.js')).readWarc(url, loader.options, counters)
          break
        case 'parquet': {
          const { ParquetReader } = await import('./parquet-reader.js')
          yield* new ParquetReader({
            path: url,
            columns: loader.options.columns,
            filter: loader.options.filter,
            counters,
          }).batches()
          break
        }
      }
    }
  }
}

async function* records(input: Batches): AsyncGenerator<unknown> {
  for await (const b of input) yield* b
}

async function* mapShard(
  input: Batches,
  fn: (rs: AsyncIterable<unknown>, s: ShardInfo) => Iterable<unknown> | AsyncIterable<unknown>,
  where: ShardInfo,
): Batches {
  let out: unknown[] = []
  try {
    for await (const r of fn(records(input), where)) {
      out.push(r)
      if (out.length >= BATCH) {
        yield out
        out = []
      }
    }
  } catch (err) {
    throw userError('mapShard', where, err)
  }
  if (out.length) yield out
}

async function* count(input: Batches, counters: TaskCounters): Batches {
  for await (const b of input) {
    counters.recordsIn += b.length
    yield b
  }
}

/**
 * The stage's fused pipeline over its input. `recordsIn` is counted after the
 * last loader (records read), or at the input when the stage has no loader
 * (unless the input counted itself, as shuffle reads do).
 */
export function fusePipeline(
  input: Batches,
  ops: readonly RecordOp[],
  where: ShardInfo,
  counters: TaskCounters,
  inputCounted = false,
): Batches {
  let lastLoad = -1
  ops.forEach((op, i) => op.kind === 'load' && (lastLoad = i))
  let stream = lastLoad < 0 && !inputCounted ? count(input, counters) : input
  let chain: RecordOp[] = []
  const flush = () => {
    if (chain.length) stream = runChain(stream, chain, where)
    chain = []
  }
  ops.forEach((op, i) => {
    if (op.kind === 'load') {
      flush()
      stream = load(stream, op, counters)
      if (i === lastLoad) stream = count(stream, counters)
    } else if (op.kind === 'mapShard') {
      flush()
      stream = mapShard(stream, callable(op.fn), where)
    } else chain.push(op)
  })
  flush()
  return stream
}
