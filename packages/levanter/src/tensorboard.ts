/**
 * @module A tracker that writes TensorBoard event files, so a run opens in `tensorboard --logdir`.
 *
 * The format, written here without TensorFlow: a file `events.out.tfevents.<seconds>.<host>` of
 * TFRecords (u64 little-endian length, u32 masked CRC-32C of those 8 bytes, the data, u32 masked
 * CRC-32C of the data), each holding a `tensorflow.Event` protobuf. The first event names the file
 * version (`brain.Event:2`); each `log` call then writes one event with `wall_time`, `step` and a
 * `Summary` of `simple_value` scalars tagged with the metric names (`train/loss`, `eval/loss`,
 * `train/lr`, `throughput/tokens_per_sec`, ...).
 */
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import type { Tracker } from './trackers.js'

const CRC32C_TABLE = (() => {
  const t = new Uint32Array(256)
  for (let i = 0; i < 256; i++) {
    let c = i
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0x82f63b78 : c >>> 1
    t[i] = c >>> 0
  }
  return t
})()

/** CRC-32C (Castagnoli), the checksum TFRecord uses. */
export function crc32c(bytes: Uint8Array): number {
  let c = 0xffffffff
  for (let i = 0; i < bytes.length; i++) c = CRC32C_TABLE[(c ^ bytes[i]!) & 0xff]! ^ (c >>> 8)
  return (c ^ 0xffffffff) >>> 0
}

/** TFRecord's masked CRC: the CRC rotated right by 15 bits plus 0xa282ead8. */
export function maskedCrc32c(bytes: Uint8Array): number {
  const c = crc32c(bytes)
  return ((((c >>> 15) | (c << 17)) >>> 0) + 0xa282ead8) >>> 0
}

/** One TFRecord around `data`. */
export function tfRecord(data: Uint8Array): Buffer {
  const out = Buffer.alloc(12 + data.length + 4)
  out.writeBigUInt64LE(BigInt(data.length), 0)
  out.writeUInt32LE(maskedCrc32c(out.subarray(0, 8)), 8)
  out.set(data, 12)
  out.writeUInt32LE(maskedCrc32c(data), 12 + data.length)
  return out
}

// Protobuf encoding, only the wire types an Event needs.
function varint(n: bigint): number[] {
  const out: number[] = []
  let v = BigInt.asUintN(64, n)
  while (v >= 0x80n) {
    out.push(Number(v & 0x7fn) | 0x80)
    v >>= 7n
  }
  out.push(Number(v))
  return out
}
const key = (field: number, wire: number) => varint(BigInt((field << 3) | wire))
function lengthDelimited(field: number, bytes: Uint8Array): Buffer {
  return Buffer.concat([Buffer.from([...key(field, 2), ...varint(BigInt(bytes.length))]), bytes])
}
function double(field: number, v: number): Buffer {
  const b = Buffer.alloc(8)
  b.writeDoubleLE(v)
  return Buffer.concat([Buffer.from(key(field, 1)), b])
}
function float(field: number, v: number): Buffer {
  const b = Buffer.alloc(4)
  b.writeFloatLE(v)
  return Buffer.concat([Buffer.from(key(field, 5)), b])
}

/** `tensorflow.Event` { wall_time = 1; step = 2; file_version = 3; summary = 5 } as protobuf bytes. */
export function encodeEvent(e: {
  wallTime: number
  step: number
  fileVersion?: string
  scalars?: Readonly<Record<string, number>>
}): Buffer {
  const parts: Buffer[] = [double(1, e.wallTime), Buffer.from([...key(2, 0), ...varint(BigInt(Math.trunc(e.step)))])]
  if (e.fileVersion !== undefined) parts.push(lengthDelimited(3, Buffer.from(e.fileVersion, 'utf8')))
  if (e.scalars) {
    // Summary { repeated Value value = 1 }; Value { string tag = 1; float simple_value = 2 }
    const values = Object.entries(e.scalars).map(([tag, v]) =>
      lengthDelimited(1, Buffer.concat([lengthDelimited(1, Buffer.from(tag, 'utf8')), float(2, v)])),
    )
    parts.push(lengthDelimited(5, Buffer.concat(values)))
  }
  return Buffer.concat(parts)
}

/**
 * Writes every finite metric of each `log` call as a TensorBoard scalar into a new event file in
 * `logdir` (created if needed); events are appended as they come, so a running job can be watched.
 * @example new Trainer(config, { trackers: [new JsonlTracker('run/metrics.jsonl'), new TensorBoardTracker('run/tb')] })
 */
export class TensorBoardTracker implements Tracker {
  /** The event file this tracker writes. */
  readonly file: string
  #fd: number | undefined

  constructor(readonly logdir: string) {
    fs.mkdirSync(logdir, { recursive: true })
    const seconds = Math.floor(Date.now() / 1000)
    const host = os.hostname().replace(/[^A-Za-z0-9._-]/g, '_') || 'localhost'
    // TensorBoard reads every events file of a folder; a suffix keeps two trackers started in one second apart.
    let file = path.join(logdir, `events.out.tfevents.${seconds}.${host}`)
    for (let i = 1; fs.existsSync(file); i++) file = path.join(logdir, `events.out.tfevents.${seconds}.${host}.${i}`)
    this.file = file
    this.#fd = fs.openSync(file, 'wx')
    this.#write({ wallTime: Date.now() / 1000, step: 0, fileVersion: 'brain.Event:2' })
  }

  #write(e: Parameters<typeof encodeEvent>[0]): void {
    if (this.#fd === undefined) throw new Error(`TensorBoardTracker: ${this.file} is closed`)
    fs.writeSync(this.#fd, tfRecord(encodeEvent(e)))
  }

  log(step: number, metrics: Readonly<Record<string, number>>): void {
    const scalars = Object.fromEntries(Object.entries(metrics).filter(([, v]) => Number.isFinite(v)))
    if (Object.keys(scalars).length === 0) return
    this.#write({ wallTime: Date.now() / 1000, step, scalars })
  }

  close(): void {
    if (this.#fd === undefined) return
    fs.closeSync(this.#fd)
    this.#fd = undefined
  }
}
