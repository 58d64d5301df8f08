/** @module XXH64 (reference xxHash 0.8), and the primes XXH3 shares. */

export const P32_1: u64 = 0x9e3779b1
export const P32_2: u64 = 0x85ebca77
export const P32_3: u64 = 0xc2b2ae3d
export const P64_1: u64 = 0x9e3779b185ebca87
export const P64_2: u64 = 0xc2b2ae3d27d4eb4f
export const P64_3: u64 = 0x165667b19e3779f9
export const P64_4: u64 = 0x85ebca77c2b2ae63
export const P64_5: u64 = 0x27d4eb2f165667c5
export const PRIME_MX1: u64 = 0x165667919e3779f9
export const PRIME_MX2: u64 = 0x9fb21c651e98df25

@inline function round64(acc: u64, input: u64): u64 {
  acc += input * P64_2
  acc = rotl<u64>(acc, 31)
  return acc * P64_1
}

@inline function mergeRound64(acc: u64, val: u64): u64 {
  acc ^= round64(0, val)
  return acc * P64_1 + P64_4
}

@inline export function avalanche64(h: u64): u64 {
  h ^= h >> 33
  h *= P64_2
  h ^= h >> 29
  h *= P64_3
  h ^= h >> 32
  return h
}

/** XXH64 of `len` bytes at `p`. */
export function xxh64(p: usize, len: usize, seed: u64): u64 {
  const end = p + len
  let h: u64
  if (len >= 32) {
    const limit = end - 32
    let v1 = seed + P64_1 + P64_2
    let v2 = seed + P64_2
    let v3 = seed
    let v4 = seed - P64_1
    do {
      v1 = round64(v1, load<u64>(p))
      v2 = round64(v2, load<u64>(p, 8))
      v3 = round64(v3, load<u64>(p, 16))
      v4 = round64(v4, load<u64>(p, 24))
      p += 32
    } while (p <= limit)
    h = rotl<u64>(v1, 1) + rotl<u64>(v2, 7) + rotl<u64>(v3, 12) + rotl<u64>(v4, 18)
    h = mergeRound64(h, v1)
    h = mergeRound64(h, v2)
    h = mergeRound64(h, v3)
    h = mergeRound64(h, v4)
  } else {
    h = seed + P64_5
  }
  h += <u64>len
  while (p + 8 <= end) {
    h ^= round64(0, load<u64>(p))
    h = rotl<u64>(h, 27) * P64_1 + P64_4
    p += 8
  }
  if (p + 4 <= end) {
    h ^= (<u64>load<u32>(p)) * P64_1
    h = rotl<u64>(h, 23) * P64_2 + P64_3
    p += 4
  }
  while (p < end) {
    h ^= (<u64>load<u8>(p)) * P64_5
    h = rotl<u64>(h, 11) * P64_1
    p++
  }
  return avalanche64(h)
}

/** XXH64 of `len` bytes at `p`, stored at `out`; the seed comes as two u32 halves (no BigInt per call). */
export function xxh64To(p: usize, len: usize, seedLo: u32, seedHi: u32, out: usize): void {
  store<u64>(out, xxh64(p, len, ((<u64>seedHi) << 32) | seedLo))
}
