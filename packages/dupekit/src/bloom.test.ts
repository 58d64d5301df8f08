import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { BloomFilter, bloomSize } from './bloom.js'
import { bloomFromBytes, bloomToBytes, loadBloom, saveBloom } from './bloom-file.js'
import { isDupekitError } from './errors.js'

describe('sizing', () => {
  test('bits and hashes follow -n ln p / ln²2 and bits/n · ln 2', () => {
    const { bits, hashes } = bloomSize(1_000_000, 0.01)
    expect(bits).toBe(Math.ceil(Math.ceil((1e6 * Math.log(100)) / Math.LN2 ** 2) / 64) * 64)
    expect(hashes).toBe(7)
    expect(bloomSize(1000, 0.001).hashes).toBe(10)
  })
  test('bad sizes are rejected', () => {
    expect(() => bloomSize(0, 0.01)).toThrow(/expectedItems must be a number ≥ 1, got 0/)
    expect(() => bloomSize(10, 1)).toThrow(/falsePositiveRate must be in \(0, 1\), got 1/)
    expect(() => bloomSize(1e12, 0.01)).toThrow(/over the 4294967296-bit limit; shard the keys/)
  })

  test('the constructor takes the same options as create', () => {
    const viaNew = new BloomFilter({ expectedItems: 1000, falsePositiveRate: 0.001, seed: 3 })
    const viaCreate = BloomFilter.create({ expectedItems: 1000, falsePositiveRate: 0.001, seed: 3 })
    expect([viaNew.bits, viaNew.hashes, viaNew.seed]).toEqual([viaCreate.bits, viaCreate.hashes, 3])
    viaNew.add('a')
    expect(viaNew.has('a')).toBe(true)
    expect(() => new BloomFilter({ expectedItems: 0 })).toThrow(/expectedItems must be a number ≥ 1, got 0/)
  })
})

describe.each([0.01, 0.001])('at capacity with target rate %f', (rate) => {
  const n = 20_000
  const bf = BloomFilter.create({ expectedItems: n, falsePositiveRate: rate, seed: 5 })
  for (let i = 0; i < n; i++) bf.add(`member-${i}`)

  test('no false negatives', () => {
    let missing = 0
    for (let i = 0; i < n; i++) if (!bf.has(`member-${i}`)) missing++
    expect(missing).toBe(0)
  })

  test('measured false-positive rate is within 1.5x the target', () => {
    const trials = 200_000
    let fp = 0
    for (let i = 0; i < trials; i++) if (bf.has(`outsider-${i}`)) fp++
    expect(fp / trials).toBeLessThanOrEqual(1.5 * rate)
    // And not absurdly below it either: the filter is not oversized by mistake.
    expect(fp / trials).toBeGreaterThanOrEqual(rate / 3)
  })

  test('estimated count is within 3% of the items added', () => {
    expect(Math.abs(bf.estimatedCount() / n - 1)).toBeLessThan(0.03)
    expect(bf.added).toBeLessThanOrEqual(n)
    expect(bf.added).toBeGreaterThan(n * 0.97)
  })
})

test('strings and bytes: a string key equals its UTF-8 bytes', () => {
  const bf = BloomFilter.create({ expectedItems: 100 })
  expect(bf.add('héllo')).toBe(true)
  expect(bf.has(new TextEncoder().encode('héllo'))).toBe(true)
  expect(bf.add('héllo')).toBe(false)
  expect(bf.has('hello')).toBe(false)
})

test('union holds both sets; intersection answers true for the common keys', () => {
  const a = BloomFilter.create({ expectedItems: 2000, falsePositiveRate: 0.001 })
  const b = BloomFilter.create({ expectedItems: 2000, falsePositiveRate: 0.001 })
  for (let i = 0; i < 1000; i++) a.add(`k${i}`)
  for (let i = 500; i < 1500; i++) b.add(`k${i}`)
  const u = a.union(b)
  const x = a.intersection(b)
  for (let i = 0; i < 1500; i++) expect(u.has(`k${i}`)).toBe(true)
  for (let i = 500; i < 1000; i++) expect(x.has(`k${i}`)).toBe(true)
  let wrong = 0
  for (let i = 0; i < 500; i++) if (x.has(`k${i}`)) wrong++
  expect(wrong).toBeLessThan(25)
  expect(Math.abs(u.estimatedCount() / 1500 - 1)).toBeLessThan(0.05)
  const other = BloomFilter.create({ expectedItems: 2000, falsePositiveRate: 0.01 })
  expect(() => a.union(other)).toThrow(/Bloom union: filters differ .*create both with the same options/)
  expect(() => a.intersection(BloomFilter.create({ expectedItems: 2000, falsePositiveRate: 0.001, seed: 1 }))).toThrow(
    /seed 0 vs 1/,
  )
})

describe('save and load', () => {
  let dir = ''
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'dupekit-bloom-'))
  })
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true })
  })

  const filled = () => {
    const bf = BloomFilter.create({ expectedItems: 5000, falsePositiveRate: 0.01, seed: 9 })
    for (let i = 0; i < 5000; i++) bf.add(`doc-${i}`)
    return bf
  }

  test('round trip keeps every bit, the shape and the count', async () => {
    const bf = filled()
    const path = join(dir, 'f.bloom')
    await saveBloom(bf, path)
    const back = await loadBloom(path)
    expect(back.bits).toBe(bf.bits)
    expect(back.hashes).toBe(bf.hashes)
    expect(back.seed).toBe(9)
    expect(back.added).toBe(bf.added)
    expect(back.words).toEqual(bf.words)
    for (let i = 0; i < 5000; i++) expect(back.has(`doc-${i}`)).toBe(true)
  })

  test('the layout is pinned: magic, version, header', () => {
    const bytes = bloomToBytes(new BloomFilter(128, 3, 7))
    expect(bytes.length).toBe(48 + 16 + 8)
    expect(Buffer.from(bytes.subarray(0, 16)).toString('hex')).toBe('4d424c46010030000300000007000000')
  })

  const codeOf = (fn: () => unknown): string => {
    try {
      fn()
    } catch (err) {
      if (isDupekitError(err)) return `${err.code}: ${err.message}`
      throw err
    }
    return 'no error'
  }

  test('a truncated file fails with BLOOM_TRUNCATED naming the file', async () => {
    const bytes = bloomToBytes(filled())
    const path = join(dir, 'cut.bloom')
    for (const keep of [0, 3, 20, 48, bytes.length - 1, bytes.length - 9]) {
      await writeFile(path, bytes.subarray(0, keep))
      await expect(loadBloom(path)).rejects.toThrow(
        new RegExp(`Bloom filter file ${path.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} is truncated`),
      )
      await expect(loadBloom(path)).rejects.toMatchObject({ code: 'BLOOM_TRUNCATED' })
    }
  })

  test('a flipped bit anywhere fails with BLOOM_CORRUPT (or BLOOM_FORMAT in magic/version)', async () => {
    const good = bloomToBytes(filled())
    const path = join(dir, 'bad.bloom')
    for (const at of [0, 4, 6, 9, 13, 17, 30, 100, 48 + 777, good.length - 1]) {
      const bad = good.slice()
      bad[at]! ^= 0x10
      await writeFile(path, bad)
      const want = at < 6 ? 'BLOOM_FORMAT' : 'BLOOM_(CORRUPT|TRUNCATED)'
      await expect(loadBloom(path)).rejects.toThrow(path)
      expect(codeOf(() => bloomFromBytes(bad, path))).toMatch(new RegExp(`^${want}`))
    }
    // Payload and checksum damage is always caught by the checksum.
    const bad = good.slice()
    bad[48 + 5]! ^= 1
    expect(codeOf(() => bloomFromBytes(bad, 'x.bloom'))).toMatch(
      /^BLOOM_CORRUPT: Bloom filter file x.bloom is corrupted: checksum .* does not match/,
    )
  })

  test('extra bytes, another format version, a missing file', async () => {
    const good = bloomToBytes(filled())
    const longer = new Uint8Array(good.length + 3)
    longer.set(good)
    expect(codeOf(() => bloomFromBytes(longer, 'long.bloom'))).toMatch(/^BLOOM_CORRUPT: .*long.bloom.* the header says/)
    const v2 = good.slice()
    v2[4] = 2
    expect(codeOf(() => bloomFromBytes(v2, 'v2.bloom'))).toMatch(
      /^BLOOM_FORMAT: Bloom filter file v2.bloom has format version 2; this @marin\/dupekit reads version 1/,
    )
    expect(codeOf(() => bloomFromBytes(new TextEncoder().encode('{"json": true}'), 'j.json'))).toMatch(
      /^BLOOM_FORMAT: .*j.json is not a saved Bloom filter/,
    )
    await expect(loadBloom(join(dir, 'nope.bloom'))).rejects.toMatchObject({ code: 'BLOOM_IO' })
    await expect(saveBloom(filled(), join(dir, 'no-such-dir', 'f.bloom'))).rejects.toThrow(
      /cannot save Bloom filter to .*no-such-dir/,
    )
    expect(await readFile(join(dir, 'f.bloom'))).toBeTruthy()
  })
})

test('bit positions follow the documented formula (part of the file format)', async () => {
  const { xxh3 } = await import('./hash.js')
  const bf = new BloomFilter(64 * 1000 + 64, 7, 3)
  for (const key of ['x', 'héllo', 'a longer key with spaces']) {
    bf.add(key)
    const h = xxh3(key, 3n)
    const h1 = h & 0xffffffffn
    const h2 = h >> 32n
    for (let i = 0n; i < 7n; i++) {
      const bit = Number((h1 + i * h2) % BigInt(bf.bits))
      expect((bf.words[bit >>> 5]! >>> (bit & 31)) & 1, `${key} probe ${i}`).toBe(1)
    }
  }
  expect(bf.bitCount()).toBeLessThanOrEqual(21)
})
