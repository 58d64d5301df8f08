/**
 * @module Exact hashing: XXH64, XXH3-64 and XXH3-128 of strings (as UTF-8) and bytes.
 *
 * Results are byte-exact with the reference xxHash (0.8) for every length and seed,
 * so keys computed here match keys computed by any other xxHash implementation.
 * The batch functions hash many inputs per call into one typed array; they are the
 * fast path for exact dedup (no allocation and no BigInt per document).
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
    throw new DupekitError(
      'INVALID_ARGUMENT',
      `${fn}: seed must be a bigint in [0, 2^64), got ${String(seed)}; pass e.g. 0n`,
    )
  }
  return seed
}

/** XXH64 of `input` (UTF-8 for strings). @default seed 0n */
export function xxh64(input: HashInput, seed = 0n): bigint {
  const m = kernels()
  const at = m.scratch()
  const len = stage(m, input, at)
  return BigInt.asUintN(64, m.k.xxh64(at, len, checkSeed(seed, 'xxh64')))
}

/** XXH3-64 of `input` (UTF-8 for strings). @default seed 0n */
export function xxh3(input: HashInput, seed = 0n): bigint {
  const m = kernels()
  const at = m.scratch()
  const len = stage(m, input, at)
  return BigInt.asUintN(64, m.k.xxh3(at, len, checkSeed(seed, 'xxh3')))
}

/** XXH3-128 of `input` (UTF-8 for strings), as one 128-bit bigint (high 64 bits first). @default seed 0n */
export function xxh128(input: HashInput, seed = 0n): bigint {
  const m = kernels()
  const out = m.scratch()
  const at = out + 16
  const len = stage(m, input, at)
  m.k.xxh128(at, len, checkSeed(seed, 'xxh128'), out)
  const w = new BigUint64Array(m.buffer, out, 2)
  return (w[1]! << 64n) | w[0]!
}

type OneKernel = 'xxh64To' | 'xxh3To' | 'xxh128To'

/** Results kept in kernel memory before they are copied out. */
const RESULT_CHUNK = 4096

/**
 * Hashes `inputs`, `words` u64s per result. Each input is staged at one fixed place
 * through a view made once (encodeInto on a fresh subarray per document would
 * allocate), hashed by one kernel call that stores its result in kernel memory, and
 * results are copied out a chunk at a time: no allocation and no BigInt per document.
 */
function batch(inputs: readonly HashInput[], seed: bigint, kernel: OneKernel, words: number): BigUint64Array {
  const n = inputs.length
  const result = new BigUint64Array(n * words)
  const m = kernels()
  const out = m.scratch()
  const stageAt = out + RESULT_CHUNK * 16
  const fn = m.k[kernel]
  const seedLo = Number(seed & 0xffffffffn)
  const seedHi = Number(seed >> 32n)
  m.ensure(stageAt + 65536)
  let buf = m.buffer
  let view = new Uint8Array(buf, stageAt)
  let room = view.length
  let done = 0
  for (let i = 0; i < n; i++) {
    const x = inputs[i]!
    const need = typeof x === 'string' ? x.length * 3 : x.length
    if (need > room) {
      m.ensure(stageAt + need)
      if (m.buffer !== buf) {
        buf = m.buffer
        view = new Uint8Array(buf, stageAt)
        room = view.length
      }
    }
    let len: number
    if (typeof x === 'string') {
      len = encoder.encodeInto(x, view).written
    } else {
      view.set(x)
      len = x.length
    }
    const j = i - done
    fn(stageAt, len, seedLo, seedHi, out + j * 8 * words)
    if (j + 1 === RESULT_CHUNK || i + 1 === n) {
      result.set(new BigUint64Array(buf, out, (j + 1) * words), done * words)
      done = i + 1
    }
  }
  return result
}

/** XXH64 of each input: result `i` is the hash of `inputs[i]`. @default seed 0n */
export function xxh64Batch(inputs: readonly HashInput[], seed = 0n): BigUint64Array {
  return batch(inputs, checkSeed(seed, 'xxh64Batch'), 'xxh64To', 1)
}

/** XXH3-64 of each input: result `i` is the hash of `inputs[i]`. @default seed 0n */
export function xxh3Batch(inputs: readonly HashInput[], seed = 0n): BigUint64Array {
  return batch(inputs, checkSeed(seed, 'xxh3Batch'), 'xxh3To', 1)
}

/**
 * XXH3-128 of each input, two u64 per input: `[2i]` is the low and `[2i+1]` the
 * high half of the hash of `inputs[i]`. @default seed 0n
 */
export function xxh128Batch(inputs: readonly HashInput[], seed = 0n): BigUint64Array {
  return batch(inputs, checkSeed(seed, 'xxh128Batch'), 'xxh128To', 2)
}

/** Lower-case hex of a hash, zero-padded to its width (16 digits for 64 bits, 32 for 128). */
export function hashHex(hash: bigint, bits: 64 | 128 = 64): string {
  return hash.toString(16).padStart(bits / 4, '0')
}
