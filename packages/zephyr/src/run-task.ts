/**
 * @module One task: one shard of one stage, start to finish, in whatever
 * process runs it (the driver, or a worker). All inputs and outputs go through
 * storage, so a task can be retried anywhere.
 *
 * Exactly-once: every file a task writes is atomic, shuffle buckets carry the
 * attempt id in their name, and a task's buckets count only once its `done`
 * marker (written last, naming the attempt) exists. A retried task's earlier,
 * partial attempt is invisible to readers even if its functions are not
 * deterministic.
 */
import { randomBytes } from 'node:crypto'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Storage } from '@marin/rigging'
import { emptyTaskCounters } from './counters.js'
import type { TaskCounters } from './counters.js'
import { ZephyrError } from './errors.js'
import { fusePipeline } from './fuse.js'
import type { Batches, ShardInfo } from './fuse.js'
import { Grouper } from './grouper.js'
import { setInputCache } from './internal/cache.js'
import { decodeFrames, FrameEncoder } from './internal/frames.js'
import { locate } from './internal/location.js'
import { openOutput } from './internal/output.js'
import type { Output } from './internal/output.js'
import { canonicalKey, hashKeys, keyFunction, shardOf } from './keys.js'
import { formatPattern } from './output-pattern.js'
import type { StagePlan } from './plan.js'
import { resolveStage } from './resolve-stage.js'
import type { ShardWriter } from './writers/writer.js'

export type TaskEnv = {
  /** URL of this run's scratch folder (shuffle buckets, markers, collected output). */
  readonly scratch: string
  /** Bytes a groupBy/deduplicate task may hold before spilling. */
  readonly memoryBudget: number
  /** Local folder for spill files. @default os.tmpdir() */
  readonly spillRoot?: string
  /** Local folder caching inputs from non-local storage. @default none (read remotely) */
  readonly cacheDir?: string
}

export type TaskResult = { readonly counters: TaskCounters; readonly output?: string }

const BATCH = 1024
const pad = (n: number) => String(n).padStart(5, '0')

/** Scratch paths, relative to the scratch URL. */
export const scratchPaths = {
  bucketDir: (stage: number, to: number) => `s${stage}/to-${pad(to)}/`,
  bucket: (stage: number, to: number, from: number, attempt: string) =>
    `s${stage}/to-${pad(to)}/from-${pad(from)}-${attempt}.bin`,
  done: (stage: number, shard: number) => `s${stage}/done/${pad(shard)}`,
  collected: (stage: number, shard: number) => `s${stage}/out/${pad(shard)}.bin`,
}

async function* chunked(items: readonly unknown[]): Batches {
  for (let i = 0; i < items.length; i += BATCH) yield items.slice(i, i + BATCH)
}

async function* fromIterable(it: Iterable<unknown> | AsyncIterable<unknown>): Batches {
  let b: unknown[] = []
  for await (const r of it) {
    b.push(r)
    if (b.length >= BATCH) {
      yield b
      b = []
    }
  }
  if (b.length) yield b
}

async function* readFrames(
  storage: Storage,
  path: string,
  counters: TaskCounters,
  countRecords = false,
): AsyncGenerator<{ value: unknown; bytes: number }[]> {
  const stream = await storage.readStream(path)
  for await (const frames of decodeFrames(stream)) {
    for (const f of frames) counters.bytesRead += f.bytes
    if (countRecords) counters.recordsIn += frames.length
    yield frames
  }
}

async function* values(frames: AsyncIterable<{ value: unknown }[]>): Batches {
  for await (const fs of frames) yield fs.map((f) => f.value)
}

/** The committed attempt of each shard of a stage, from its `done` markers. */
export async function committedAttempts(
  scratch: Storage,
  base: string,
  stage: number,
  shards: number,
): Promise<string[]> {
  return Promise.all(
    Array.from({ length: shards }, (_, i) =>
      scratch.readText(`${base}${scratchPaths.done(stage, i)}`).then((t) => t.trim()),
    ),
  )
}

/** The bucket files of `shard` written by committed attempts of the previous stage, in source order. */
async function committedBuckets(
  scratch: Storage,
  base: string,
  stage: number,
  shard: number,
  known?: readonly string[],
): Promise<string[]> {
  const dir = `${base}${scratchPaths.bucketDir(stage - 1, shard)}`
  const files: string[] = []
  const attempts = new Map<string, string>()
  if (known) known.forEach((a, i) => attempts.set(String(i).padStart(5, '0'), a))
  else {
    for await (const info of scratch.list(`${base}s${stage - 1}/done/`)) {
      attempts.set(info.path.slice(info.path.lastIndexOf('/') + 1), (await scratch.readText(info.path)).trim())
    }
  }
  for await (const info of scratch.list(dir)) {
    const m = /from-(\d+)-([0-9a-f]+)\.bin$/.exec(info.path)
    if (m && attempts.get(m[1]!) === m[2]) files.push(info.path)
  }
  return files.sort()
}

async function stageInput(stage: StagePlan, shard: number, env: TaskEnv, counters: TaskCounters): Promise<Batches> {
  const input = stage.input
  switch (input.kind) {
    case 'files':
      return chunked([input.urls[shard]!])
    case 'list':
      return chunked(input.shards[shard] ?? [])
    case 'iterable':
      return fromIterable(input.iterable)
    case 'frames': {
      const loc = await locate(input.urls[shard]!)
      return values(readFrames(loc.storage, loc.path, counters))
    }
    case 'shuffle': {
      const scratch = await locate(env.scratch.endsWith('/') ? env.scratch : `${env.scratch}/`)
      const files = await committedBuckets(scratch.storage, scratch.path, stage.index, shard, input.attempts)
      async function* allFrames() {
        for (const f of files) yield* readFrames(scratch.storage, f, counters, true)
      }
      const reduce = input.reduce
      if (reduce.kind === 'concat') return values(allFrames())
      return grouped(allFrames(), reduce, env, counters, { stage: stage.index, shard, total: stage.numShards })
    }
  }
}

async function* grouped(
  frames: AsyncIterable<{ value: unknown; bytes: number }[]>,
  reduce: Extract<StagePlan['input'], { kind: 'shuffle' }>['reduce'] & { kind: 'group' | 'first' },
  env: TaskEnv,
  counters: TaskCounters,
  where: ShardInfo,
): Batches {
  const keyOf = keyFunction(reduce.key)
  const grouper = new Grouper({
    mode: reduce.kind === 'group' ? 'group' : 'first',
    budgetBytes: env.memoryBudget,
    spillDir: join(env.spillRoot ?? tmpdir(), `zephyr-spill-${process.pid}-${randomBytes(6).toString('hex')}`),
    onSpill: (b) => (counters.spilledBytes += b),
  })
  try {
    for await (const fs of frames) {
      const keys = fs.map((f) => canonicalKey(keyOf(f.value)))
      const hashes = hashKeys(keys)
      for (let i = 0; i < fs.length; i++)
        await grouper.add(hashes[i]!, keys[i]!, keyOf(fs[i]!.value), fs[i]!.value, fs[i]!.bytes)
    }
    let out: unknown[] = []
    for await (const g of grouper.groups()) {
      if (reduce.kind === 'first') out.push(g.items[0])
      else {
        try {
          out.push((reduce.reducer as (k: unknown, items: unknown[]) => unknown)(g.keyValue, g.items))
        } catch (err) {
          throw new ZephyrError(
            'USER_FUNCTION_FAILED',
            `stage ${where.stage} shard ${where.shard}: groupBy reducer ` +
              `threw for key ${g.key.slice(1, 80)}: ${(err as Error).message}`,
            false,
            { cause: err },
          )
        }
      }
      if (out.length >= BATCH) {
        yield out
        out = []
      }
    }
    if (out.length) yield out
  } finally {
    await grouper.close()
  }
}

/** Writers load on first use: a worker imports only the format it writes. */
async function openWriter(stage: StagePlan, url: string, counters: TaskCounters): Promise<ShardWriter> {
  const w = (stage.output as Extract<StagePlan['output'], { kind: 'write' }>).writer
  switch (w.format) {
    case 'jsonl':
      return (await import('./writers/jsonl.js')).jsonlWriter(url, counters)
    case 'parquet':
      return (await import('./writers/parquet.js')).parquetWriter(url, w.options, counters)
    case 'arrow':
      return (await import('./writers/arrow.js')).arrowWriter(url, counters)
  }
}

/** The output URL of a final-stage shard (writers only). */
export function outputUrl(stage: StagePlan, shard: number): string | undefined {
  return stage.output.kind === 'write' ? formatPattern(stage.output.writer.pattern, shard, stage.numShards) : undefined
}

/** Runs one shard of one stage. */
export async function runTask(planned: StagePlan, shard: number, env: TaskEnv): Promise<TaskResult> {
  setInputCache(env.cacheDir)
  const stage = await resolveStage(planned)
  const counters = emptyTaskCounters()
  const where: ShardInfo = { stage: stage.index, shard, total: stage.numShards }
  const stream = fusePipeline(
    await stageInput(stage, shard, env, counters),
    stage.ops,
    where,
    counters,
    stage.input.kind === 'shuffle',
  )
  const out = stage.output
  const scratch = await locate(env.scratch.endsWith('/') ? env.scratch : `${env.scratch}/`)

  if (out.kind === 'write') {
    const url = outputUrl(stage, shard)!
    const writer = await openWriter(stage, url, counters)
    try {
      for await (const batch of stream) {
        counters.recordsOut += batch.length
        await writer.write(batch)
      }
      await writer.close()
    } catch (err) {
      await writer.abort(err as Error)
      throw err
    }
    return { counters, output: url }
  }

  if (out.kind === 'collect') {
    const o = await openOutput(`${scratch.url}${scratchPaths.collected(stage.index, shard)}`)
    const enc = new FrameEncoder()
    try {
      for await (const batch of stream) {
        counters.recordsOut += batch.length
        for (const r of batch) {
          const chunk = enc.add(r)
          if (chunk) await o.write(chunk)
        }
      }
      await o.write(enc.take())
      await o.close()
    } catch (err) {
      await o.abort(err as Error)
      throw err
    }
    return { counters }
  }

  // shuffle: route each record to a bucket of the next stage
  const attempt = randomBytes(6).toString('hex')
  const n = out.numShards
  const encoders = new Map<number, { enc: FrameEncoder; file: Output }>()
  const bucket = async (to: number) => {
    let b = encoders.get(to)
    if (!b) {
      b = {
        enc: new FrameEncoder(),
        file: await openOutput(`${scratch.url}${scratchPaths.bucket(stage.index, to, shard, attempt)}`, counters),
      }
      encoders.set(to, b)
    }
    return b
  }
  const route = async (to: number, r: unknown) => {
    const b = await bucket(to)
    const chunk = b.enc.add(r)
    if (chunk) await b.file.write(chunk)
  }
  try {
    let rr = shard
    const keyOf = out.partition.kind === 'hash' ? keyFunction(out.partition.key) : undefined
    for await (const batch of stream) {
      counters.recordsOut += batch.length
      if (!keyOf) {
        for (const r of batch) await route(rr++ % n, r)
        continue
      }
      let keys: string[]
      try {
        keys = batch.map((r) => canonicalKey(keyOf(r)))
      } catch (err) {
        throw new ZephyrError(
          'USER_FUNCTION_FAILED',
          `stage ${stage.index} shard ${shard}: key function threw: ${(err as Error).message}`,
          false,
          { cause: err },
        )
      }
      const hashes = hashKeys(keys)
      for (let i = 0; i < batch.length; i++) await route(shardOf(hashes[i]!, n), batch[i])
    }
    for (const b of encoders.values()) {
      await b.file.write(b.enc.take())
      await b.file.close()
    }
  } catch (err) {
    for (const b of encoders.values()) await b.file.abort(err as Error)
    throw err
  }
  await scratch.storage.write(`${scratch.path}${scratchPaths.done(stage.index, shard)}`, attempt)
  return { counters }
}
