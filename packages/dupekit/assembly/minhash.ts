/** @module MinHash kernels: shingle hashing (code points or words) and SIMD min over permutations. */

// murmur3's 32-bit body and finalizer: shingle hashes must be uniform because
// the permutations below are only linear maps of them.
@inline function mixIn(h: u32, v: u32): u32 {
  v *= 0xcc9e2d51
  v = rotl<u32>(v, 15)
  v *= 0x1b873593
  h ^= v
  h = rotl<u32>(h, 13)
  return h * 5 + 0xe6546b64
}

@inline function fmix32(h: u32): u32 {
  h ^= h >> 16
  h *= 0x85ebca6b
  h ^= h >> 13
  h *= 0xc2b2ae35
  h ^= h >> 16
  return h
}

/** Hash of `count` consecutive u32 values at `p`. */
@inline function hashRun(p: usize, count: u32, seed: u32): u32 {
  let h = seed
  for (let j: usize = 0; j < <usize>count; j++) h = mixIn(h, load<u32>(p + j * 4))
  return fmix32(h ^ count)
}

/** Writes one 32-bit hash per window of `n` values from `count` u32s at `units`; returns the number written. */
function shingleRuns(units: usize, count: u32, n: u32, seed: u32, out: usize): u32 {
  if (count == 0) return 0
  if (count <= n) {
    store<u32>(out, hashRun(units, count, seed))
    return 1
  }
  const windows = count - n + 1
  for (let i: usize = 0; i < <usize>windows; i++) store<u32>(out + i * 4, hashRun(units + i * 4, n, seed))
  return windows
}

/** Kernel flags: fold ASCII A-Z to a-z; collapse whitespace runs to one space and trim. */
const LOWER_ASCII: u32 = 1
const COLLAPSE_SPACE: u32 = 2

/** Exactly JavaScript's `\s` (WhiteSpace and LineTerminator), as code points. */
@inline function isSpace(c: u32): bool {
  if (c > 32 && c < 0xa0) return false
  return (
    c == 32 || (c >= 9 && c <= 13) || c == 0xa0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200a) ||
    c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000 || c == 0xfeff
  )
}

// Length in bytes of the UTF-8 sequence decoded by the last decode().
let seqLen: usize = 1

/** Decodes the code point at `p` (valid UTF-8 from TextEncoder; a cut sequence yields its first byte). */
@inline function decode(p: usize, end: usize): u32 {
  const b0 = <u32>load<u8>(p)
  if (b0 < 0x80) {
    seqLen = 1
    return b0
  }
  if (b0 < 0xe0 && p + 1 < end) {
    seqLen = 2
    return ((b0 & 0x1f) << 6) | (<u32>load<u8>(p, 1) & 0x3f)
  }
  if (b0 < 0xf0 && p + 2 < end) {
    seqLen = 3
    return ((b0 & 0x0f) << 12) | ((<u32>load<u8>(p, 1) & 0x3f) << 6) | (<u32>load<u8>(p, 2) & 0x3f)
  }
  if (p + 3 < end) {
    seqLen = 4
    const hi = ((b0 & 0x07) << 18) | ((<u32>load<u8>(p, 1) & 0x3f) << 12)
    return hi | ((<u32>load<u8>(p, 2) & 0x3f) << 6) | (<u32>load<u8>(p, 3) & 0x3f)
  }
  seqLen = 1
  return b0
}

/**
 * Character n-gram hashes of UTF-8 text: decodes to code points into `scratch`
 * (4 bytes per byte of input is enough), applying `flags`, then hashes each window
 * of `n` code points.
 */
export function charShingles(text: usize, len: usize, n: u32, seed: u32, scratch: usize, out: usize, flags: u32): u32 {
  const end = text + len
  const lower = (flags & LOWER_ASCII) != 0
  const collapse = (flags & COLLAPSE_SPACE) != 0
  let p = text
  let count: u32 = 0
  let pendingSpace = false
  while (p < end) {
    let cp = decode(p, end)
    p += seqLen
    if (collapse && isSpace(cp)) {
      pendingSpace = true
      continue
    }
    if (lower && cp - 65 < 26) cp += 32
    if (pendingSpace) {
      // Leading whitespace is dropped; trailing whitespace never gets here.
      if (count > 0) store<u32>(scratch + ((<usize>(count++)) << 2), 32)
      pendingSpace = false
    }
    store<u32>(scratch + ((<usize>(count++)) << 2), cp)
  }
  return shingleRuns(scratch, count, n, seed, out)
}

/**
 * Word n-gram hashes of UTF-8 text: words are maximal runs of code points that are
 * not whitespace (JavaScript `\s`); each word hashes to a u32 in `scratch` (FNV-1a
 * over its UTF-8 bytes, ASCII folded to lower case under LOWER_ASCII, then fmix32),
 * then each window of `n` word hashes is hashed.
 */
export function wordShingles(text: usize, len: usize, n: u32, seed: u32, scratch: usize, out: usize, flags: u32): u32 {
  const end = text + len
  const lower = (flags & LOWER_ASCII) != 0
  let p = text
  let count: u32 = 0
  let inWord = false
  let h: u32 = 0
  while (p < end) {
    const b = <u32>load<u8>(p)
    if (b < 0x80) {
      if (b == 32 || (b >= 9 && b <= 13)) {
        if (inWord) {
          store<u32>(scratch + ((<usize>(count++)) << 2), fmix32(h))
          inWord = false
        }
      } else {
        if (!inWord) {
          h = 0x811c9dc5 ^ seed
          inWord = true
        }
        h = (h ^ (lower && b - 65 < 26 ? b + 32 : b)) * 0x01000193
      }
      p++
      continue
    }
    const cp = decode(p, end)
    const l = seqLen
    if (isSpace(cp)) {
      if (inWord) {
        store<u32>(scratch + ((<usize>(count++)) << 2), fmix32(h))
        inWord = false
      }
    } else {
      if (!inWord) {
        h = 0x811c9dc5 ^ seed
        inWord = true
      }
      for (let k: usize = 0; k < l; k++) h = (h ^ <u32>load<u8>(p + k)) * 0x01000193
    }
    p += l
  }
  if (inWord) store<u32>(scratch + ((<usize>(count++)) << 2), fmix32(h))
  return shingleRuns(scratch, count, n, seed ^ 0x5bd1e995, out)
}

/**
 * MinHash: for each of `groups` × 4 permutations `h(x) = a*x + b mod 2^32`, the minimum
 * over the `n` shingle hashes at `hashes`. `params` holds `groups` v128s of `a` then
 * `groups` v128s of `b`; `out` receives `groups` v128s. Four groups (16 permutations)
 * share one pass over the shingles so that each shingle is loaded once per 16 updates.
 */
export function minhash(hashes: usize, n: u32, params: usize, groups: u32, out: usize): void {
  const bOff = <usize>groups << 4
  const ones = i32x4.splat(-1)
  let g: usize = 0
  const G = <usize>groups
  const end = hashes + (<usize>n << 2)
  for (; g + 4 <= G; g += 4) {
    const pa = params + (g << 4)
    const a0 = v128.load(pa)
    const a1 = v128.load(pa, 16)
    const a2 = v128.load(pa, 32)
    const a3 = v128.load(pa, 48)
    const b0 = v128.load(pa + bOff)
    const b1 = v128.load(pa + bOff, 16)
    const b2 = v128.load(pa + bOff, 32)
    const b3 = v128.load(pa + bOff, 48)
    let m0 = ones
    let m1 = ones
    let m2 = ones
    let m3 = ones
    for (let p = hashes; p < end; p += 4) {
      const x = v128.load32_splat(p)
      m0 = i32x4.min_u(m0, i32x4.add(i32x4.mul(a0, x), b0))
      m1 = i32x4.min_u(m1, i32x4.add(i32x4.mul(a1, x), b1))
      m2 = i32x4.min_u(m2, i32x4.add(i32x4.mul(a2, x), b2))
      m3 = i32x4.min_u(m3, i32x4.add(i32x4.mul(a3, x), b3))
    }
    const po = out + (g << 4)
    v128.store(po, m0)
    v128.store(po, m1, 16)
    v128.store(po, m2, 32)
    v128.store(po, m3, 48)
  }
  for (; g < G; g++) {
    const a0 = v128.load(params + (g << 4))
    const b0 = v128.load(params + bOff + (g << 4))
    let m0 = ones
    for (let p = hashes; p < end; p += 4) {
      const x = v128.load32_splat(p)
      m0 = i32x4.min_u(m0, i32x4.add(i32x4.mul(a0, x), b0))
    }
    v128.store(out + (g << 4), m0)
  }
}
