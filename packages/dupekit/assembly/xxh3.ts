/** @module XXH3-64 and XXH3-128 (reference xxHash 0.8); long inputs in SIMD lanes. */
import { avalanche64, P32_1, P32_2, P32_3, P64_1, P64_2, P64_3, P64_4, P64_5, PRIME_MX1, PRIME_MX2 } from './xxh64'

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
    const lo = load<u64>(ACC + i * 16) ^ load<u64>(s + i * 16)
    r += mulFold64(lo, load<u64>(ACC + i * 16 + 8) ^ load<u64>(s + i * 16 + 8))
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

/** XXH3-64 of `len` bytes at `p`, stored at `out`. */
export function xxh3To(p: usize, len: usize, seedLo: u32, seedHi: u32, out: usize): void {
  store<u64>(out, xxh3(p, len, ((<u64>seedHi) << 32) | seedLo))
}

/** XXH3-128 of `len` bytes at `p`, stored at `out` (low u64, then high). */
export function xxh128To(p: usize, len: usize, seedLo: u32, seedHi: u32, out: usize): void {
  xxh128(p, len, ((<u64>seedHi) << 32) | seedLo, out)
}
