import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { afterEach, expect, test } from 'vitest'
import { initBackend } from './backend.js'
import { Dataset } from './data/dataset.js'
import { Gpt2LM } from './models/lm.js'
import { Pipeline } from './pipeline.js'
import { Trainer } from './trainer.js'
import { TensorBoardTracker } from './tensorboard.js'

// The decoding below is written from TensorFlow's record and protobuf specifications and shares
// nothing with the tracker: a bit-by-bit CRC-32C, its own varint and field reader.

/** CRC-32C (Castagnoli), one bit at a time. */
function crc32c(bytes: Uint8Array): number {
  let crc = 0xffffffff
  for (const b of bytes) {
    crc ^= b
    for (let k = 0; k < 8; k++) crc = crc & 1 ? (crc >>> 1) ^ 0x82f63b78 : crc >>> 1
  }
  return (crc ^ 0xffffffff) >>> 0
}

/** TFRecord's masked CRC: rotate right by 15, add a constant. */
const masked = (crc: number) => ((((crc >>> 15) | (crc << 17)) >>> 0) + 0xa282ead8) >>> 0

/** Splits a TFRecord file: u64 length, u32 masked CRC of the length, data, u32 masked CRC of the data. */
function records(buf: Buffer): Buffer[] {
  const out: Buffer[] = []
  let at = 0
  while (at < buf.length) {
    const lenBytes = buf.subarray(at, at + 8)
    expect(buf.readUInt32LE(at + 8)).toBe(masked(crc32c(lenBytes)))
    const len = Number(buf.readBigUInt64LE(at))
    const data = buf.subarray(at + 12, at + 12 + len)
    expect(data.length).toBe(len)
    expect(buf.readUInt32LE(at + 12 + len)).toBe(masked(crc32c(data)))
    out.push(data)
    at += 12 + len + 4
  }
  expect(at).toBe(buf.length)
  return out
}

type Field = { no: number; wire: number; value: bigint | number | Buffer }

/** The fields of one protobuf message (varint, 64-bit, length-delimited and 32-bit wire types). */
function fields(buf: Buffer): Field[] {
  const out: Field[] = []
  let at = 0
  const varint = (): bigint => {
    let v = 0n
    let shift = 0n
    for (;;) {
      const b = buf[at++]!
      v |= BigInt(b & 0x7f) << shift
      if (!(b & 0x80)) return v
      shift += 7n
    }
  }
  while (at < buf.length) {
    const key = Number(varint())
    const no = key >>> 3
    const wire = key & 7
    if (wire === 0) out.push({ no, wire, value: varint() })
    else if (wire === 1) {
      out.push({ no, wire, value: buf.readDoubleLE(at) })
      at += 8
    } else if (wire === 2) {
      const len = Number(varint())
      out.push({ no, wire, value: buf.subarray(at, at + len) })
      at += len
    } else if (wire === 5) {
      out.push({ no, wire, value: buf.readFloatLE(at) })
      at += 4
    } else throw new Error(`wire type ${wire} at byte ${at}`)
  }
  return out
}

/** tensorflow.Event: wall_time = 1 (double), step = 2 (int64), file_version = 3, summary = 5. */
type Event = { wallTime: number; step: number; fileVersion?: string; scalars: Record<string, number> }

function decodeEvent(buf: Buffer): Event {
  const e: Event = { wallTime: Number.NaN, step: 0, scalars: {} }
  for (const f of fields(buf)) {
    if (f.no === 1 && f.wire === 1) e.wallTime = f.value as number
    else if (f.no === 2 && f.wire === 0) e.step = Number(f.value as bigint)
    else if (f.no === 3 && f.wire === 2) e.fileVersion = (f.value as Buffer).toString('utf8')
    else if (f.no === 5 && f.wire === 2) {
      // Summary { repeated Value value = 1 }, Value { string tag = 1; float simple_value = 2 }
      for (const v of fields(f.value as Buffer)) {
        expect(v).toMatchObject({ no: 1, wire: 2 })
        let tag = ''
        let value = Number.NaN
        for (const g of fields(v.value as Buffer)) {
          if (g.no === 1 && g.wire === 2) tag = (g.value as Buffer).toString('utf8')
          else if (g.no === 2 && g.wire === 5) value = g.value as number
          else throw new Error(`unexpected Summary.Value field ${g.no}/${g.wire}`)
        }
        e.scalars[tag] = value
      }
    } else throw new Error(`unexpected Event field ${f.no}/${f.wire}`)
  }
  return e
}

function readEvents(dir: string): { file: string; events: Event[] } {
  const files = fs.readdirSync(dir).filter((f) => f.startsWith('events.out.tfevents.'))
  expect(files).toHaveLength(1)
  return { file: files[0]!, events: records(fs.readFileSync(path.join(dir, files[0]!))).map(decodeEvent) }
}

const dirs: string[] = []
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true })
})
const tmp = () => {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'lev-tb-'))
  dirs.push(d)
  return d
}

test('the CRC-32C of the test is the standard one', () => {
  // The check value of CRC-32C (RFC 3720, B.4) and TFRecord's mask of 0.
  expect(crc32c(Buffer.from('123456789'))).toBe(0xe3069283)
  expect(masked(0)).toBe(0xa282ead8)
})

test('writes a version event, then one event per call with its scalars, framed and checksummed', async () => {
  const dir = tmp()
  const tb = new TensorBoardTracker(path.join(dir, 'tb'))
  const before = Date.now() / 1000
  tb.log(10, { 'train/loss': 3.25, 'train/lr': 1e-3, 'throughput/tokens_per_sec': 12345.5 })
  tb.log(20, { 'eval/loss': 2.5, 'eval/bpb': Number.NaN })
  tb.log(300_000_000_000, { 'train/loss': 0.125 })
  await tb.close()
  const { file, events } = readEvents(path.join(dir, 'tb'))
  expect(file).toMatch(/^events\.out\.tfevents\.\d{10}\.[^/]+$/)
  expect(events[0]).toMatchObject({ step: 0, fileVersion: 'brain.Event:2', scalars: {} })
  expect(events.slice(1).map((e) => [e.step, e.scalars])).toEqual([
    [10, { 'train/loss': 3.25, 'train/lr': Math.fround(1e-3), 'throughput/tokens_per_sec': 12345.5 }],
    // Non-finite values are left out rather than written as NaN.
    [20, { 'eval/loss': 2.5 }],
    [300_000_000_000, { 'train/loss': 0.125 }],
  ])
  for (const e of events) {
    expect(e.wallTime).toBeGreaterThanOrEqual(Math.floor(before) - 1)
    expect(e.wallTime).toBeLessThan(before + 3600)
  }
})

test('two trackers in one folder write two files; a later one does not overwrite', async () => {
  const dir = tmp()
  const a = new TensorBoardTracker(dir)
  a.log(1, { 'train/loss': 1 })
  await a.close()
  const b = new TensorBoardTracker(dir)
  b.log(2, { 'train/loss': 2 })
  await b.close()
  const files = fs.readdirSync(dir).sort()
  expect(files).toHaveLength(2)
  const steps = files.map(
    (f) =>
      records(fs.readFileSync(path.join(dir, f)))
        .map(decodeEvent)
        .at(-1)!.step,
  )
  expect(steps.sort()).toEqual([1, 2])
})

test('a Pipeline with the tracker writes loss, eval loss, learning rate and throughput', async () => {
  const dir = tmp()
  await initBackend()
  const tokens = Array.from({ length: 2000 }, (_, i) => (i * 7) % 10)
  const dataset = Dataset.fromTokens(tokens, { evalFraction: 0.1, numBytes: tokens.length })
  const tb = new TensorBoardTracker(path.join(dir, 'tb'))
  await new Pipeline({
    dataset,
    model: new Gpt2LM({ vocabSize: 11, seqLen: 8, dModel: 16, nLayers: 1, nHeads: 2 }, 0),
    trainer: new Trainer({ batchSize: 2, logEvery: 1, evalEvery: 2, evalBatches: 1, runDir: dir }, { trackers: [tb] }),
    maxSteps: 4,
  }).run()
  const { events } = readEvents(path.join(dir, 'tb'))
  const tags = new Set(events.flatMap((e) => Object.keys(e.scalars)))
  for (const t of ['train/loss', 'eval/loss', 'train/lr', 'throughput/tokens_per_sec']) expect(tags).toContain(t)
  expect(events.filter((e) => 'train/loss' in e.scalars).map((e) => e.step)).toEqual([1, 2, 3, 4])
  expect(events.filter((e) => 'eval/loss' in e.scalars).map((e) => e.step)).toEqual([2, 4])
  for (const e of events) for (const v of Object.values(e.scalars)) expect(Number.isFinite(v)).toBe(true)
}, 120_000)
