import { execFile } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { Readable } from 'node:stream'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { createHash } from 'node:crypto'
import { compress as zstdCompress, init as zstdInit } from '@bokuweb/zstd-wasm'
import bz2 from 'unbzip2-stream'
import { describe, expect, test } from 'vitest'
import { decompress } from './compression.js'
import { tempDir } from './fixtures/tmp.js'
import { manyPagesDump } from './fixtures/wiki-dump.js'
import { Bzip2Decoder } from './internal/bzip2.js'
import { PullStream } from './internal/pull-stream.js'
import type { PullDecoder } from './internal/pull-stream.js'
import { ZstdPullDecoder } from './internal/zstd-pull.js'

// zstd-wasm must be set up once per process: a second init() leaves compress() returning zeros
const zstdReady = zstdInit()
const fixture = (name: string) => fileURLToPath(new URL(`./fixtures/${name}`, import.meta.url))
const readFirst = fixture('read-first.ts')

/** One bzip2 stream of 4600 lines of 10 KB (46 MB; `bz2.compress(line * 4600, 9)` in Python): 241 bytes. */
const BZ2_SEED = Buffer.from(
  'QlpoOTFBWSZTWeuyTjUFmSZZgIAQUAQoECYgBEoACDAA+AKYACaFMABNBNVIhptJmp4kgcRIHuJAxEgfokDMSB8iQPIkDESBlJAzEgbRIHUSB1' +
    'RIGJVQLUiikVtEgbQooKPIkDmJA3iQNRIGIkDUSBzpJA3SQOJFFIr+YoKyTKayaVEGXAAVVbMBACCgCFAgTEAIlAAQYAGwCmAAmhTAATQKVIjQ' +
    '9I8pqhD0hDyhDCEPqEMoQ6QhpCGEIZQh7yhDlCHaEOyEMKKLapFE4QhwkKKrSEMoQ5QhtCGEIbQh8QhxQh0qRRP4u5IpwoSHHmD6KA==',
  'base64',
)

/** Decodes `bytes` as `codec` the way readers do, into one buffer. */
async function decode(bytes: Buffer, codec: 'zstd' | 'bzip2', chunk = 1 << 20): Promise<Buffer> {
  const parts: Buffer[] = []
  for (let i = 0; i < bytes.length; i += chunk) parts.push(bytes.subarray(i, i + chunk))
  const out: Buffer[] = []
  for await (const c of decompress(Readable.from(parts), codec, `mem.${codec}`)) out.push(c as Buffer)
  return Buffer.concat(out)
}

/** A 1 MiB JSONL frame repeated: `frames` MiB of records from a few hundred KB. */
async function zstdBomb(frames: number): Promise<Buffer> {
  await zstdReady
  const line = '{"id": 1, "text": "hello world, this is a record of a zstd bomb"}\n'
  const frame = Buffer.from(zstdCompress(Buffer.from(line.repeat(Math.floor(2 ** 20 / line.length))), 3))
  return Buffer.concat(Array(frames).fill(frame))
}

function sha256(b: Buffer): string {
  return createHash('sha256').update(b).digest('hex')
}

describe('decompression bombs', () => {
  test('the first records of a 1 GB zstd bomb and a 1.1 GB bzip2 bomb cost a bounded amount of memory', async () => {
    const dir = tempDir()
    const zst = join(dir, 'bomb.jsonl.zst')
    const bz = join(dir, 'bomb.jsonl.bz2')
    const zbytes = await zstdBomb(1024)
    expect(zbytes.length).toBeLessThan(400_000)
    writeFileSync(zst, zbytes)
    writeFileSync(bz, Buffer.concat(Array(24).fill(BZ2_SEED)))
    // before: 1.1 GB of RSS and 15 s for the zstd file, 4 GB and 100 s for the bzip2 one
    const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', readFirst, '10', zst, bz], {
      timeout: 20_000,
    })
    const got = JSON.parse(stdout) as { records: number[]; growthMiB: number }
    expect(got.records).toEqual([10, 10])
    expect(got.growthMiB).toBeLessThan(100)
  })

  test('a decoder makes only what its reader takes, a few blocks ahead', async () => {
    for (const [bytes, decoder] of [
      [await zstdBomb(64), new ZstdPullDecoder()],
      [Buffer.concat(Array(4).fill(BZ2_SEED)), new Bzip2Decoder()],
    ] as const) {
      let made = 0
      const counting: PullDecoder = {
        feed: (c) => decoder.feed(c),
        pull: (ended) => {
          const out = decoder.pull(ended)
          if (out) made += out.length
          return out
        },
      }
      const stream = new PullStream(counting)
      Readable.from([bytes]).pipe(stream)
      let read = 0
      for await (const c of stream) {
        read += (c as Buffer).length
        if (read >= 100_000) break
      }
      // 64 MiB and 184 MB are there to decode; well under 2 MiB is made for 100 kB read
      expect(made).toBeLessThan(2 * 2 ** 20)
    }
  })
})

describe('bzip2 decoding', () => {
  test('files of one and of several blocks decode to the bytes bzip2 compressed', async () => {
    // made by Python's bz2 (level 1) from runs of 1-400 bytes around 20,000 pseudo-random bytes
    const runs = await decode(readFileSync(fixture('runs-and-noise.bin.bz2')), 'bzip2')
    expect([runs.length, sha256(runs)]).toEqual([
      180_400,
      '29f8a3e0a90c9b2b9eec610bd170c0c9466a6c6b2eec104af9981ac434880f79',
    ])
    // three 100 kB blocks, read in small chunks so that blocks span many of them
    const many = await decode(readFileSync(fixture('wiki-many.xml.bz2')), 'bzip2', 777)
    expect(many.toString('utf8')).toBe(manyPagesDump(120))
  })

  test('the same bytes as unbzip2-stream, and concatenated streams (pbzip2) in order', async () => {
    const bytes = readFileSync(fixture('wiki-sample.xml.bz2'))
    const theirs: Buffer[] = []
    await new Promise((resolve, reject) => {
      const oracle = bz2()
      oracle.on('data', (c: Buffer) => theirs.push(c))
      oracle.on('end', resolve)
      oracle.on('error', reject)
      oracle.end(bytes)
    })
    const one = await decode(bytes, 'bzip2')
    expect(one).toEqual(Buffer.concat(theirs))
    const runs = readFileSync(fixture('runs-and-noise.bin.bz2'))
    const both = await decode(Buffer.concat([bytes, runs, bytes]), 'bzip2', 4096)
    expect(both).toEqual(Buffer.concat([one, await decode(runs, 'bzip2'), one]))
  })

  test('a damaged block fails its CRC; a cut file is truncated; neither hangs', async () => {
    const bytes = Buffer.from(readFileSync(fixture('runs-and-noise.bin.bz2')))
    const damaged = Buffer.from(bytes)
    damaged[12_000] = damaged[12_000]! ^ 0x10
    await expect(decode(damaged, 'bzip2')).rejects.toMatchObject({
      code: 'CORRUPT_COMPRESSED',
      message: expect.stringMatching(/mem\.bzip2: cannot decode bzip2/),
    })
    await expect(decode(bytes.subarray(0, 10_000), 'bzip2')).rejects.toMatchObject({
      code: 'CORRUPT_COMPRESSED',
      truncated: true,
    })
    await expect(decode(Buffer.from('BZh9 this is not bzip2 at all'), 'bzip2')).rejects.toMatchObject({
      code: 'CORRUPT_COMPRESSED',
    })
  })
})

describe('zstd decoding', () => {
  test('frames, tiny frames and skippable frames decode in order, in any chunking', async () => {
    await zstdReady
    const a = Buffer.from(zstdCompress(Buffer.from('hello '.repeat(50_000)), 3))
    const tiny = Buffer.from(zstdCompress(Buffer.from('x'), 3))
    const skippable = Buffer.concat([Buffer.from([0x50, 0x2a, 0x4d, 0x18, 5, 0, 0, 0]), Buffer.from('ignored')])
    const bytes = Buffer.concat([tiny, a, skippable.subarray(0, 13), tiny, a])
    const want = `x${'hello '.repeat(50_000)}x${'hello '.repeat(50_000)}`
    for (const chunk of [1 << 20, 1000, 7]) {
      expect((await decode(bytes, 'zstd', chunk)).toString()).toBe(want)
    }
    await expect(decode(a.subarray(0, a.length - 3), 'zstd')).rejects.toMatchObject({
      code: 'CORRUPT_COMPRESSED',
      truncated: true,
    })
  })

  test('a frame asking for a window over 128 MiB is refused before anything is allocated', async () => {
    // magic, no single segment, window descriptor 2^(10+21) = 2 GiB, then an empty last raw block
    const frame = Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0x00, 21 << 3, 0x01, 0x00, 0x00])
    await expect(decode(frame, 'zstd')).rejects.toMatchObject({
      code: 'CORRUPT_COMPRESSED',
      message: expect.stringMatching(/2048 MiB window, over the 128 MiB limit/),
    })
    const rle = Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x58, 0x03 | ((0x1fffff & 0x1f) << 3), 0xff, 0xff, 0x61])
    await expect(decode(rle, 'zstd')).rejects.toMatchObject({ message: expect.stringMatching(/zstd block of/) })
  })
})
