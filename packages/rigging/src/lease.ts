/**
 * @module Leases: a small JSON file `{owner, expiresAt, ...}` that says who may
 * act on something (an executor step, a cache directory) until when.
 *
 * Every change is a conditional write on the storage, so leases work across
 * processes and hosts on any backend with compare-and-swap:
 * - acquire: create the file if absent; or replace it, at the generation just
 *   read, when it has expired (stealing a stale lease);
 * - renew: replace it at the generation we last wrote, extending `expiresAt`;
 * - release: delete it at the current generation, and only if we own it.
 * Two processes racing for one lease both attempt the same conditional write;
 * the storage lets exactly one through.
 *
 * `expiresAt` is wall-clock time (ms since the epoch): hosts sharing a lease
 * need clocks that agree to well within the TTL.
 *
 * Keep-alive renews on a timer of this thread (`keepAlive`), or on a worker
 * thread with its own event loop (`keepAliveOffThread`), so that a main thread
 * blocked for longer than the TTL (a synchronous loop, `Atomics.wait`, a sync
 * call) does not lose its lease unnoticed. A holder about to act on what the
 * lease guards calls `fence()` first: a renewal at the generation it last
 * wrote, which fails with LEASE_LOST if anyone else wrote the lease since.
 */
import { randomBytes } from 'node:crypto'
import { hostname } from 'node:os'
import { RiggingError, isRiggingError } from './errors.js'
import { holdOffThread, keeperReady, type OffThreadHold } from './lease-keeper.js'
import { logger } from './logger.js'
import type { OpenStorageOptions } from './storage/open-storage.js'
import type { Storage } from './storage/types.js'

/** What a lease file holds. */
export type LeaseRecord = {
  readonly owner: string
  /** ms since the epoch; after this anyone may steal the lease. */
  readonly expiresAt: number
  readonly acquiredAt: number
  readonly renewedAt: number
  readonly host: string
  readonly pid: number
}

export type LeaseOptions = {
  /** How long the lease lasts without renewal. */
  readonly ttlMs: number
  /** Who holds it. @default `<host>:<pid>:<random>`, unique per call */
  readonly owner?: string
  /** The clock used for `expiresAt`. @default Date.now */
  readonly now?: () => number
}

export type KeepAliveOptions = {
  /** How often to renew. @default ttlMs / 3 */
  readonly intervalMs?: number
  /** Called once, with a LEASE_LOST error, if the lease is lost (taken over, deleted, or unrenewable until expiry). */
  readonly onLost?: (err: RiggingError) => void
  /** Called after each renewal, on the thread that called `keepAlive`. */
  readonly onRenewed?: (record: LeaseRecord) => void
  /** For `keepAliveOffThread`: how that thread opens `storage.url` (as the caller opened it, e.g. `{ private: true }`).
   * */
  readonly storageOptions?: Pick<OpenStorageOptions, 'private' | 'lock'>
}

/** A lease file as read from storage. */
export type LeaseState = { readonly record: LeaseRecord | undefined; readonly generation: string }

const log = logger('rigging')

/** A unique owner id for this process: `<host>:<pid>:<random>`. */
export function defaultLeaseOwner(): string {
  return `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`
}

function parseRecord(text: string): LeaseRecord | undefined {
  try {
    const r = JSON.parse(text) as Partial<LeaseRecord>
    return typeof r.owner === 'string' && typeof r.expiresAt === 'number' ? (r as LeaseRecord) : undefined
  } catch {
    return undefined
  }
}

/**
 * Reads the lease at `path`: `undefined` when there is none; `record` is
 * `undefined` when the file is not a lease (it is then treated as expired).
 */
export async function readLease(storage: Storage, path: string): Promise<LeaseState | undefined> {
  const st = await storage.stat(path)
  if (!st) return undefined
  let text: string
  try {
    text = await storage.readText(path)
  } catch (err) {
    if (isRiggingError(err, 'STORAGE_NOT_FOUND')) return undefined
    throw err
  }
  // We read after stat: any write in between makes a write at `st.generation` fail, which is safe.
  return { record: parseRecord(text), generation: st.generation }
}

const conditionFailed = (err: unknown) => isRiggingError(err, 'STORAGE_CONDITION_FAILED')

/** A lease this process holds. Get one with `Lease.acquire` or `Lease.tryAcquire`. */
export class Lease {
  private timer: NodeJS.Timeout | undefined
  private offThread: OffThreadHold | undefined
  /** The renewal in flight, if any: renewals never overlap (each is conditional on the one before). */
  private renewing: Promise<void> | undefined
  private readonly lostCtl = new AbortController()
  private onLost: ((err: RiggingError) => void) | undefined

  private constructor(
    readonly storage: Storage,
    readonly path: string,
    readonly owner: string,
    readonly ttlMs: number,
    private readonly now: () => number,
    private state: { record: LeaseRecord; generation: string },
  ) {}

  /**
   * A lease another thread acquired and hands over as `{record, generation}`
   * (what keep-alive threads use). Its first `renew` shows whether it is still held.
   */
  static adopt(
    storage: Storage,
    path: string,
    held: { owner: string; ttlMs: number; record: LeaseRecord; generation: string; now?: () => number },
  ): Lease {
    return new Lease(storage, path, held.owner, held.ttlMs, held.now ?? Date.now, {
      record: held.record,
      generation: held.generation,
    })
  }

  /** The lease as we last wrote it. */
  get record(): LeaseRecord {
    return this.state.record
  }

  /** The generation of the lease file as we last wrote it. */
  get generation(): string {
    return this.state.generation
  }

  get expiresAt(): number {
    return this.state.record.expiresAt
  }

  /** Aborted (with the LEASE_LOST error as reason) when keep-alive or `fence` finds the lease lost. */
  get lost(): AbortSignal {
    return this.lostCtl.signal
  }

  /**
   * Takes the lease at `path`, or throws LEASE_HELD naming its holder and expiry.
   * An expired lease is stolen; a lease already held by the same `owner` is renewed.
   *
   * @example
   * const lease = await Lease.acquire(store, 'step_ab12/.executor_status.lock', { ttlMs: 60_000 })
   * lease.keepAlive({ onLost: (err) => abort(err) })
   * try { await run() } finally { await lease.release() }
   */
  static async acquire(storage: Storage, path: string, opts: LeaseOptions): Promise<Lease> {
    const got = await Lease.attempt(storage, path, opts)
    if (got instanceof Lease) return got
    throw new RiggingError(
      'LEASE_HELD',
      `lease ${path} on ${storage.url} is held by ${got.owner} until ${new Date(got.expiresAt).toISOString()}; ` +
        'wait for it to be released or to expire, or stop the process that holds it',
    )
  }

  /** Like `acquire`, but resolves `undefined` when someone else holds the lease. */
  static async tryAcquire(storage: Storage, path: string, opts: LeaseOptions): Promise<Lease | undefined> {
    const got = await Lease.attempt(storage, path, opts)
    return got instanceof Lease ? got : undefined
  }

  private static async attempt(storage: Storage, path: string, opts: LeaseOptions): Promise<Lease | LeaseRecord> {
    if (!(opts.ttlMs > 0)) {
      throw new RiggingError('LEASE_INVALID', `lease ${path}: ttlMs must be a positive number of ms, got ${opts.ttlMs}`)
    }
    const owner = opts.owner ?? defaultLeaseOwner()
    const now = opts.now ?? Date.now
    for (;;) {
      const cur = await readLease(storage, path)
      const t = now()
      if (cur?.record && cur.record.owner !== owner && cur.record.expiresAt > t) return cur.record
      const record: LeaseRecord = {
        owner,
        expiresAt: t + opts.ttlMs,
        acquiredAt: cur?.record?.owner === owner ? cur.record.acquiredAt : t,
        renewedAt: t,
        host: hostname(),
        pid: process.pid,
      }
      try {
        const info = await storage.write(path, JSON.stringify(record), {
          condition: cur ? { ifGeneration: cur.generation } : { ifAbsent: true },
        })
        if (cur?.record && cur.record.owner !== owner) {
          log.info(
            { path, owner, previousOwner: cur.record.owner, expiredAt: cur.record.expiresAt },
            'stole expired lease',
          )
        }
        return new Lease(storage, path, owner, opts.ttlMs, now, { record, generation: info.generation })
      } catch (err) {
        // Someone else wrote the lease between our read and our write: look again.
        if (!conditionFailed(err)) throw err
      }
    }
  }

  private lostError(why: string): RiggingError {
    return new RiggingError(
      'LEASE_LOST',
      `lease ${this.path} on ${this.storage.url} was lost by ${this.owner}: ${why}; stop the work it guarded`,
    )
  }

  /**
   * Extends the lease by `ttlMs` from now, by a write conditional on the
   * generation we last wrote (after any renewal in flight).
   * @throws RiggingError('LEASE_LOST') if someone else took it over or deleted it.
   */
  async renew(): Promise<void> {
    while (this.renewing) await this.renewing.catch(() => {})
    const p = this.renewOnce()
    this.renewing = p
    try {
      await p
    } finally {
      if (this.renewing === p) this.renewing = undefined
    }
  }

  private async renewOnce(): Promise<void> {
    const t = this.now()
    const record: LeaseRecord = { ...this.state.record, expiresAt: t + this.ttlMs, renewedAt: t }
    try {
      const info = await this.storage.write(this.path, JSON.stringify(record), {
        condition: { ifGeneration: this.state.generation },
      })
      this.state = { record, generation: info.generation }
    } catch (err) {
      if (!conditionFailed(err)) throw err
      const cur = await readLease(this.storage, this.path)
      throw this.lostError(
        cur?.record ? `it is now held by ${cur.record.owner}` : 'the lease file was removed or replaced',
      )
    }
  }

  /** Marks the lease lost once: stops keep-alive, aborts `lost`, calls `onLost`. */
  private lose(err: RiggingError): void {
    this.stopTimer()
    const hold = this.offThread
    this.offThread = undefined
    void hold?.drop().catch(() => {})
    if (this.lostCtl.signal.aborted) return
    log.warn({ err, path: this.path, owner: this.owner }, 'lease lost')
    this.lostCtl.abort(err)
    this.onLost?.(err)
  }

  /**
   * Renews every `intervalMs` on a timer of this thread (the timer does not
   * keep the process alive). On loss, stops, aborts `lost` and calls `onLost`.
   * Storage errors are retried until the lease would have expired. A thread
   * that blocks for longer than the TTL stops renewing: use `keepAliveOffThread` then.
   */
  keepAlive(opts: KeepAliveOptions = {}): this {
    this.stopTimer()
    this.onLost = opts.onLost
    const every = opts.intervalMs ?? Math.max(1, Math.floor(this.ttlMs / 3))
    this.timer = setInterval(() => {
      if (this.renewing) return
      this.renew()
        .then(() => opts.onRenewed?.(this.state.record))
        .catch((err: unknown) => {
          if (isRiggingError(err, 'LEASE_LOST')) return this.lose(err)
          if (this.now() >= this.expiresAt)
            return this.lose(this.lostError(`renewal kept failing until it expired (${(err as Error).message})`))
          log.warn({ err, path: this.path }, 'lease renewal failed; retrying')
        })
    }, every)
    this.timer.unref()
    return this
  }

  /**
   * Like `keepAlive`, but renews from a worker thread with its own event loop
   * (one per process, shared by its leases), which opens `storage.url` again:
   * renewals go on while this thread is blocked. Resolves once that thread has
   * renewed the lease, so renewal demonstrably works before the guarded work
   * starts. `onLost` and `onRenewed` run on this thread, when it is free.
   * A `memory://` storage lives in one thread and is renewed here (no other
   * process can contend for it). That thread opens the URL with `storageOptions`
   * and the environment: object-store clients configured in code (credentials,
   * an endpoint) are not carried over.
   */
  async keepAliveOffThread(opts: KeepAliveOptions = {}): Promise<this> {
    await this.stopKeepAlive()
    // Renewed here until the thread has loaded (it may take longer than a short TTL).
    this.keepAlive(opts)
    if (this.storage.url.startsWith('memory://')) return this
    await keeperReady()
    await this.stopKeepAlive()
    if (this.lostCtl.signal.aborted) throw this.lostCtl.signal.reason
    const hold = await holdOffThread(
      {
        url: this.storage.url,
        storageOptions: opts.storageOptions ?? {},
        path: this.path,
        owner: this.owner,
        ttlMs: this.ttlMs,
        intervalMs: opts.intervalMs ?? Math.max(1, Math.floor(this.ttlMs / 3)),
        ...this.state,
      },
      {
        renewed: (s) => {
          if (this.offThread !== hold) return
          this.state = s
          opts.onRenewed?.(s.record)
        },
        lost: (err) => {
          if (this.offThread === hold) this.lose(err)
        },
      },
    ).catch((err: unknown) => {
      if (isRiggingError(err, 'LEASE_LOST')) {
        this.lose(err)
      }
      throw err
    })
    this.offThread = hold
    this.state = hold.initial
    return this
  }

  /**
   * Proves this process still holds the lease, right before acting on what it
   * guards (publishing an output, writing a final status): throws the LEASE_LOST
   * error if keep-alive already found the lease lost, else renews it at the
   * generation we last wrote (on the keep-alive thread, if it is elsewhere),
   * which fails with LEASE_LOST if anyone else wrote the lease since. Keep-alive
   * goes on afterwards; the lease then has a full TTL ahead.
   */
  async fence(): Promise<void> {
    if (this.lostCtl.signal.aborted) throw this.lostCtl.signal.reason
    try {
      if (this.offThread) this.state = await this.offThread.fence()
      else await this.renew()
    } catch (err) {
      if (isRiggingError(err, 'LEASE_LOST')) this.lose(err)
      throw err
    }
  }

  private stopTimer(): void {
    if (this.timer) clearInterval(this.timer)
    this.timer = undefined
  }

  /** Stops renewing; resolves once no renewal is in flight (here or on the keep-alive thread). */
  async stopKeepAlive(): Promise<void> {
    this.stopTimer()
    const hold = this.offThread
    this.offThread = undefined
    if (hold) {
      const s = await hold.drop().catch(() => undefined)
      if (s) this.state = s
    }
    await this.renewing?.catch(() => {})
  }

  /**
   * Gives the lease up (deletes the file). Releasing a lease that is gone is a no-op.
   * @throws RiggingError('LEASE_NOT_OWNER') if someone else holds it now.
   */
  async release(): Promise<void> {
    await this.stopKeepAlive()
    await releaseLease(this.storage, this.path, this.owner)
  }
}

/**
 * Deletes the lease at `path` on behalf of `owner`. A missing lease is a no-op.
 * @throws RiggingError('LEASE_NOT_OWNER') when the lease belongs to someone else.
 */
export async function releaseLease(storage: Storage, path: string, owner: string): Promise<void> {
  for (;;) {
    const cur = await readLease(storage, path)
    if (!cur) return
    if (cur.record?.owner !== owner) {
      throw new RiggingError(
        'LEASE_NOT_OWNER',
        `lease ${path} on ${storage.url} is held by ` +
          `${cur.record?.owner ?? '(unreadable lease file)'}, not ${owner}` +
          `; only its owner may release it`,
      )
    }
    try {
      await storage.delete(path, { ifGeneration: cur.generation })
      return
    } catch (err) {
      if (!conditionFailed(err)) throw err
    }
  }
}
