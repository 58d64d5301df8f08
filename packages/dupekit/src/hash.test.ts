import { describe, expect, test } from 'vitest'
import xxhashWasm from 'xxhash-wasm'
import { hashHex, xxh128, xxh128Batch, xxh3, xxh3Batch, xxh64, xxh64Batch } from './hash.js'
import fixture from './fixtures/xxh3-python.json' with { type: 'json' }

const PRIME32 = 2654435761n
const PRIME64 = 11400714785074694797n

/** The reference sanity buffer of xxHash's `xxhsum -b` self-test. */
function sanityBuffer(len: number): Uint8Array {
  const buf = new Uint8Array(len)
  let gen = PRIME32
  for (let i = 0; i < len; i++) {
    buf[i] = Number(gen >> 56n)
    gen = (gen * PRIME64) & ((1n << 64n) - 1n)
  }
  return buf
}
const SANITY = sanityBuffer(4096 + 64 + 1)

// Reference values from xxHash's cli/xsum_sanity_check.c.
const XXH64_VECTORS: [number, bigint, bigint][] = [
  [0, 0n, 0xef46db3751d8e999n],
  [0, PRIME32, 0xac75fda2929b17efn],
  [1, 0n, 0xe934a84adb052768n],
  [1, PRIME32, 0x5014607643a9b4c3n],
  [4, 0n, 0x9136a0dca57457een],
  [14, 0n, 0x8282dcc4994e35c8n],
  [14, PRIME32, 0xc3bd6bf63deb6df0n],
  [222, 0n, 0xb641ae8cb691c174n],
  [222, PRIME32, 0x20cb8ab7ae10c14an],
]
const XXH3_VECTORS: [number, bigint, bigint][] = [
  [0, 0n, 0x2d06800538d394c2n],
  [0, PRIME64, 0xa8a6b918b2f0364an],
  [1, 0n, 0xc44bdff4074eecdbn],
  [1, PRIME64, 0x032be332dd766ef8n],
  [6, 0n, 0x27b56a84cd2d7325n],
  [6, PRIME64, 0x84589c116ab59ab9n],
  [12, 0n, 0xa713daf0dfbb77e7n],
  [12, PRIME64, 0xe7303e1b2336de0en],
  [24, 0n, 0xa3fe70bf9d3510ebn],
  [24, PRIME64, 0x850e80fc35bdd690n],
  [48, 0n, 0x397da259ecba1f11n],
  [48, PRIME64, 0xadc2cbaa44acc616n],
  [80, 0n, 0xbcdefbbb2c47c90an],
  [80, PRIME64, 0xc6dd0cb699532e73n],
  [195, 0n, 0xcd94217ee362ec3an],
  [195, PRIME64, 0xba68003d370cb3d9n],
  [403, 0n, 0xcdeb804d65c6dea4n],
  [403, PRIME64, 0x6259f6ecfd6443fdn],
  [512, 0n, 0x617e49599013cb6bn],
  [512, PRIME64, 0x3ce457de14c27708n],
  [2048, 0n, 0xdd59e2c3a5f038e0n],
  [2048, PRIME64, 0x66f81670669ababcn],
  [2240, 0n, 0x6e73a90539cf2948n],
  [2240, PRIME64, 0x757ba8487d1b5247n],
  [2367, 0n, 0xcb37aeb9e5d361edn],
  [2367, PRIME64, 0xd2db3415b942b42an],
]
const XXH128_VECTORS: [number, bigint, bigint, bigint][] = [
  [0, 0n, 0x6001c324468d497fn, 0x99aa06d3014798d8n],
  [0, PRIME32, 0x5444f7869c671ab0n, 0x92220ae55e14ab50n],
  [1, 0n, 0xc44bdff4074eecdbn, 0xa6cd5e9392000f6an],
  [1, PRIME32, 0xb53d5557e7f76f8dn, 0x89b99554ba22467cn],
  [6, 0n, 0x3e7039bdda43cfc6n, 0x082afe0b8162d12an],
  [6, PRIME32, 0x269d8f70be98856en, 0x5a865b5389abd2b1n],
  [12, 0n, 0x061a192713f69ad9n, 0x6e3efd8fc7802b18n],
  [12, PRIME32, 0x9be9f9a67f3c7dfbn, 0xd7e09d518a3405d3n],
  [24, 0n, 0x1e7044d28b1b901dn, 0x0ce966e4678d3761n],
  [24, PRIME32, 0xd7304c54ebad40a9n, 0x3162026714a6a243n],
  [48, 0n, 0xf942219aed80f67bn, 0xa002ac4e5478227en],
  [48, PRIME32, 0x7ba3c3e453a1934en, 0x163adde36c072295n],
  [81, 0n, 0x5e8bafb9f95fb803n, 0x4952f58181ab0042n],
  [81, PRIME32, 0x703fbb3d7a5f755cn, 0x2724ec7adc750fb6n],
  [222, 0n, 0xf1aebd597cec6b3an, 0x337e09641b948717n],
  [222, PRIME32, 0xae995bb8af917a8dn, 0x91820016621e97f1n],
  [403, 0n, 0xcdeb804d65c6dea4n, 0x1b6de21e332dd73dn],
  [403, PRIME64, 0x6259f6ecfd6443fdn, 0xbed311971e0be8f2n],
  [512, 0n, 0x617e49599013cb6bn, 0x18d2d110dcc9bca1n],
  [512, PRIME64, 0x3ce457de14c27708n, 0x925d06b8ec5b8040n],
  [2048, 0n, 0xdd59e2c3a5f038e0n, 0xf736557fd47073a5n],
  [2048, PRIME32, 0x230d43f30206260bn, 0x7fb03f7e7186c3ean],
  [2240, 0n, 0x6e73a90539cf2948n, 0xccb134fbfa7ce49dn],
  [2240, PRIME32, 0xed385111126fba6fn, 0x50a1fe17b338995fn],
  [2367, 0n, 0xcb37aeb9e5d361edn, 0xe89c0f6ff369b427n],
  [2367, PRIME32, 0x6f5360ae69c2f406n, 0xd23aae4b76c31ecbn],
]

describe('reference sanity vectors', () => {
  test.each(XXH64_VECTORS)('xxh64 len %i seed %s', (len, seed, want) => {
    expect(hashHex(xxh64(SANITY.subarray(0, len), seed))).toBe(hashHex(want))
  })
  test.each(XXH3_VECTORS)('xxh3 len %i seed %s', (len, seed, want) => {
    expect(hashHex(xxh3(SANITY.subarray(0, len), seed))).toBe(hashHex(want))
  })
  test.each(XXH128_VECTORS)('xxh128 len %i seed %s', (len, seed, lo, hi) => {
    expect(hashHex(xxh128(SANITY.subarray(0, len), seed), 128)).toBe(hashHex((hi << 64n) | lo, 128))
  })
})

/** Deterministic bytes: xorshift32 from a fixed seed. */
function randomBytes(len: number, seed: number): Uint8Array {
  const out = new Uint8Array(len)
  let s = seed >>> 0 || 1
  for (let i = 0; i < len; i++) {
    s ^= s << 13
    s >>>= 0
    s ^= s >>> 17
    s ^= s << 5
    s >>>= 0
    out[i] = s & 0xff
  }
  return out
}

test('xxh64 agrees with xxhash-wasm on random inputs of every length 0..600 and some long ones', async () => {
  const ref = await xxhashWasm()
  const lengths = [...Array.from({ length: 601 }, (_, i) => i), 1023, 1024, 4097, 65_537]
  for (const len of lengths) {
    const bytes = randomBytes(len, len * 7919 + 1)
    const seed = (BigInt(len) * 0x9e3779b97f4a7c15n) & ((1n << 64n) - 1n)
    expect(xxh64(bytes, seed), `len ${len}`).toBe(ref.h64Raw(bytes, seed))
  }
  const texts = ['', 'a', 'héllo wörld', '日本語のテキスト', '🙂 emoji 🙂', 'x'.repeat(1000)]
  for (const t of texts) expect(xxh64(t), t).toBe(ref.h64(t))
})

test('xxh3 and xxh128 agree with python-xxhash on random inputs (fixture)', () => {
  // fixtures/xxh3-python.json: inputs made by randomBytes(len, seed) above, hashed by
  // python3-xxhash (libxxhash 0.8.1); regenerate with fixtures/make-xxh3-python.py.
  for (const c of fixture.cases) {
    const bytes = randomBytes(c.len, c.rng)
    const seed = BigInt(c.seed)
    expect(hashHex(xxh3(bytes, seed)), `xxh3 len ${c.len}`).toBe(c.xxh3)
    expect(hashHex(xxh128(bytes, seed), 128), `xxh128 len ${c.len}`).toBe(c.xxh128)
  }
  expect(fixture.cases.length).toBeGreaterThan(400)
})

test('strings hash as their UTF-8 bytes', () => {
  for (const t of ['', 'abc', 'héllo', '日本語', '🙂']) {
    const b = new TextEncoder().encode(t)
    expect(xxh64(t)).toBe(xxh64(b))
    expect(xxh3(t, 7n)).toBe(xxh3(b, 7n))
    expect(xxh128(t)).toBe(xxh128(b))
  }
})

test('batch results equal single results, across chunk boundaries and memory growth', () => {
  const inputs: (string | Uint8Array)[] = []
  for (let i = 0; i < 300; i++) inputs.push(i % 3 === 0 ? randomBytes(i * 7, i + 1) : `doc ${i} ${'é'.repeat(i % 50)}`)
  inputs.push(randomBytes(9 << 20, 5)) // bigger than one chunk
  inputs.push('tail')
  const h64 = xxh64Batch(inputs, 3n)
  const h3 = xxh3Batch(inputs, 3n)
  const h128 = xxh128Batch(inputs, 3n)
  inputs.forEach((x, i) => {
    expect(h64[i]).toBe(xxh64(x, 3n))
    expect(h3[i]).toBe(xxh3(x, 3n))
    expect((h128[2 * i + 1]! << 64n) | h128[2 * i]!).toBe(xxh128(x, 3n))
  })
  expect(xxh3Batch([])).toHaveLength(0)
})

test('a seed outside [0, 2^64) is rejected with a message naming the function', () => {
  expect(() => xxh64('a', -1n)).toThrow(/xxh64: seed must be a bigint in \[0, 2\^64\)/)
  expect(() => xxh3Batch(['a'], 1n << 64n)).toThrow(/xxh3Batch: seed/)
})
