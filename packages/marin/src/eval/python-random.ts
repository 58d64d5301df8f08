/**
 * @module CPython's `random.Random` where lm-evaluation-harness depends on it: the Mersenne Twister
 * (MT19937) seeded from an integer as CPython seeds it (`init_by_array` over the seed's 32-bit words),
 * `getrandbits`, `_randbelow` (rejection sampling over `n.bit_length()` bits) and `sample` (CPython
 * 3.11's two algorithms: a shrinking pool when the population is small, a set of taken indices when
 * it is large). The harness draws few-shot examples with `Random(1234).sample(docs, k)`; the same
 * seed and calls give the same indices here (tested against CPython's output).
 */
import { MarinError } from '../errors.js'

const N = 624
const M = 397

/**
 * @example new PythonRandom(1234).sample(10, 3) // the indices CPython's Random(1234).sample(range(10), 3) gives
 */
export class PythonRandom {
  private readonly mt = new Uint32Array(N)
  private mti = N + 1

  /** A non-negative integer seed below 2⁵³, as `random.Random(seed)` (negative seeds use their absolute value). */
  constructor(seed: number) {
    if (!Number.isSafeInteger(seed))
      throw new MarinError('BAD_CONFIG', `random seed ${seed} must be an integer below 2^53`)
    const n = Math.abs(seed)
    const lo = n % 2 ** 32,
      hi = Math.floor(n / 2 ** 32)
    this.initByArray(hi > 0 ? [lo, hi] : [lo])
  }

  private initGenrand(s: number): void {
    const mt = this.mt
    mt[0] = s >>> 0
    for (let i = 1; i < N; i++) mt[i] = (Math.imul(1812433253, mt[i - 1]! ^ (mt[i - 1]! >>> 30)) + i) >>> 0
    this.mti = N
  }

  private initByArray(key: readonly number[]): void {
    const mt = this.mt
    this.initGenrand(19650218)
    let i = 1,
      j = 0
    for (let k = Math.max(N, key.length); k > 0; k--) {
      mt[i] = ((mt[i]! ^ Math.imul(mt[i - 1]! ^ (mt[i - 1]! >>> 30), 1664525)) + key[j]! + j) >>> 0
      i++
      j++
      if (i >= N) {
        mt[0] = mt[N - 1]!
        i = 1
      }
      if (j >= key.length) j = 0
    }
    for (let k = N - 1; k > 0; k--) {
      mt[i] = ((mt[i]! ^ Math.imul(mt[i - 1]! ^ (mt[i - 1]! >>> 30), 1566083941)) - i) >>> 0
      i++
      if (i >= N) {
        mt[0] = mt[N - 1]!
        i = 1
      }
    }
    mt[0] = 0x80000000
  }

  /** The next 32 random bits (CPython's `genrand_uint32`). */
  private next(): number {
    const mt = this.mt
    if (this.mti >= N) {
      let kk = 0
      const mag = (y: number) => (y & 1 ? 0x9908b0df : 0)
      for (; kk < N - M; kk++) {
        const y = (mt[kk]! & 0x80000000) | (mt[kk + 1]! & 0x7fffffff)
        mt[kk] = mt[kk + M]! ^ (y >>> 1) ^ mag(y)
      }
      for (; kk < N - 1; kk++) {
        const y = (mt[kk]! & 0x80000000) | (mt[kk + 1]! & 0x7fffffff)
        mt[kk] = mt[kk + (M - N)]! ^ (y >>> 1) ^ mag(y)
      }
      const y = (mt[N - 1]! & 0x80000000) | (mt[0]! & 0x7fffffff)
      mt[N - 1] = mt[M - 1]! ^ (y >>> 1) ^ mag(y)
      this.mti = 0
    }
    let y = mt[this.mti++]!
    y ^= y >>> 11
    y ^= (y << 7) & 0x9d2c5680
    y ^= (y << 15) & 0xefc60000
    y ^= y >>> 18
    return y >>> 0
  }

  /** `getrandbits(k)` for 1 ≤ k ≤ 32. */
  getrandbits(k: number): number {
    if (!Number.isInteger(k) || k < 1 || k > 32) throw new RangeError(`getrandbits: k must be 1..32, got ${k}`)
    return this.next() >>> (32 - k)
  }

  /** A random integer in [0, n), n ≥ 1 (CPython's `_randbelow_with_getrandbits`). */
  randbelow(n: number): number {
    const k = 32 - Math.clz32(n)
    let r = this.getrandbits(k)
    while (r >= n) r = this.getrandbits(k)
    return r
  }

  /** The indices `Random.sample(range(n), k)` returns, in selection order. */
  sample(n: number, k: number): number[] {
    if (!(k >= 0 && k <= n))
      throw new MarinError('BAD_CONFIG', `cannot sample ${k} from ${n}: sample larger than the population`)
    const result: number[] = new Array<number>(k)
    let setsize = 21
    if (k > 5) setsize += 4 ** Math.ceil(Math.log(k * 3) / Math.log(4))
    if (n <= setsize) {
      const pool = Array.from({ length: n }, (_, i) => i)
      for (let i = 0; i < k; i++) {
        const j = this.randbelow(n - i)
        result[i] = pool[j]!
        pool[j] = pool[n - i - 1]!
      }
    } else {
      const selected = new Set<number>()
      for (let i = 0; i < k; i++) {
        let j = this.randbelow(n)
        while (selected.has(j)) j = this.randbelow(n)
        selected.add(j)
        result[i] = j
      }
    }
    return result
  }
}
