import { execFileSync } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { Readable } from 'node:stream'
import { gunzipSync, gzipSync } from 'node:zlib'
import { describe, expect, test } from 'vitest'
import { ZephyrContext } from '../context.js'
import { Dataset } from '../dataset.js'
import { tempDir } from '../fixtures/tmp.js'
import { lines } from '../internal/input.js'

const ctx = new ZephyrContext({ inProcess: true, progress: 'off' })
const docs = Array.from({ length: 2500 }, (_, i) => ({
  id: i,
  text: `document ${i} ${'é'.repeat(i % 7)}`,
  tags: [i % 3, 'x'],
  nested: { ok: i % 2 === 0 },
}))

describe('JSONL', () => {
  test.each(['jsonl', 'jsonl.gz', 'jsonl.zst'])('round trip through .%s', async (ext) => {
    const dir = tempDir()
    const written = await ctx.execute(
      Dataset.fromList(docs, { numShards: 3 }).writeJsonl(join(dir, `part-{shard:05d}-of-{total:05d}.${ext}`)),
    )
    expect(written.outputs.map((o) => o.slice(dir.length + 1))).toEqual(
      [0, 1, 2].map((i) => `part-0000${i}-of-00003.${ext}`),
    )
    const back = await ctx.execute(Dataset.fromFiles(join(dir, `*.${ext}`)).loadJsonl())
    expect(back.results).toEqual(docs)
    expect(back.counters[0]!.bytesRead).toBeGreaterThan(0)
    if (ext === 'jsonl.gz')
      expect(gunzipSync(readFileSync(written.outputs[0]!)).toString().split('\n')[0]).toBe(JSON.stringify(docs[0]))
  })

  test('.zst files interoperate with the zstd command-line tool both ways', async () => {
    const dir = tempDir()
    const [out] = (await ctx.execute(Dataset.fromList(docs).writeJsonl(join(dir, 'ours-{shard}.jsonl.zst')))).outputs
    const text = execFileSync('zstd', ['-dc', out!]).toString()
    expect(
      text
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l)),
    ).toEqual(docs)
    writeFileSync(join(dir, 'plain.jsonl'), text)
    execFileSync('zstd', ['-q', '-19', join(dir, 'plain.jsonl'), '-o', join(dir, 'theirs.jsonl.zst')])
    expect((await ctx.execute(Dataset.fromFiles(join(dir, 'theirs.jsonl.zst')).loadJsonl())).results).toEqual(docs)
  })

  test('a corrupt line fails naming the file and line by default', async () => {
    const dir = tempDir()
    writeFileSync(join(dir, 'bad.jsonl'), '{"a":1}\n{"a":2}\n{"a": oops}\n{"a":4}\n')
    await expect(ctx.execute(Dataset.fromFiles(join(dir, 'bad.jsonl')).loadJsonl())).rejects.toMatchObject({
      code: 'CORRUPT_JSONL',
      message: expect.stringMatching(/bad\.jsonl: line 3 is not valid JSON.*onError: 'skip'/),
    })
  })

  test("onError: 'skip' drops and counts corrupt lines", async () => {
    const dir = tempDir()
    writeFileSync(join(dir, 'bad.jsonl'), '{"a":1}\r\n{"a":\n\n{"a":3}\nnot json\n{"a":5}')
    const r = await ctx.execute(Dataset.fromFiles(join(dir, 'bad.jsonl')).loadJsonl({ onError: 'skip' }))
    expect(r.results).toEqual([{ a: 1 }, { a: 3 }, { a: 5 }])
    expect(r.counters[0]!.skippedLines).toBe(2)
    expect(r.counters[0]!.recordsIn).toBe(3)
  })

  test('a truncated .gz input is a CORRUPT_COMPRESSED error naming the file', async () => {
    const dir = tempDir()
    const [out] = (await ctx.execute(Dataset.fromList(docs).writeJsonl(join(dir, 'x-{shard}.jsonl.gz')))).outputs
    const bytes = readFileSync(out!)
    writeFileSync(join(dir, 'cut.jsonl.gz'), bytes.subarray(0, bytes.length >> 1))
    await expect(ctx.execute(Dataset.fromFiles(join(dir, 'cut.jsonl.gz')).loadJsonl())).rejects.toMatchObject({
      code: 'CORRUPT_COMPRESSED',
      message: expect.stringContaining('cut.jsonl.gz'),
    })
  })

  test('a line over maxRecordBytes fails naming the file, the line and its byte offset', async () => {
    const dir = tempDir()
    const long = `{"b":"${'x'.repeat(3000)}"}`
    writeFileSync(join(dir, 'long.jsonl'), `{"a":1}\n${long}\n{"a":3}\n`)
    const read = (file: string, maxRecordBytes?: number) =>
      ctx.execute(Dataset.fromFiles(join(dir, file)).loadJsonl({ maxRecordBytes }))
    await expect(read('long.jsonl', 1000)).rejects.toMatchObject({
      code: 'CORRUPT_JSONL',
      message: expect.stringMatching(
        /long\.jsonl: line 2 \(from byte 8\) is longer than the 1000 bytes record limit.*maxRecordBytes/,
      ),
    })
    expect((await read('long.jsonl', 3010)).results).toHaveLength(3)
    // gunzip hands lines over in 16 KiB pieces: the line is refused once its bytes pass the limit, unended
    writeFileSync(join(dir, 'long.jsonl.gz'), gzipSync(`{"a":1}\n{"a":2}\n{"b":"${'y'.repeat(200_000)}`))
    await expect(read('long.jsonl.gz', 50_000)).rejects.toMatchObject({
      code: 'CORRUPT_JSONL',
      message: expect.stringMatching(/long\.jsonl\.gz: line 3 \(from byte 16\)/),
    })
    expect(() => Dataset.fromFiles(join(dir, 'x')).loadJsonl({ maxRecordBytes: -1 })).toThrow(/maxRecordBytes must be/)
  })

  test('by default a record may be 64 MiB; one byte more fails as soon as it arrives', async () => {
    const mib = Buffer.alloc(2 ** 20, 'x')
    const chunks = function* (n: number) {
      for (let i = 0; i < n; i++) yield mib
      yield Buffer.from('\nend')
    }
    let got: string[] = []
    for await (const b of lines(Readable.from(chunks(64)), { url: 'mem.jsonl' })) got = got.concat(b.lines)
    expect(got.map((l) => l.length)).toEqual([2 ** 26, 3])
    let seen = 0
    const counted = function* () {
      for (const c of chunks(100)) {
        seen++
        yield c
      }
    }
    await expect(async () => {
      for await (const _ of lines(Readable.from(counted()), { url: 'mem.jsonl' }));
    }).rejects.toThrow(/mem\.jsonl: line 1 \(from byte 0\) is longer than the 64 MiB record limit/)
    expect(seen).toBe(65)
  })

  test('a 32 MiB line in 16 KiB pieces is split in linear time (re-splitting its tail took 46 s)', async () => {
    // 2048 pieces: quadratic re-scanning would touch 32 GiB; each byte is looked at once here
    const piece = Buffer.alloc(1 << 14, 'z')
    const pieces = function* () {
      for (let i = 0; i < 2048; i++) yield piece
      yield Buffer.from('\r\nlast')
    }
    const got: string[] = []
    for await (const b of lines(Readable.from(pieces()), { url: 'mem.txt' })) got.push(...b.lines)
    expect(got.map((l) => l.length)).toEqual([2 ** 25, 4])
  }, 10_000)
})
