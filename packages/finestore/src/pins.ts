/**
 * @module Pins: the mark half of the garbage-collection protocol.
 *
 * An open transaction keeps `txns/<id>.json` listing every blob hash (and temp
 * upload) it has staged. A hash is added to the record *before* its blob is
 * created or found by dedup, so any blob a collector lists is either already
 * referenced by a manifest or pinned by a record the collector reads after
 * listing. The record is refreshed by a heartbeat (every minute at most); a
 * record whose heartbeat is older than the ttl belongs to a dead process and no
 * longer pins anything. A collector asked to (`expireGoneWriters`) also expires,
 * at once, the records of writers on its own host whose process is gone.
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

/** How often a transaction refreshes its pin record: a quarter of the ttl, at most a minute. */
export const HEARTBEAT_MS = (ttlMs: number): number => Math.max(50, Math.min(60_000, Math.floor(ttlMs / 4)))

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
    // Refresh well within the ttl, and at least every minute so that an operator may expire
    // pins by age (`finestore gc --expire-pins --older-than 10m`) without touching live ones.
    // unref: an idle transaction does not keep the process alive.
    this.#timer = setInterval(() => {
      if (this.#written) this.#write().catch(() => {})
    }, HEARTBEAT_MS(ttlMs))
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
    const next = this.#chain
      .catch(() => {})
      .then(async () => {
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

/** One pin record as gc reports it: whose it is, since when, until when. */
export type PinReport = {
  /** The record, `txns/<id>.json`. */
  readonly path: string
  readonly id: string
  readonly artifact?: string
  readonly host?: string
  readonly pid?: number
  readonly startedAt?: string
  /** The last heartbeat (the file's mtime for a record that cannot be parsed). */
  readonly heartbeatAt: string
  /** When the record expires without a new heartbeat: heartbeat + ttl. */
  readonly expiresAt: string
  /** Whether the writer's process is gone: known only on the writer's own host, else `null`. */
  readonly writerGone: boolean | null
  /** How many blobs and temp uploads it pins. */
  readonly blobs: number
  readonly tmps: number
}

export type ExpiredPin = PinReport & {
  readonly generation: string
  /** Why it no longer pins anything. */
  readonly reason: string
}

export type PinScan = {
  /** Hashes pinned by live transactions. */
  readonly blobs: ReadonlySet<string>
  /** Temp uploads owned by live transactions, and by which. */
  readonly tmps: ReadonlyMap<string, PinReport>
  /** Records of live transactions. */
  readonly held: readonly PinReport[]
  /** Records of dead transactions, with their generations. */
  readonly expired: readonly ExpiredPin[]
  /** Temp uploads named by expired records: their writer is gone, nobody else knows their names. */
  readonly orphanTmps: ReadonlySet<string>
  /** Records that could not be parsed; they are treated as live until they are older than the ttl. */
  readonly unreadable: readonly string[]
}

export type ScanPinsOptions = {
  /** A record whose heartbeat is older than this is dead. */
  readonly ttlMs: number
  /**
   * Also expire the records of writers on this host whose process is gone, whatever their age.
   * (Off by default: a process in another pid namespace that shares the host name, such as a
   * container on the host network, would look gone.) @default false
   */
  readonly expireGoneWriters?: boolean
  readonly now?: number
}

/** Whether process `pid` of this host is gone; `null` for another host. */
export function writerGone(host: string, pid: number): boolean | null {
  if (host !== hostname()) return null
  try {
    process.kill(pid, 0)
    return false
  } catch (err) {
    // EPERM: it exists, under another user.
    return (err as NodeJS.ErrnoException).code === 'ESRCH'
  }
}

/** `20 min`, `45 s`, `3.0 h`: an age for humans. */
export function formatAge(ms: number): string {
  if (ms < 120_000) return `${Math.round(ms / 1000)} s`
  if (ms < 7_200_000) return `${Math.round(ms / 60_000)} min`
  return `${(ms / 3_600_000).toFixed(1)} h`
}

/** Reads every pin record. */
export async function scanPins(storage: Storage, opts: ScanPinsOptions): Promise<PinScan> {
  const now = opts.now ?? Date.now()
  const blobs = new Set<string>()
  const tmps = new Map<string, PinReport>()
  const held: PinReport[] = []
  const expired: ExpiredPin[] = []
  const orphanTmps = new Set<string>()
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
    const gone = rec ? writerGone(rec.host, rec.pid) : null
    const report: PinReport = {
      path: info.path,
      id: rec?.id ?? info.path.slice(TXNS_PREFIX.length).replace(/\.json$/, ''),
      ...(rec
        ? { artifact: rec.artifact, host: rec.host, pid: rec.pid, startedAt: new Date(rec.startedAt).toISOString() }
        : {}),
      heartbeatAt: new Date(beat).toISOString(),
      expiresAt: new Date(beat + opts.ttlMs).toISOString(),
      writerGone: gone,
      blobs: rec?.blobs.length ?? 0,
      tmps: rec?.tmps.length ?? 0,
    }
    const reason =
      now - beat > opts.ttlMs
        ? `no heartbeat for ${formatAge(now - beat)} (ttl ` +
          `${formatAge(opts.ttlMs)})` +
          `${rec ? '' : '; the record is unreadable'}`
        : rec && gone && opts.expireGoneWriters
          ? `writer process ${rec.pid} on ${rec.host} is gone`
          : undefined
    if (reason !== undefined) {
      expired.push({ ...report, generation: info.generation, reason })
      for (const t of rec?.tmps ?? []) orphanTmps.add(t)
      continue
    }
    if (!rec) {
      unreadable.push(info.path)
      continue
    }
    held.push(report)
    for (const b of rec.blobs) blobs.add(b)
    for (const t of rec.tmps) tmps.set(t, report)
  }
  // A temp upload named by a live record too is not an orphan.
  for (const t of tmps.keys()) orphanTmps.delete(t)
  return { blobs, tmps, held, expired, orphanTmps, unreadable }
}
