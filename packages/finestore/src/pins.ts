/**
 * @module Pins: the mark half of the garbage-collection protocol.
 *
 * An open transaction keeps `txns/<id>.json` listing every blob hash (and temp
 * upload) it has staged. A hash is added to the record *before* its blob is
 * created or found by dedup, so any blob a collector lists is either already
 * referenced by a manifest or pinned by a record the collector reads after
 * listing. The record is refreshed by a heartbeat; a record whose heartbeat is
 * older than the ttl belongs to a dead process and no longer pins anything.
 */
import { hostname } from 'node:os'
import type { Storage } from '@marin/rigging'
import { z } from 'zod'
import { TXNS_PREFIX, pinPath } from './layout.js'

export const PinRecord = z.object({
  id: z.string(),
  artifact: z.string(),
  host: z.string(),
  pid: z.number(),
  startedAt: z.number(),
  heartbeatAt: z.number(),
  blobs: z.array(z.string()),
  tmps: z.array(z.string()),
})
export type PinRecord = z.output<typeof PinRecord>

/** The pins of one transaction. Writes are serialized; `add` resolves once the pin is durable. */
export class PinSet {
  readonly #blobs = new Set<string>()
  readonly #tmps = new Set<string>()
  readonly #startedAt = Date.now()
  #chain: Promise<unknown> = Promise.resolve()
  #timer: NodeJS.Timeout | undefined
  #written = false
  #released = false

  constructor(
    private readonly storage: Storage,
    readonly id: string,
    private readonly artifact: string,
    ttlMs: number,
  ) {
    // Refresh well within the ttl; unref so that an idle transaction does not keep the process alive.
    this.#timer = setInterval(() => {
      if (this.#written) this.#write().catch(() => {})
    }, Math.max(50, Math.floor(ttlMs / 4)))
    this.#timer.unref()
  }

  /** Pins `hash` (and the temp upload kept for it) before the blob is created or reused. */
  async add(hash: string, tmp?: string): Promise<void> {
    if (this.#blobs.has(hash) && (tmp === undefined || this.#tmps.has(tmp))) return
    this.#blobs.add(hash)
    if (tmp !== undefined) this.#tmps.add(tmp)
    await this.#write()
  }

  /** Pins a temp upload before it is created (its hash is not known yet), so that gc leaves it alone. */
  async addTmp(tmp: string): Promise<void> {
    this.#tmps.add(tmp)
    await this.#write()
  }

  get blobs(): ReadonlySet<string> {
    return this.#blobs
  }

  /** Stops the heartbeat and removes the record. */
  async release(): Promise<void> {
    this.#released = true
    if (this.#timer) clearInterval(this.#timer)
    this.#timer = undefined
    await this.#chain.catch(() => {})
    if (this.#written) await this.storage.delete(pinPath(this.id))
  }

  #write(): Promise<void> {
    const next = this.#chain.catch(() => {}).then(async () => {
      if (this.#released) return
      const record: PinRecord = {
        id: this.id,
        artifact: this.artifact,
        host: hostname(),
        pid: process.pid,
        startedAt: this.#startedAt,
        heartbeatAt: Date.now(),
        blobs: [...this.#blobs],
        tmps: [...this.#tmps],
      }
      await this.storage.write(pinPath(this.id), JSON.stringify(record))
      this.#written = true
    })
    this.#chain = next
    return next
  }
}

export type PinScan = {
  /** Hashes pinned by live transactions. */
  readonly blobs: ReadonlySet<string>
  /** Temp uploads owned by live transactions. */
  readonly tmps: ReadonlySet<string>
  /** Records of dead transactions (heartbeat older than the ttl), with their generations. */
  readonly expired: readonly { path: string; generation: string }[]
  /** Records that could not be parsed; they are treated as live until they are older than the ttl. */
  readonly unreadable: readonly string[]
}

/** Reads every pin record. */
export async function scanPins(storage: Storage, ttlMs: number, now = Date.now()): Promise<PinScan> {
  const blobs = new Set<string>()
  const tmps = new Set<string>()
  const expired: { path: string; generation: string }[] = []
  const unreadable: string[] = []
  for await (const info of storage.list(TXNS_PREFIX)) {
    let rec: PinRecord | undefined
    try {
      rec = PinRecord.parse(JSON.parse(await storage.readText(info.path)))
    } catch (err) {
      // Deleted between list and read: the transaction just finished.
      if ((err as { code?: unknown }).code === 'STORAGE_NOT_FOUND') continue
      rec = undefined
    }
    const beat = rec?.heartbeatAt ?? info.mtimeMs
    if (now - beat > ttlMs) {
      expired.push({ path: info.path, generation: info.generation })
      continue
    }
    if (!rec) {
      unreadable.push(info.path)
      continue
    }
    for (const b of rec.blobs) blobs.add(b)
    for (const t of rec.tmps) tmps.add(t)
  }
  return { blobs, tmps, expired, unreadable }
}
