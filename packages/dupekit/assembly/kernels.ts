/**
 * @module WebAssembly kernels of @marin/dupekit (AssemblyScript source).
 *
 * Compiled by `assembly/build.ts` into `src/internal/kernels-wasm.ts` (the binary,
 * base64). The JavaScript side owns all memory above `heapBase()`: it writes inputs
 * there, calls a kernel with pointers, and reads the results back. Nothing here
 * allocates, so the module runs with the stub runtime.
 *
 * - xxh64, XXH3-64 and XXH3-128: byte-exact with the reference xxHash 0.8 (tests
 *   check the reference sanity vectors), in native 64-bit integer math.
 * - MinHash: shingle hashing (code-point or word n-grams) and the min over
 *   `a*x + b mod 2^32` permutations, 16 permutations at a time in SIMD lanes.
 */

// ---------------------------------------------------------------- xxh64

const P32_1: u64 = 0x9e3779b1
const P32_2: u64 = 0x85ebca77
const P32_3: u64 = 0xc2b2ae3d
const P64_1: u64 = 0x9e3779b185ebca87
const P64_2: u64 = 0xc2b2ae3d27d4eb4f
const P64_3: u64 = 0x165667b19e3779f9
const P64_4: u64 = 0x85ebca77c2b2ae63
const P64_5: u64 = 0x27d4eb2f165667c5
const PRIME_MX1: u64 = 0x165667919e3779f9
const PRIME_MX2: u64 = 0x9fb21c651e98df25

export function heapBase(): usize {
  return __heap_base
}

@inline function round64(acc: u64, input: u64): u64 {
  acc += input * P64_2
  acc = rotl<u64>(acc, 31)
  return acc * P64_1
}

@inline function mergeRound64(acc: u64, val: u64): u64 {
  acc ^= round64(0, val)
  return acc * P64_1 + P64_4
}

@inline function avalanche64(h: u64): u64 {
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

// ---------------------------------------------------------------- XXH3

const SECRET_SIZE: usize = 192
const K_SECRET = memory.data<u8>([
  0xb8, 0xfe, 0x6c, 0x39, 0x23, 0xa4, 0x4b, 0xbe, 0x7c, 0x01, 0x81, 0x2c, 0xf7, 0x21, 0xad, 0x1c,
  0xde, 0xd4, 0x6d, 0xe9, 0x83, 0x90, 0x97, 0xdb, 0x72, 0x40, 0xa4, 0xa4, 0xb7, 0xb3, 0x67, 0x1f,
  0xcb, 0x79, 0xe6, 0x4e, 0xcc, 0xc0, 0xe5, 0x78, 0x82, 0x5a, 0xd0, 0x7d, 0xcc, 0xff, 0x72, 0x21,
  0xb8, 0x08, 0x46, 0x74, 0xf7, 0x43, 0x24, 0x8e, 0xe0, 0x35, 0x90, 0xe6, 0x81, 0x3a, 0x26, 0x4c,
  0x3c, 0x28, 0x52, 0xbb, 0x91, 0xc3, 0x00, 0xcb, 0x88, 0xd0, 0x65, 0x8b, 0x1b, 0x53, 0x2e, 0xa3,
  0x71, 0x64, 0x48, 0x97, 0xa2, 0x0d, 0xf9, 0x4e, 0x38, 0x19, 0xef, 0x46, 0xa9, 0xde, 0xac, 0xd8,
  0xa8, 0xfa, 0x76, 0x3f, 0xe3, 0x9c, 0x34, 0x3f, 0xf9, 0xdc, 0xbb, 0xc7, 0xc7, 0x0b, 0x4f, 0x1d,
  0x8a, 0x51, 0xe0, 0x4b, 0xcd, 0xb4, 0x59, 0x31, 0xc8, 0x9f, 0x7e, 0xc9, 0xd9, 0x78, 0x73, 0x64,
  0xea, 0xc5, 0xac, 0x83, 0x34, 0xd3, 0xeb, 0xc3, 0xc5, 0x81, 0xa0, 0xff, 0xfa, 0x13, 0x63, 0xeb,
  0x17, 0x0d, 0xdd, 0x51, 0xb7, 0xf0, 0xda, 0x49, 0xd3, 0x16, 0x55, 0x26, 0x29, 0xd4, 0x68, 0x9e,
  0x2b, 0x16, 0xbe, 0x58, 0x7d, 0x47, 0xa1, 0xfc, 0x8f, 0xf8, 0xb8, 0xd1, 0x7a, 0xd0, 0x31, 0xce,
  0x45, 0xcb, 0x3a, 0x8f, 0x95, 0x16, 0x04, 0x28, 0xaf, 0xd7, 0xfb, 0xca, 0xbb, 0x4b, 0x40, 0x7e,
])
// The seeded long-input path hashes with a secret derived from the seed.
const CUSTOM_SECRET = memory.data(192, 16)
// Accumulators of the long-input path.
const ACC = memory.data(64, 16)

// High half of the last mul128 (wasm has no 64×64→128 multiply).
let mulHi: u64 = 0

@inline function mul128(a: u64, b: u64): u64 {
  const aLo = a & 0xffffffff
  const aHi = a >> 32
  const bLo = b & 0xffffffff
  const bHi = b >> 32
  const loLo = aLo * bLo
  const hiLo = aHi * bLo
  const loHi = aLo * bHi
  const hiHi = aHi * bHi
  const cross = (loLo >> 32) + (hiLo & 0xffffffff) + loHi
  mulHi = (hiLo >> 32) + (cross >> 32) + hiHi
  return (cross << 32) | (loLo & 0xffffffff)
}

@inline function mulFold64(a: u64, b: u64): u64 {
  const lo = mul128(a, b)
  return lo ^ mulHi
}

@inline function xxh3Avalanche(h: u64): u64 {
  h ^= h >> 37
  h *= PRIME_MX1
  h ^= h >> 32
  return h
}

@inline function rrmxmx(h: u64, len: u64): u64 {
  h ^= rotl<u64>(h, 49) ^ rotl<u64>(h, 24)
  h *= PRIME_MX2
  h ^= (h >> 35) + len
  h *= PRIME_MX2
  h ^= h >> 28
  return h
}

@inline function mix16B(p: usize, s: usize, seed: u64): u64 {
  return mulFold64(load<u64>(p) ^ (load<u64>(s) + seed), load<u64>(p, 8) ^ (load<u64>(s, 8) - seed))
}

// Long inputs: the eight 64-bit accumulators live in four SIMD registers (lanes 2j, 2j+1).
// Per 16 input bytes: acc += swap(data) + lo32(data^key) * hi32(data^key), lane-wise.
@inline function accLanes(acc: v128, p: usize, s: usize): v128 {
  const data = v128.load(p)
  const key = v128.xor(data, v128.load(s))
  const lo = i32x4.shuffle(key, key, 0, 2, 0, 2)
  const hi = i32x4.shuffle(key, key, 1, 3, 1, 3)
  const prod = i64x2.extmul_low_i32x4_u(lo, hi)
  return i64x2.add(i64x2.add(acc, i64x2.shuffle(data, data, 1, 0)), prod)
}

@inline function scrambleLanes(acc: v128, s: usize): v128 {
  let v = v128.xor(acc, i64x2.shr_u(acc, 47))
  v = v128.xor(v, v128.load(s))
  return i64x2.mul(v, i64x2.splat(P32_1))
}

function mergeAccs(s: usize, start: u64): u64 {
  let r = start
  for (let i: usize = 0; i < 4; i++) {
    r += mulFold64(load<u64>(ACC + i * 16) ^ load<u64>(s + i * 16), load<u64>(ACC + i * 16 + 8) ^ load<u64>(s + i * 16 + 8))
  }
  return xxh3Avalanche(r)
}

/** Runs the long-input accumulation (len > 240) into ACC; returns the secret used. */
function hashLongInto(p: usize, len: usize, seed: u64): usize {
  let secret = K_SECRET
  if (seed != 0) {
    for (let i: usize = 0; i < SECRET_SIZE; i += 16) {
      store<u64>(CUSTOM_SECRET + i, load<u64>(K_SECRET + i) + seed)
      store<u64>(CUSTOM_SECRET + i + 8, load<u64>(K_SECRET + i + 8) - seed)
    }
    secret = CUSTOM_SECRET
  }
  let a0 = i64x2(<i64>P32_3, <i64>P64_1)
  let a1 = i64x2(<i64>P64_2, <i64>P64_3)
  let a2 = i64x2(<i64>P64_4, <i64>P32_2)
  let a3 = i64x2(<i64>P64_5, <i64>P32_1)
  const stripesPerBlock: usize = (SECRET_SIZE - 64) / 8
  const blockLen: usize = 64 * stripesPerBlock
  const blocks = (len - 1) / blockLen
  const last = secret + SECRET_SIZE - 64
  for (let n: usize = 0; n < blocks; n++) {
    const b = p + n * blockLen
    for (let st: usize = 0; st < stripesPerBlock; st++) {
      const q = b + st * 64
      const k = secret + st * 8
      a0 = accLanes(a0, q, k)
      a1 = accLanes(a1, q + 16, k + 16)
      a2 = accLanes(a2, q + 32, k + 32)
      a3 = accLanes(a3, q + 48, k + 48)
    }
    a0 = scrambleLanes(a0, last)
    a1 = scrambleLanes(a1, last + 16)
    a2 = scrambleLanes(a2, last + 32)
    a3 = scrambleLanes(a3, last + 48)
  }
  const stripes = (len - 1 - blockLen * blocks) / 64
  const b = p + blocks * blockLen
  for (let st: usize = 0; st < stripes; st++) {
    const q = b + st * 64
    const k = secret + st * 8
    a0 = accLanes(a0, q, k)
    a1 = accLanes(a1, q + 16, k + 16)
    a2 = accLanes(a2, q + 32, k + 32)
    a3 = accLanes(a3, q + 48, k + 48)
  }
  const q = p + len - 64
  const k = secret + SECRET_SIZE - 64 - 7
  a0 = accLanes(a0, q, k)
  a1 = accLanes(a1, q + 16, k + 16)
  a2 = accLanes(a2, q + 32, k + 32)
  a3 = accLanes(a3, q + 48, k + 48)
  v128.store(ACC, a0)
  v128.store(ACC, a1, 16)
  v128.store(ACC, a2, 32)
  v128.store(ACC, a3, 48)
  return secret
}

/** XXH3-64 of `len` bytes at `p`. */
export function xxh3(p: usize, len: usize, seed: u64): u64 {
  const s = K_SECRET
  if (len <= 16) {
    if (len > 8) {
      const bitflip1 = (load<u64>(s, 24) ^ load<u64>(s, 32)) + seed
      const bitflip2 = (load<u64>(s, 40) ^ load<u64>(s, 48)) - seed
      const lo = load<u64>(p) ^ bitflip1
      const hi = load<u64>(p + len - 8) ^ bitflip2
      const acc = <u64>len + bswap<u64>(lo) + hi + mulFold64(lo, hi)
      return xxh3Avalanche(acc)
    }
    if (len >= 4) {
      const sd = seed ^ ((<u64>bswap<u32>(<u32>seed)) << 32)
      const in1 = <u64>load<u32>(p)
      const in2 = <u64>load<u32>(p + len - 4)
      const bitflip = (load<u64>(s, 8) ^ load<u64>(s, 16)) - sd
      const keyed = (in2 + (in1 << 32)) ^ bitflip
      return rrmxmx(keyed, <u64>len)
    }
    if (len > 0) {
      const c1 = <u32>load<u8>(p)
      const c2 = <u32>load<u8>(p + (len >> 1))
      const c3 = <u32>load<u8>(p + len - 1)
      const combined = (c1 << 16) | (c2 << 24) | c3 | (<u32>len << 8)
      const bitflip = (<u64>(load<u32>(s) ^ load<u32>(s, 4))) + seed
      return avalanche64((<u64>combined) ^ bitflip)
    }
    return avalanche64(seed ^ load<u64>(s, 56) ^ load<u64>(s, 64))
  }
  if (len <= 128) {
    let acc = <u64>len * P64_1
    if (len > 32) {
      if (len > 64) {
        if (len > 96) {
          acc += mix16B(p + 48, s + 96, seed)
          acc += mix16B(p + len - 64, s + 112, seed)
        }
        acc += mix16B(p + 32, s + 64, seed)
        acc += mix16B(p + len - 48, s + 80, seed)
      }
      acc += mix16B(p + 16, s + 32, seed)
      acc += mix16B(p + len - 32, s + 48, seed)
    }
    acc += mix16B(p, s, seed)
    acc += mix16B(p + len - 16, s + 16, seed)
    return xxh3Avalanche(acc)
  }
  if (len <= 240) {
    let acc = <u64>len * P64_1
    const rounds = len / 16
    for (let i: usize = 0; i < 8; i++) acc += mix16B(p + 16 * i, s + 16 * i, seed)
    acc = xxh3Avalanche(acc)
    for (let i: usize = 8; i < rounds; i++) acc += mix16B(p + 16 * i, s + 16 * (i - 8) + 3, seed)
    acc += mix16B(p + len - 16, s + 136 - 17, seed)
    return xxh3Avalanche(acc)
  }
  const secret = hashLongInto(p, len, seed)
  return mergeAccs(secret + 11, <u64>len * P64_1)
}

// 128-bit results are written as two little-endian u64s: low, then high.

let accLo: u64 = 0
let accHi: u64 = 0

@inline function mix32B(in1: usize, in2: usize, s: usize, seed: u64): void {
  accLo += mix16B(in1, s, seed)
  accLo ^= load<u64>(in2) + load<u64>(in2, 8)
  accHi += mix16B(in2, s + 16, seed)
  accHi ^= load<u64>(in1) + load<u64>(in1, 8)
}

/** XXH3-128 of `len` bytes at `p`, written to `out` (16 bytes). */
export function xxh128(p: usize, len: usize, seed: u64, out: usize): void {
  const s = K_SECRET
  let lo: u64
  let hi: u64
  if (len <= 16) {
    if (len > 8) {
      const bitflipl = (load<u64>(s, 32) ^ load<u64>(s, 40)) - seed
      const bitfliph = (load<u64>(s, 48) ^ load<u64>(s, 56)) + seed
      const inLo = load<u64>(p)
      let inHi = load<u64>(p + len - 8)
      let mLo = mul128(inLo ^ inHi ^ bitflipl, P64_1)
      let mHi = mulHi
      mLo += (<u64>len - 1) << 54
      inHi ^= bitfliph
      mHi += inHi + (inHi & 0xffffffff) * (P32_2 - 1)
      mLo ^= bswap<u64>(mHi)
      lo = mul128(mLo, P64_2)
      hi = mulHi + mHi * P64_2
      lo = xxh3Avalanche(lo)
      hi = xxh3Avalanche(hi)
    } else if (len >= 4) {
      const sd = seed ^ ((<u64>bswap<u32>(<u32>seed)) << 32)
      const inLo = <u64>load<u32>(p)
      const inHi = <u64>load<u32>(p + len - 4)
      const input64 = inLo + (inHi << 32)
      const bitflip = (load<u64>(s, 16) ^ load<u64>(s, 24)) + sd
      const keyed = input64 ^ bitflip
      let mLo = mul128(keyed, P64_1 + ((<u64>len) << 2))
      let mHi = mulHi
      mHi += mLo << 1
      mLo ^= mHi >> 3
      mLo ^= mLo >> 35
      mLo *= PRIME_MX2
      mLo ^= mLo >> 28
      lo = mLo
      hi = xxh3Avalanche(mHi)
    } else if (len > 0) {
      const c1 = <u32>load<u8>(p)
      const c2 = <u32>load<u8>(p + (len >> 1))
      const c3 = <u32>load<u8>(p + len - 1)
      const combinedl = (c1 << 16) | (c2 << 24) | c3 | (<u32>len << 8)
      const combinedh = rotl<u32>(bswap<u32>(combinedl), 13)
      const bitflipl = (<u64>(load<u32>(s) ^ load<u32>(s, 4))) + seed
      const bitfliph = (<u64>(load<u32>(s, 8) ^ load<u32>(s, 12))) - seed
      lo = avalanche64((<u64>combinedl) ^ bitflipl)
      hi = avalanche64((<u64>combinedh) ^ bitfliph)
    } else {
      lo = avalanche64(seed ^ load<u64>(s, 64) ^ load<u64>(s, 72))
      hi = avalanche64(seed ^ load<u64>(s, 80) ^ load<u64>(s, 88))
    }
  } else if (len <= 240) {
    accLo = <u64>len * P64_1
    accHi = 0
    if (len <= 128) {
      if (len > 32) {
        if (len > 64) {
          if (len > 96) mix32B(p + 48, p + len - 64, s + 96, seed)
          mix32B(p + 32, p + len - 48, s + 64, seed)
        }
        mix32B(p + 16, p + len - 32, s + 32, seed)
      }
      mix32B(p, p + len - 16, s, seed)
    } else {
      const rounds = len / 32
      for (let i: usize = 0; i < 4; i++) mix32B(p + 32 * i, p + 32 * i + 16, s + 32 * i, seed)
      accLo = xxh3Avalanche(accLo)
      accHi = xxh3Avalanche(accHi)
      for (let i: usize = 4; i < rounds; i++) mix32B(p + 32 * i, p + 32 * i + 16, s + 3 + 32 * (i - 4), seed)
      mix32B(p + len - 16, p + len - 32, s + 136 - 17 - 16, 0 - seed)
    }
    lo = accLo + accHi
    hi = accLo * P64_1 + accHi * P64_4 + (<u64>len - seed) * P64_2
    lo = xxh3Avalanche(lo)
    hi = 0 - xxh3Avalanche(hi)
  } else {
    const secret = hashLongInto(p, len, seed)
    lo = mergeAccs(secret + 11, <u64>len * P64_1)
    hi = mergeAccs(secret + SECRET_SIZE - 64 - 11, ~(<u64>len * P64_2))
  }
  store<u64>(out, lo)
  store<u64>(out, hi, 8)
}

// Per-document entry points for batches: the seed comes as two u32 halves and the
// result goes to memory, so no BigInt is made or converted per call.

/** XXH64 of `len` bytes at `p`, stored at `out`. */
export function xxh64To(p: usize, len: usize, seedLo: u32, seedHi: u32, out: usize): void {
  store<u64>(out, xxh64(p, len, ((<u64>seedHi) << 32) | seedLo))
}

/** XXH3-64 of `len` bytes at `p`, stored at `out`. */
export function xxh3To(p: usize, len: usize, seedLo: u32, seedHi: u32, out: usize): void {
  store<u64>(out, xxh3(p, len, ((<u64>seedHi) << 32) | seedLo))
}

/** XXH3-128 of `len` bytes at `p`, stored at `out` (low u64, then high). */
export function xxh128To(p: usize, len: usize, seedLo: u32, seedHi: u32, out: usize): void {
  xxh128(p, len, ((<u64>seedHi) << 32) | seedLo, out)
}

// ---------------------------------------------------------------- MinHash

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
    return ((b0 & 0x07) << 18) | ((<u32>load<u8>(p, 1) & 0x3f) << 12) | ((<u32>load<u8>(p, 2) & 0x3f) << 6) | (<u32>load<u8>(p, 3) & 0x3f)
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
