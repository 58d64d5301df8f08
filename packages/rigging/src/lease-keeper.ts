/**
 * @module The lease keep-alive thread: one worker thread per process (started
 * on first use) that renews leases on its own event loop, so that they stay
 * held while the main thread is blocked. The main thread hands each lease over
 * as `{url, path, owner, ttlMs, record, generation}`; the worker opens the
 * storage from the URL, renews at the generation it last wrote and reports every
 * renewal (so the main thread can `fence` and `release` at the right
 * generation) and any loss. The worker does not keep the process alive, except
 * while the main thread waits on one of its replies.
 */
import { createRequire } from 'node:module'
import { pathToFileURL } from 'node:url'
import { Worker } from 'node:worker_threads'
import { RiggingError, RIGGING_ERROR_CODES, type RiggingErrorCode } from './errors.js'
import type { LeaseRecord } from './lease.js'
import type { OpenStorageOptions } from './storage/open-storage.js'

/** A lease as both threads know it. */
export type HeldState = { readonly record: LeaseRecord; readonly generation: string }

export type HoldRequest = HeldState & {
  readonly url: string
  readonly storageOptions: Pick<OpenStorageOptions, 'private' | 'lock'>
  readonly path: string
  readonly owner: string
  readonly ttlMs: number
  readonly intervalMs: number
}

/** Messages to the worker. */
export type KeeperRequest =
  | ({ readonly op: 'hold'; readonly seq: number; readonly id: number } & HoldRequest)
  | { readonly op: 'fence' | 'drop'; readonly seq: number; readonly id: number }

/** Messages from the worker: a reply to request `seq`, or news of lease `id`. */
export type KeeperEvent =
  | { readonly op: 'ready' }
  | { readonly op: 'reply'; readonly seq: number; readonly state?: HeldState; readonly error?: ErrorData }
  | { readonly op: 'renewed'; readonly id: number; readonly state: HeldState }
  | { readonly op: 'lost'; readonly id: number; readonly error: ErrorData }

export type ErrorData = { readonly code?: string; readonly message: string }

/** A lease the worker is renewing. */
export type OffThreadHold = {
  /** The state after the worker's first renewal. */
  readonly initial: HeldState
  /** Renews now (after any renewal in flight) and returns the new state; LEASE_LOST if it is lost. */
  fence(): Promise<HeldState>
  /** Stops renewing; returns the last state written. */
  drop(): Promise<HeldState>
}

type Events = { renewed(s: HeldState): void; lost(err: RiggingError): void }

export const errorData = (err: unknown): ErrorData => ({
  ...(err instanceof RiggingError ? { code: err.code } : {}),
  message: err instanceof Error ? err.message : String(err),
})

const toError = (e: ErrorData): RiggingError =>
  new RiggingError(
    RIGGING_ERROR_CODES.includes(e.code as RiggingErrorCode) ? (e.code as RiggingErrorCode) : 'STORAGE_IO',
    e.message,
  )

// Run from TypeScript sources (tests, tsx), the worker needs a TypeScript loader too; Node 20
// passes neither `--import` preloads nor loader hooks to workers, so a small bootstrap loads
// the worker module through tsx's tsImport (tsx is a dev dependency of the workspace).
const fromSource = import.meta.url.endsWith('.ts')
const WORKER_URL = new URL(fromSource ? './lease-keeper-worker.ts' : './lease-keeper-worker.js', import.meta.url)

function startWorker(): Worker {
  if (!fromSource) return new Worker(WORKER_URL)
  const tsxApi = createRequire(import.meta.url)
    .resolve('tsx/esm/api')
    .replace(/\.cjs$/, '.mjs')
  const target = JSON.stringify(WORKER_URL.href)
  const bootstrap =
    `import(${JSON.stringify(pathToFileURL(tsxApi).href)}` + `).then((tsx) => tsx.tsImport(${target}, ${target}))`
  return new Worker(bootstrap, { eval: true })
}

class Keeper {
  private readonly worker = startWorker()
  private seq = 0
  private nextId = 0
  private readonly pending = new Map<number, { resolve(s: HeldState | undefined): void; reject(err: Error): void }>()
  private readonly held = new Map<number, Events>()
  dead: Error | undefined
  /** Resolves once the worker has loaded (which takes a while when it loads TypeScript through tsx). */
  readonly ready: Promise<void>
  private onReady: (() => void) | undefined
  private onDead: ((err: Error) => void) | undefined

  constructor() {
    this.ready = new Promise((resolve, reject) => {
      this.onReady = resolve
      this.onDead = reject
    })
    // Waiting for it keeps the process alive, like any reply.
    this.worker.ref()
    this.worker.on('message', (m: KeeperEvent) => {
      if (m.op === 'ready') {
        this.onReady?.()
        this.refIfWaiting()
      } else if (m.op === 'reply') {
        const p = this.pending.get(m.seq)
        this.pending.delete(m.seq)
        this.refIfWaiting()
        if (m.error) p?.reject(toError(m.error))
        else p?.resolve(m.state)
      } else if (m.op === 'renewed') {
        this.held.get(m.id)?.renewed(m.state)
      } else {
        const ev = this.held.get(m.id)
        this.held.delete(m.id)
        ev?.lost(toError(m.error))
      }
    })
    const die = (err: Error) => {
      if (this.dead) return
      this.dead = err
      if (keeper === this) keeper = undefined
      this.onDead?.(err)
      for (const p of this.pending.values()) p.reject(err)
      this.pending.clear()
      const lost = new RiggingError(
        'LEASE_LOST',
        `the lease keep-alive thread stopped (${err.message}); the leases it renewed are no longer renewed`,
        { cause: err },
      )
      for (const ev of this.held.values()) ev.lost(lost)
      this.held.clear()
    }
    this.worker.on('error', die)
    this.worker.on('exit', (code) => die(new Error(`exited with code ${code}`)))
  }

  /** The worker keeps the process alive only while someone waits on its reply. */
  private refIfWaiting(): void {
    if (this.pending.size > 0) this.worker.ref()
    else this.worker.unref()
  }

  private call(req: KeeperRequest): Promise<HeldState | undefined> {
    if (this.dead) return Promise.reject(this.dead)
    return new Promise((resolve, reject) => {
      this.pending.set(req.seq, { resolve, reject })
      this.refIfWaiting()
      this.worker.postMessage(req)
    })
  }

  async hold(req: HoldRequest, events: Events): Promise<OffThreadHold> {
    await this.ready
    const id = this.nextId++
    this.held.set(id, events)
    let initial: HeldState
    try {
      initial = (await this.call({ op: 'hold', seq: this.seq++, id, ...req }))!
    } catch (err) {
      this.held.delete(id)
      throw err
    }
    return {
      initial,
      fence: async () => (await this.call({ op: 'fence', seq: this.seq++, id }))!,
      drop: async () => {
        this.held.delete(id)
        return (await this.call({ op: 'drop', seq: this.seq++, id }))!
      },
    }
  }
}

let keeper: Keeper | undefined

/** Starts this process's keep-alive thread if it is not running; resolves once it has loaded. */
export function keeperReady(): Promise<void> {
  keeper ??= new Keeper()
  return keeper.ready
}

/** Hands a lease to this process's keep-alive thread; resolves after its first renewal there. */
export function holdOffThread(req: HoldRequest, events: Events): Promise<OffThreadHold> {
  keeper ??= new Keeper()
  return keeper.hold(req, events)
}
