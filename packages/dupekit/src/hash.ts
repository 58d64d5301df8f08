/**
 * @module Exact hashing: XXH64, XXH3-64 and XXH3-128 of strings (as UTF-8) and bytes.
 *
 * Results are byte-exact with the reference xxHash (0.8) for every length and seed,
 * so keys computed here match keys computed by any other xxHash implementation.
 * The batch functions hash many inputs per call into one typed array; they are
 * the fast path for exact dedup (one call into WebAssembly per batch, not per document).
 *
 * @example
 * xxh3('hello')                    // 64-bit bigint
 * xxh128(bytes, 42n)               // 128-bit bigint
 * xxh3Batch(['a', 'b', 'c'])       // BigUint64Array [h(a), h(b), h(c)]
 */
import { DupekitError } from './errors.js'
import { kernels, type KernelMemory } from './internal/wasm.js'

/** Something to hash: a string is hashed as its UTF-8 bytes. */
export type HashInput = string | Uint8Array

const encoder = new TextEncoder()
const MASK64 = (1n << 64n) - 1n

/** Largest input bytes staged per kernel call; bigger batches are split. */
const CHUNK_BYTES = 8 << 20

/** Copies one input to `at`; returns its byte length. */
function stage(m: KernelMemory, input: HashInput, at: number): number {
  if (typeof input === 'string') {
    // UTF-8 needs at most 3 bytes per UTF-16 code unit.
    m.ensure(at + input.length * 3)
    return encoder.encodeInto(input, m.u8.subarray(at)).written
  }
  m.ensure(at + input.length)
  m.u8.set(input, at)
  return input.length
}

function checkSeed(seed: bigint, fn: string): bigint {
  if (typeof seed !== 'bigint' || seed < 0n || seed > MASK64) {
    throw new DupekitError('INVALID_ARGUMENT', `${fn}: seed must be a bigint in [0, 2^64), got ${String(seed)}; pass e.g. 0n`)
  }
  return seed
}

/** XXH64 of `input` (UTF-8 for strings). @default seed 0n */
export function xxh64(input: HashInput, seed = 0n): bigint {
  const m = kernels()
  const len = stage(m, input, m.base)
  return BigInt.asUintN(64, m.k.xxh64(m.base, len, checkSeed(seed, 'xxh64')))
}

/** XXH3-64 of `input` (UTF-8 for strings). @default seed 0n */
export function xxh3(input: HashInput, seed = 0n): bigint {
  const m = kernels()
  const len = stage(m, input, m.base)
  return BigInt.asUintN(64, m.k.xxh3(m.base, len, checkSeed(seed, 'xxh3')))
}

/** XXH3-128 of `input` (UTF-8 for strings), as one 128-bit bigint (high 64 bits first). @default seed 0n */
export function xxh128(input: HashInput, seed = 0n): bigint {
  const m = kernels()
  const out = m.base
  const at = m.base + 16
  const len = stage(m, input, at)
  m.k.xxh128(at, len, checkSeed(seed, 'xxh128'), out)
  const w = new BigUint64Array(m.buffer, out, 2)
  return (w[1]! << 64n) | w[0]!
}

type BatchKernel = 'xxh64Batch' | 'xxh3Batch' | 'xxh128Batch'

/** Hashes `inputs` in chunks; `words` u64s per result. */
function batch(inputs: readonly HashInput[], seed: bigint, kernel: BatchKernel, words: number): BigUint64Array {
  const n = inputs.length
  const result = new BigUint64Array(n * words)
  const m = kernels()
  let i = 0
  while (i < n) {
    // Lay out: offsets (u32 × (count+1)), results (u64 × words × count), then the bytes.
    let count = 0
    let bytes = 0
    for (let j = i; j < n && (count === 0 || bytes < CHUNK_BYTES); j++) {
      const x = inputs[j]!
      bytes += typeof x === 'string' ? x.length * 3 : x.length
      count++
    }
    const offsets = m.base
    const out = (offsets + (count + 1) * 4 + 15) & ~15
    const data = out + count * 8 * words
    m.ensure(data + bytes)
    let pos = 0
    m.u32[offsets >>> 2] = 0
    for (let j = 0; j < count; j++) {
      pos += stage(m, inputs[i + j]!, data + pos)
      m.u32[(offsets >>> 2) + j + 1] = pos
    }
    m.k[kernel](data, offsets, count, seed, out)
    result.set(new BigUint64Array(m.buffer, out, count * words), i * words)
    i += count
  }
  return result
}

/** XXH64 of each input: result `i` is the hash of `inputs[i]`. @default seed 0n */
export function xxh64Batch(inputs: readonly HashInput[], seed = 0n): BigUint64Array {
  return batch(inputs, checkSeed(seed, 'xxh64Batch'), 'xxh64Batch', 1)
}

/** XXH3-64 of each input: result `i` is the hash of `inputs[i]`. @default seed 0n */
export function xxh3Batch(inputs: readonly HashInput[], seed = 0n): BigUint64Array {
  return batch(inputs, checkSeed(seed, 'xxh3Batch'), 'xxh3Batch', 1)
}

/**
 * XXH3-128 of each input, two u64 per input: `[2i]` is the low and `[2i+1]` the
 * high half of the hash of `inputs[i]`. @default seed 0n
 */
export function xxh128Batch(inputs: readonly HashInput[], seed = 0n): BigUint64Array {
  return batch(inputs, checkSeed(seed, 'xxh128Batch'), 'xxh128Batch', 2)
}

/** Lower-case hex of a hash, zero-padded to its width (16 digits for 64 bits, 32 for 128). */
export function hashHex(hash: bigint, bits: 64 | 128 = 64): string {
  return hash.toString(16).padStart(bits / 4, '0')
}
