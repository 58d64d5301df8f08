/**
 * `file://` storage throughput against plain `fs` as the baseline, on 64 MiB:
 * - write: `Storage.write` (temp file + fsync + rename + directory fsync, under the
 *   object lock) vs `fs.writeFile` (no fsync, not atomic: the cost of the guarantees);
 * - writeStream vs `fs.createWriteStream`, read vs `fs.readFile`, readStream vs `fs.createReadStream`;
 * - compare-and-swap of a 4 KiB object (stat + conditional write) vs `fs.writeFile`.
 */
import { createReadStream, createWriteStream, mkdtempSync } from 'node:fs'
import { readFile, rm, stat, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import type { Writable } from 'node:stream'
import { emit, timeIt } from '../src/bench.js'
import { FileStorage } from '../src/storage/file.js'

const MiB = 1 << 20
const size = 64 * MiB
const mb = size / 1e6
const dir = mkdtempSync(join(tmpdir(), 'rigging-bench-'))
const store = new FileStorage(dir)
const data = new Uint8Array(size).map((_, i) => (i * 2654435761) >>> 24)
const runs = { runs: 5, warmup: 1 }

const chunks = function* () {
  for (let off = 0; off < size; off += MiB) yield Buffer.from(data.buffer, off, MiB)
}
const drain = async (r: Readable) => {
  let n = 0
  for await (const c of r) n += (c as Buffer).byteLength
  if (n !== size) throw new Error(`read ${n} bytes, expected ${size}`)
}
const pump = (w: Writable) => pipeline(Readable.from(chunks()), w)

try {
  const oursW = await timeIt(() => store.write('obj.bin', data), runs)
  const baseW = await timeIt(() => writeFile(join(dir, 'plain.bin'), data), runs)
  emit({ bench: 'rigging', metric: 'file_write_mb_per_s', value: mb / oursW, unit: 'MB/s', baseline: mb / baseW })

  const oursWS = await timeIt(async () => pump(await store.writeStream('obj.bin')), runs)
  const baseWS = await timeIt(() => pump(createWriteStream(join(dir, 'plain.bin'))), runs)
  emit({
    bench: 'rigging',
    metric: 'file_write_stream_mb_per_s',
    value: mb / oursWS,
    unit: 'MB/s',
    baseline: mb / baseWS,
  })

  const oursR = await timeIt(() => store.read('obj.bin'), runs)
  const baseR = await timeIt(() => readFile(join(dir, 'plain.bin')), runs)
  emit({ bench: 'rigging', metric: 'file_read_mb_per_s', value: mb / oursR, unit: 'MB/s', baseline: mb / baseR })

  const oursRS = await timeIt(async () => drain(await store.readStream('obj.bin')), runs)
  const baseRS = await timeIt(() => drain(createReadStream(join(dir, 'plain.bin'))), runs)
  emit({
    bench: 'rigging',
    metric: 'file_read_stream_mb_per_s',
    value: mb / oursRS,
    unit: 'MB/s',
    baseline: mb / baseRS,
  })

  const small = data.subarray(0, 4096)
  const n = 100
  await store.write('head', small)
  const oursC = await timeIt(async () => {
    for (let i = 0; i < n; i++) {
      const st = await store.stat('head')
      await store.write('head', small, { condition: { ifGeneration: st!.generation } })
    }
  }, runs)
  const baseC = await timeIt(async () => {
    for (let i = 0; i < n; i++) {
      await stat(join(dir, 'plain-head'), { bigint: true }).catch(() => undefined)
      await writeFile(join(dir, 'plain-head'), small)
    }
  }, runs)
  emit({ bench: 'rigging', metric: 'file_cas_4k_per_s', value: n / oursC, unit: 'ops/s', baseline: n / baseC })
} finally {
  await rm(dir, { recursive: true, force: true })
}
