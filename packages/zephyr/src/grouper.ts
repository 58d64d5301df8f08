/**
 * @module Grouping under a memory budget, spilling to local disk.
 *
 * Records accumulate in a map keyed by canonical key. When the estimated
 * footprint passes the budget, everything in memory is appended to 256
 * partition files chosen by the top 8 bits of the key hash, and the map is
 * cleared. At the end each partition is grouped on its own (recursively with
 * the next 8 bits if it is still too big), so memory stays near the budget
 * whatever the input size. Groups come out ordered by (hash, key) with or
 * without spilling, so the output is the same either way.
 */
import { appendFile, mkdir, readFile, rm } from 'node:fs/promises'
import { join } from 'node:path'
import { ZephyrError } from './errors.js'
import { decodeFrames, FrameEncoder } from './internal/frames.js'

export type GroupMode = 'group' | 'first'

export type Group = {
  readonly hash: bigint
  readonly key: string
  readonly keyValue: unknown
  readonly items: unknown[]
}

type SpillRecord = [hash: bigint, key: string, keyValue: unknown, record: unknown]

export type GrouperOptions = {
  /** `group` keeps every record of a key; `first` keeps only the first. */
  readonly mode: GroupMode
  readonly budgetBytes: number
  /** A local directory for spill files; created on first spill, removed by `close()`. */
  readonly spillDir: string
  /** Called with the bytes of each spill write. */
  readonly onSpill?: (bytes: number) => void
}

const PARTITIONS = 256
/** Rough JS heap cost of a record relative to its serialized size. */
const HEAP_FACTOR = 2
const ENTRY_OVERHEAD = 96

export class Grouper {
  private map = new Map<string, Group>()
  private bytes = 0
  private spilled = false
  private encoders: FrameEncoder[] = []

  constructor(
    private readonly opts: GrouperOptions,
    private readonly level = 0,
  ) {}

  private partitionOf(hash: bigint): number {
    return Number((hash >> BigInt(56 - 8 * this.level)) & 0xffn)
  }

  private file(p: number): string {
    return join(this.opts.spillDir, `l${this.level}-p${p}.bin`)
  }

  async add(hash: bigint, key: string, keyValue: unknown, record: unknown, recordBytes: number): Promise<void> {
    const g = this.map.get(key)
    if (g) {
      if (this.opts.mode === 'first') return
      g.items.push(record)
      this.bytes += recordBytes * HEAP_FACTOR + 8
    } else {
      this.map.set(key, { hash, key, keyValue, items: [record] })
      this.bytes += recordBytes * HEAP_FACTOR + key.length * 2 + ENTRY_OVERHEAD
    }
    if (this.bytes > this.opts.budgetBytes) await this.spill()
  }

  private async spill(): Promise<void> {
    if (!this.spilled) {
      await mkdir(this.opts.spillDir, { recursive: true })
      this.spilled = true
      this.encoders = Array.from({ length: PARTITIONS }, () => new FrameEncoder(1 << 16))
    }
    const write = async (p: number, chunk: Buffer) => {
      if (!chunk.length) return
      await appendFile(this.file(p), chunk)
      this.opts.onSpill?.(chunk.length)
    }
    for (const g of this.map.values()) {
      const p = this.partitionOf(g.hash)
      for (const item of g.items) {
        const full = this.encoders[p]!.add([g.hash, g.key, g.keyValue, item] satisfies SpillRecord)
        if (full) await write(p, full)
      }
    }
    for (let p = 0; p < PARTITIONS; p++) await write(p, this.encoders[p]!.take())
    this.map.clear()
    this.bytes = 0
  }

  private sorted(): Group[] {
    return [...this.map.values()].sort((a, b) =>
      a.hash < b.hash ? -1 : a.hash > b.hash ? 1 : a.key < b.key ? -1 : a.key > b.key ? 1 : 0,
    )
  }

  /** Every group, ordered by (hash, key). Call once. */
  async *groups(): AsyncGenerator<Group> {
    if (!this.spilled) {
      yield* this.sorted()
      this.map.clear()
      return
    }
    await this.spill()
    for (let p = 0; p < PARTITIONS; p++) {
      let data: Buffer
      try {
        data = await readFile(this.file(p))
      } catch {
        continue // nothing spilled to this partition
      }
      await rm(this.file(p), { force: true })
      if (this.level >= 7) {
        throw new ZephyrError(
          'MEMORY_BUDGET_EXCEEDED',
          `one key holds more records than the memory budget (` +
            `${this.opts.budgetBytes} bytes) allows even after spilling; ` +
            `raise memoryBudget or choose a finer key`,
        )
      }
      const sub = new Grouper(this.opts, this.level + 1)
      for await (const frames of decodeFrames([data])) {
        for (const f of frames) {
          const [hash, key, keyValue, record] = f.value as SpillRecord
          await sub.add(hash, key, keyValue, record, f.bytes)
        }
      }
      yield* sub.groups()
    }
  }

  async close(): Promise<void> {
    if (this.spilled && this.level === 0) await rm(this.opts.spillDir, { recursive: true, force: true })
  }
}
