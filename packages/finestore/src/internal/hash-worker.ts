/**
 * @module sha256 on a worker thread, so that hashing a large stream runs on
 * another core while this thread moves the bytes (the copy itself runs in the
 * libuv pool). One shared worker serves every stream of the process; it keeps
 * the process alive only while some stream waits for it.
 */
import { Worker } from 'node:worker_threads'

// Plain CommonJS so that it runs with `eval: true`, independent of how this file is loaded.
const WORKER_SOURCE = `
const { parentPort } = require('node:worker_threads')
const { createHash } = require('node:crypto')
const hashes = new Map()
parentPort.on('message', (m) => {
  if (m.chunk) {
    let h = hashes.get(m.id)
    if (!h) hashes.set(m.id, (h = createHash('sha256')))
    h.update(m.chunk)
    parentPort.postMessage({ id: m.id, ack: m.chunk.byteLength })
  } else if (m.end) {
    const h = hashes.get(m.id) ?? createHash('sha256')
    hashes.delete(m.id)
    parentPort.postMessage({ id: m.id, digest: h.digest('hex') })
  }
})
`

type Reply = { id: number; ack?: number; digest?: string }
type Listener = { onAck: (bytes: number) => void; onDigest: (hex: string) => void; onError: (err: Error) => void }

let worker: Worker | undefined
let nextId = 1
const listeners = new Map<number, Listener>()

function getWorker(): Worker {
  if (worker) return worker
  const w = new Worker(WORKER_SOURCE, { eval: true })
  w.on('message', (m: Reply) => {
    const l = listeners.get(m.id)
    if (!l) return
    if (m.ack !== undefined) l.onAck(m.ack)
    if (m.digest !== undefined) {
      forget(m.id)
      l.onDigest(m.digest)
    }
  })
  w.on('error', (err) => {
    for (const l of listeners.values()) l.onError(err)
    listeners.clear()
    worker = undefined
  })
  // Unref after the listeners are attached (attaching one refs the worker again).
  w.unref()
  worker = w
  return w
}

function listen(id: number, l: Listener): void {
  if (listeners.size === 0) worker?.ref()
  listeners.set(id, l)
}

function forget(id: number): void {
  if (listeners.delete(id) && listeners.size === 0) worker?.unref()
}

/** One stream's hash on the worker. `update` copies the chunk; `pending` counts bytes not yet hashed. */
export class WorkerHash {
  readonly #id = nextId++
  readonly #worker = getWorker()
  #pending = 0
  #waiters: (() => void)[] = []
  #digest: Promise<string>
  #failed: Error | undefined

  constructor() {
    let resolve!: (hex: string) => void
    let reject!: (err: Error) => void
    this.#digest = new Promise<string>((res, rej) => {
      resolve = res
      reject = rej
    })
    this.#digest.catch(() => {})
    listen(this.#id, {
      onAck: (bytes) => {
        this.#pending -= bytes
        for (const w of this.#waiters.splice(0)) w()
      },
      onDigest: resolve,
      onError: (err) => {
        this.#failed = err
        reject(err)
        for (const w of this.#waiters.splice(0)) w()
      },
    })
  }

  get pending(): number {
    return this.#pending
  }

  update(chunk: Uint8Array): void {
    if (this.#failed) throw this.#failed
    this.#pending += chunk.byteLength
    // A compact copy, transferred: cloning a view would copy its whole backing buffer
    // (for a slice of a large buffer, far more than the chunk), and the caller may reuse its own.
    const copy = Uint8Array.prototype.slice.call(chunk)
    this.#worker.postMessage({ id: this.#id, chunk: copy }, [copy.buffer])
  }

  /** Resolves once at most `limit` bytes are waiting to be hashed. */
  async drain(limit: number): Promise<void> {
    while (this.#pending > limit && !this.#failed) await new Promise<void>((r) => this.#waiters.push(r))
    if (this.#failed) throw this.#failed
  }

  digest(): Promise<string> {
    this.#worker.postMessage({ id: this.#id, end: true })
    return this.#digest
  }

  /** Forgets the stream (after an error), so the worker drops its state. */
  discard(): void {
    this.#worker.postMessage({ id: this.#id, end: true })
    forget(this.#id)
  }
}
