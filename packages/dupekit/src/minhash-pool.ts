/**
 * @module MinHash on all cores: a reusable pool of worker threads.
 *
 * Each worker holds its own WebAssembly kernels and a MinHasher with the pool's
 * options, so results are identical to `MinHasher.signatures` on the same input.
 * A call is cut into batches that idle workers take from one queue, so uneven
 * documents still keep every core busy.
 *
 * @example
 * const pool = new MinHashPool({ shingle: 'word' })
 * const sigs = await pool.signatures(texts)   // flat, numPerm per text
 * await pool.close()
 */
import { createRequire } from 'node:module'
import { availableParallelism } from 'node:os'
import { pathToFileURL } from 'node:url'
import { Worker } from 'node:worker_threads'
import { logger } from '@marin/rigging'
import { DupekitError } from './errors.js'
import { resolveMinHashParams, type MinHashOptions, type MinHashParams } from './minhash.js'
import type { WorkerReply, WorkerRequest } from './minhash-worker.js'

export type MinHashPoolOptions = MinHashOptions & {
  /** Worker threads. @default os.availableParallelism() */
  threads?: number
  /** Texts per batch handed to a worker. @default 256 */
  batchSize?: number
}

type Task = { id: number; texts: string[]; done: (sigs: Uint32Array) => void; fail: (err: Error) => void }
type Slot = { worker: Worker; busy: Task | undefined }

// Run from TypeScript sources (tests, tsx), a worker needs a TypeScript loader too;
// Node 20 does not pass `--import` preloads or loader hooks to workers, so a small
// bootstrap loads the worker module through tsx (a dev dependency of the workspace).
const fromSource = import.meta.url.endsWith('.ts')
const WORKER_URL = new URL(fromSource ? './minhash-worker.ts' : './minhash-worker.js', import.meta.url)

function startWorker(workerData: unknown): Worker {
  if (!fromSource) return new Worker(WORKER_URL, { workerData })
  // tsx's tsImport loads a TypeScript module graph without a process-wide loader.
  const tsxApi = createRequire(import.meta.url)
    .resolve('tsx/esm/api')
    .replace(/\.cjs$/, '.mjs')
  const target = JSON.stringify(WORKER_URL.href)
  const bootstrap =
    `import(${JSON.stringify(pathToFileURL(tsxApi).href)}` + `).then((tsx) => tsx.tsImport(${target}, ${target}))`
  return new Worker(bootstrap, { eval: true, workerData })
}

export class MinHashPool {
  readonly params: MinHashParams
  readonly threads: number
  readonly batchSize: number
  private readonly slots: Slot[] = []
  private readonly queue: Task[] = []
  private nextId = 0
  private closed = false

  constructor(options: MinHashPoolOptions = {}) {
    const { threads, batchSize, ...mh } = options
    this.params = resolveMinHashParams(mh)
    this.threads = threads ?? availableParallelism()
    this.batchSize = batchSize ?? 256
    if (!Number.isInteger(this.threads) || this.threads < 1) {
      throw new DupekitError('INVALID_ARGUMENT', `MinHashPool: threads must be a positive integer, got ${this.threads}`)
    }
    if (!Number.isInteger(this.batchSize) || this.batchSize < 1) {
      throw new DupekitError(
        'INVALID_ARGUMENT',
        `MinHashPool: batchSize must be a positive integer, got ${this.batchSize}`,
      )
    }
  }

  private spawn(): Slot {
    const worker = startWorker({ params: this.params })
    const slot: Slot = { worker, busy: undefined }
    worker.on('message', (reply: WorkerReply) => {
      const task = slot.busy
      slot.busy = undefined
      if (task !== undefined && task.id === reply.id) {
        if (reply.signatures) task.done(reply.signatures)
        else task.fail(new DupekitError('POOL_FAILED', `MinHashPool worker failed on a batch: ${reply.error}`))
      }
      this.pump()
    })
    const die = (err: Error) => {
      logger('dupekit').error({ err, threads: this.threads, pending: this.queue.length }, 'minhash pool worker died')
      const task = slot.busy
      slot.busy = undefined
      const i = this.slots.indexOf(slot)
      if (i >= 0) this.slots.splice(i, 1)
      if (task) task.fail(new DupekitError('POOL_FAILED', `MinHashPool worker died: ${err.message}`, { cause: err }))
      if (!this.closed) this.pump()
    }
    worker.on('error', die)
    worker.on('exit', (code) => {
      if (!this.closed) die(new Error(`exited with code ${code}`))
    })
    this.slots.push(slot)
    return slot
  }

  private pump(): void {
    while (this.queue.length > 0) {
      let slot = this.slots.find((s) => s.busy === undefined)
      if (slot === undefined && this.slots.length < this.threads) slot = this.spawn()
      if (slot === undefined) return
      const task = this.queue.shift()!
      slot.busy = task
      slot.worker.postMessage({ id: task.id, texts: task.texts } satisfies WorkerRequest)
    }
  }

  /** Signatures of `texts`, flat: text `i` is `[i*numPerm, (i+1)*numPerm)`. */
  async signatures(texts: readonly string[]): Promise<Uint32Array> {
    if (this.closed)
      throw new DupekitError('POOL_FAILED', 'MinHashPool.signatures: the pool is closed; create a new pool')
    const k = this.params.numPerm
    const out = new Uint32Array(texts.length * k)
    const parts: Promise<void>[] = []
    for (let start = 0; start < texts.length; start += this.batchSize) {
      const batch = texts.slice(start, start + this.batchSize)
      parts.push(
        new Promise<void>((resolve, reject) => {
          this.queue.push({
            id: this.nextId++,
            texts: batch,
            done: (sigs) => {
              out.set(sigs, start * k)
              resolve()
            },
            fail: reject,
          })
        }),
      )
    }
    this.pump()
    await Promise.all(parts)
    return out
  }

  /** Stops the workers; pending calls fail with POOL_FAILED. */
  async close(): Promise<void> {
    this.closed = true
    for (const t of this.queue.splice(0))
      t.fail(new DupekitError('POOL_FAILED', 'MinHashPool closed before the batch ran'))
    const slots = this.slots.splice(0)
    for (const s of slots)
      if (s.busy) s.busy.fail(new DupekitError('POOL_FAILED', 'MinHashPool closed while the batch ran'))
    await Promise.all(slots.map((s) => s.worker.terminate()))
  }
}
