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

export { xxh64, xxh64To } from './xxh64'
export { xxh128, xxh128To, xxh3, xxh3To } from './xxh3'
export { charShingles, minhash, wordShingles } from './minhash'

export function heapBase(): usize {
  return __heap_base
}
