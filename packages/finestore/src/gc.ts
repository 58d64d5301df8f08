/**
 * @module Garbage collection of blobs no version references.
 *
 * Safety against commits running at the same time rests on a mark protocol
 * (see `pins.ts` and `gc-state.ts`), not on timing:
 * 1. the collector makes the epoch odd (compare-and-swap, with a lease);
 * 2. it lists blobs and temp uploads, then reads the pins of live transactions,
 *    then every manifest: a blob (or temp) created after step 2 started is not in
 *    its list, and one created before was pinned before it existed, so its pin or
 *    its manifest is seen (a transaction removes its pin only after its manifest
 *    is written);
 * 3. it deletes each unreferenced, unpinned blob by its listed generation;
 * 4. it makes the epoch even again.
 * A transaction that found an existing blob by dedup while a collector was
 * between steps 2 and 3 sees the epoch change, waits, and restores the blob
 * from its own upload before it commits.
 *
 * A grace period applies on top, to what no protocol covers: blobs put outside
 * a transaction (`putBlob`) and temp uploads no pin names are kept until they
 * are older than `graceMs`. Dead transactions' pins expire after `txnTtlMs`
 * (or at once, with `expireGoneWriters`, when the writer's process on this
 * host is gone); the temp uploads they name go with them, whatever their age.
 * The report says what was kept and why: each pin held (whose, since when,
 * until when) and each temp upload kept.
 */
import type { Storage } from '@marin/rigging'
import { FinestoreError } from './errors.js'
import { readGcState, gcRunning } from './gc-state.js'
import { isConditionFailed, isNotFound } from './internal/storage-errors.js'
import { BLOBS_PREFIX, GC_STATE_PATH, TMP_PREFIX, parseBlobPath } from './layout.js'
import { parseManifest } from './manifest.js'
import { formatAge, scanPins } from './pins.js'
import type { ExpiredPin, PinReport } from './pins.js'
import { scanArtifacts } from './scan.js'

export type GcOptions = {
  /** Report what would be removed without removing anything. @default false */
  readonly dryRun?: boolean
  /** Loose blobs and temp uploads younger than this are kept. @default 3_600_000 (1 h) */
  readonly graceMs?: number
  /** A transaction whose heartbeat is older than this is dead and pins nothing. @default 3_600_000 (1 h) */
  readonly txnTtlMs?: number
  /**
   * Expire now the pins of writers on this host whose process is gone (and so free
   * their temp uploads), whatever their heartbeat says. Off by default: a process in
   * another pid namespace sharing the host name would look gone. @default false
   */
  readonly expireGoneWriters?: boolean
  /** How long the collector's hold lasts without renewal (a crashed collector is replaced after it). @default 600_000
   * */
  readonly leaseMs?: number
}

export type GcReport = {
  readonly dryRun: boolean
  readonly blobsScanned: number
  readonly referenced: number
  readonly pinned: number
  /** Unreferenced blobs kept because they are younger than the grace period. */
  readonly young: number
  /** Unreferenced blobs removed (or that would be, in a dry run). */
  readonly deleted: readonly { readonly hash: string; readonly size: number }[]
  readonly bytesDeleted: number
  readonly tmpsDeleted: number
  /** Temp uploads removed (or that would be): their pin expired, or no pin names them and they are past the grace
   * period. */
  readonly tmpsRemoved: readonly { readonly path: string; readonly size: number }[]
  /** Temp uploads kept, and why. */
  readonly tmpsKept: readonly {
    readonly path: string
    readonly size: number
    readonly modifiedAt: string
    readonly reason: string
  }[]
  /** Blob and temp upload bytes removed (or that would be). */
  readonly bytesFreed: number
  readonly txnsExpired: number
  /** Pins of live transactions: they keep their blobs and temp uploads. */
  readonly pinsHeld: readonly PinReport[]
  /** Pins removed (or that would be), and why. */
  readonly pinsExpired: readonly Omit<ExpiredPin, 'generation'>[]
  /** Why blobs were not swept at all, when that happened. */
  readonly skipped?: string
}

export const GC_DEFAULTS = { graceMs: 3_600_000, txnTtlMs: 3_600_000, leaseMs: 600_000 } as const

export async function collectGarbage(storage: Storage, opts: GcOptions = {}): Promise<GcReport> {
  const dryRun = opts.dryRun ?? false
  const graceMs = opts.graceMs ?? GC_DEFAULTS.graceMs
  const txnTtlMs = opts.txnTtlMs ?? GC_DEFAULTS.txnTtlMs
  const leaseMs = opts.leaseMs ?? GC_DEFAULTS.leaseMs
  // A dry run deletes nothing, so it needs no hold and does not make committers re-check.
  const lease = dryRun ? undefined : await acquire(storage, leaseMs)
  try {
    const start = Date.now()
    const blobs: { hash: string; size: number; mtimeMs: number; generation: string }[] = []
    for await (const info of storage.list(BLOBS_PREFIX)) {
      const hash = parseBlobPath(info.path)
      if (hash) blobs.push({ hash, size: info.size, mtimeMs: info.mtimeMs, generation: info.generation })
    }
    // Temp uploads are listed before the pins too: a transaction pins a temp before creating it.
    const tmps: { path: string; size: number; mtimeMs: number; generation: string }[] = []
    for await (const info of storage.list(TMP_PREFIX))
      tmps.push({ path: info.path, size: info.size, mtimeMs: info.mtimeMs, generation: info.generation })
    const pins = await scanPins(storage, { ttlMs: txnTtlMs, expireGoneWriters: opts.expireGoneWriters ?? false })
    const referenced = new Set<string>()
    const scan = await scanArtifacts(storage)
    for (const m of scan.manifests) {
      let text: string
      try {
        text = await storage.readText(m.path)
      } catch (err) {
        if (isNotFound(err)) continue
        throw err
      }
      let manifest
      try {
        manifest = parseManifest(text, m.path)
      } catch (err) {
        throw new FinestoreError(
          'MANIFEST_INVALID',
          `gc stopped before removing anything: it cannot tell which blobs ` +
            `${m.path} references (${(err as Error).message})`,
          false,
          { cause: err },
        )
      }
      for (const f of Object.values(manifest.files)) referenced.add(f.blob)
    }

    let young = 0
    let pinned = 0
    const doomed: typeof blobs = []
    for (const b of blobs) {
      if (referenced.has(b.hash)) continue
      if (pins.blobs.has(b.hash)) pinned++
      else if (start - b.mtimeMs < graceMs) young++
      else doomed.push(b)
    }
    let skipped: string | undefined
    if (pins.unreadable.length > 0) {
      skipped = `pin records ${pins.unreadable.join(', ')} are unreadable and not yet expired; no blob was removed`
      doomed.length = 0
    }

    const deleted: { hash: string; size: number }[] = []
    for (const b of doomed) {
      if (lease) await lease.renew()
      if (!dryRun) {
        try {
          await storage.delete(`${BLOBS_PREFIX}${b.hash.slice(0, 2)}/${b.hash}`, { ifGeneration: b.generation })
        } catch (err) {
          // Rewritten since we listed it: someone put it back, so it is wanted again.
          if (isConditionFailed(err)) continue
          throw err
        }
      }
      deleted.push({ hash: b.hash, size: b.size })
    }

    const tmpsRemoved: { path: string; size: number }[] = []
    const tmpsKept: { path: string; size: number; modifiedAt: string; reason: string }[] = []
    for (const info of tmps) {
      const owner = pins.tmps.get(info.path)
      const keep = (reason: string) =>
        tmpsKept.push({ path: info.path, size: info.size, modifiedAt: new Date(info.mtimeMs).toISOString(), reason })
      if (owner) {
        keep(
          `pinned by transaction ${owner.id} (${owner.artifact}, pid ` +
            `${owner.pid} on ${owner.host}) until ${owner.expiresAt}`,
        )
        continue
      }
      // A temp upload of an expired pin is abandoned: its writer is gone and nobody else knows its name.
      if (!pins.orphanTmps.has(info.path) && start - info.mtimeMs < graceMs) {
        keep(
          `younger than the grace period (${formatAge(graceMs)}): kept ` +
            `until ${new Date(info.mtimeMs + graceMs).toISOString()}`,
        )
        continue
      }
      if (lease) await lease.renew()
      if (!dryRun) {
        try {
          await storage.delete(info.path, { ifGeneration: info.generation })
        } catch (err) {
          if (isConditionFailed(err)) continue
          throw err
        }
      }
      tmpsRemoved.push({ path: info.path, size: info.size })
    }
    if (!dryRun) {
      for (const t of pins.expired)
        await storage.delete(t.path, { ifGeneration: t.generation }).catch((err: unknown) => {
          if (!isConditionFailed(err)) throw err
        })
    }
    const bytesDeleted = deleted.reduce((s, d) => s + d.size, 0)
    return {
      dryRun,
      blobsScanned: blobs.length,
      referenced: blobs.filter((b) => referenced.has(b.hash)).length,
      pinned,
      young,
      deleted,
      bytesDeleted,
      tmpsDeleted: tmpsRemoved.length,
      tmpsRemoved,
      tmpsKept,
      bytesFreed: bytesDeleted + tmpsRemoved.reduce((s, t) => s + t.size, 0),
      txnsExpired: pins.expired.length,
      pinsHeld: pins.held,
      pinsExpired: pins.expired.map(({ generation: _, ...p }) => p),
      ...(skipped ? { skipped } : {}),
    }
  } finally {
    await lease?.release()
  }
}

type Lease = { renew(): Promise<void>; release(): Promise<void> }

async function acquire(storage: Storage, leaseMs: number): Promise<Lease> {
  const { state, generation } = await readGcState(storage)
  if (gcRunning(state)) {
    throw new FinestoreError(
      'GC_RUNNING',
      `another gc (${state.owner ?? 'unknown'}) holds the store until ` +
        `${new Date(state.expiresAt ?? 0).toISOString()}; wait for it to finish`,
      true,
    )
  }
  const owner = `${process.pid}@${Date.now().toString(36)}`
  // Odd = running. A crashed collector left an odd epoch: step over it to the next odd one.
  let epoch = state.epoch % 2 === 0 ? state.epoch + 1 : state.epoch + 2
  let expiresAt = Date.now() + leaseMs
  let gen: string
  try {
    const info = await storage.write(
      GC_STATE_PATH,
      JSON.stringify({ epoch, owner, startedAt: Date.now(), expiresAt }),
      {
        condition: generation ? { ifGeneration: generation } : { ifAbsent: true },
      },
    )
    gen = info.generation
  } catch (err) {
    if (isConditionFailed(err))
      throw new FinestoreError('GC_RUNNING', 'another gc started at the same moment; wait for it to finish', true, {
        cause: err,
      })
    throw err
  }
  const write = async (next: object): Promise<void> => {
    try {
      gen = (await storage.write(GC_STATE_PATH, JSON.stringify(next), { condition: { ifGeneration: gen } })).generation
    } catch (err) {
      if (!isConditionFailed(err)) throw err
      throw new FinestoreError(
        'GC_RUNNING',
        'this gc lost its hold on the store (its lease expired and another gc took over); stopped',
        true,
        { cause: err },
      )
    }
  }
  return {
    async renew() {
      if (Date.now() < expiresAt - leaseMs / 2) return
      expiresAt = Date.now() + leaseMs
      await write({ epoch, owner, expiresAt })
    },
    async release() {
      epoch += 1
      await write({ epoch, owner }).catch(() => {})
    },
  }
}
