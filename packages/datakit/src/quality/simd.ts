/**
 * @module The classifier's hot loops in WebAssembly SIMD: the output rows' dot products with the
 * hidden vector (`dots`) and the rank-one update of the output rows with the gradient they give
 * (`rank1`), four floats per instruction, in float32 as fastText computes them. The module is
 * `simd.wat` in this folder, assembled by wabt's `wat2wasm` (1.0.39, SIMD on by default) into the
 * bytes below. Each classifier gets its own instance, whose memory holds its output matrix, hidden
 * vector, gradient and per-label scores; `simdKernels` returns `undefined` (the caller keeps its
 * plain JavaScript loops) when `dim` is not a multiple of 4 or the runtime lacks WebAssembly SIMD.
 */

const WASM =
  'AGFzbQEAAAABEgJgBX9/f39/AGAGf39/f39/AAMDAgABBQMBAAEHGQMGbWVtb3J5AgAEZG90cwAABXJhbmsxAAEKqAUCigQDBH8F' +
  'ewN/IANBAnQhByAEIAJBAnRqIQUgBCACQXxxQQJ0aiEGAkADQCAEIAZPDQH9DAAAAAAAAAAAAAAAAAAAAAAhCf0MAAAAAAAAAAAA' +
  'AAAAAAAAACEK/QwAAAAAAAAAAAAAAAAAAAAAIQv9DAAAAAAAAAAAAAAAAAAAAAAhDCAAIAdqIQ4gDiAHaiEPIA8gB2ohEEEAIQgD' +
  'QCABIAhq/QAEACENIAkgACAIav0ABAAgDf3mAf3kASEJIAogDiAIav0ABAAgDf3mAf3kASEKIAsgDyAIav0ABAAgDf3mAf3kASEL' +
  'IAwgECAIav0ABAAgDf3mAf3kASEMIAhBEGohCCAIIAdJDQALIAQgCf0fACAJ/R8BkiAJ/R8CIAn9HwOSkjgCACAEIAr9HwAgCv0f' +
  'AZIgCv0fAiAK/R8DkpI4AgQgBCAL/R8AIAv9HwGSIAv9HwIgC/0fA5KSOAIIIAQgDP0fACAM/R8BkiAM/R8CIAz9HwOSkjgCDCAQ' +
  'IAdqIQAgBEEQaiEEDAALCwJAA0AgBCAFTw0B/QwAAAAAAAAAAAAAAAAAAAAAIQlBACEIA0AgCSAAIAhq/QAEACABIAhq/QAEAP3m' +
  'Af3kASEJIAhBEGohCCAIIAdJDQALIAQgCf0fACAJ/R8BkiAJ/R8CIAn9HwOSkjgCACAAIAdqIQAgBEEEaiEEDAALCwuZAQMDfwJ7' +
  'An8gBUECdCEHIAMgBEECdGohBgJAA0AgAyAGTw0BIAMqAgD9EyEJQQAhCANAIAAgCGohCyACIAhqIQwgC/0ABAAhCiAMIAz9AAQA' +
  'IAkgCv3mAf3kAf0LBAAgCyAKIAkgASAIav0ABAD95gH95AH9CwQAIAhBEGohCCAIIAdJDQALIAAgB2ohACADQQRqIQMMAAsLCw=='

// The workspace compiles without DOM typings, where the WebAssembly globals live; these are the
// few members used here.
type WasmModule = object
type WasmApi = {
  validate(bytes: Uint8Array): boolean
  Module: new (bytes: Uint8Array) => WasmModule
  Instance: new (module: WasmModule) => { exports: Record<string, unknown> }
}
type WasmMemory = { readonly buffer: ArrayBuffer; grow(pages: number): number }
const WA = (globalThis as unknown as { WebAssembly?: WasmApi }).WebAssembly

let compiled: WasmModule | null | undefined

function simdModule(): WasmModule | null {
  if (compiled === undefined) {
    const bytes = Buffer.from(WASM, 'base64')
    compiled = WA?.validate(bytes) ? new WA.Module(bytes) : null
  }
  return compiled
}

/** One classifier's kernels and the float32 views of the memory they work on. */
export type SimdKernels = {
  /** `nlabels × dim`: the classifier's output matrix lives here. */
  readonly output: Float32Array
  readonly hidden: Float32Array
  readonly grad: Float32Array
  /** `nlabels`: dot products after `dots`; the per-label step sizes before `rank1`. */
  readonly scores: Float32Array
  /** `scores[i]` = output row `i` · `hidden`. */
  dots(): void
  /** For each label: `grad += scores[i] × row i`, then `row i += scores[i] × hidden`. */
  rank1(): void
}

/** Kernels for `nlabels` rows of `dim` floats, or `undefined` where they do not apply. */
export function simdKernels(nlabels: number, dim: number): SimdKernels | undefined {
  const mod = dim % 4 === 0 ? simdModule() : null
  if (!mod) return undefined
  const floats = nlabels * dim + 2 * dim + nlabels
  const instance = new WA!.Instance(mod)
  const memory = instance.exports.memory as WasmMemory
  const pages = Math.ceil((floats * 4) / 65536)
  if (pages > 1) memory.grow(pages - 1)
  const buf = memory.buffer
  const out = 0
  const hid = nlabels * dim * 4
  const grad = hid + dim * 4
  const scores = grad + dim * 4
  const dots = instance.exports.dots as (o: number, h: number, n: number, d: number, s: number) => void
  const rank1 = instance.exports.rank1 as (o: number, h: number, g: number, a: number, n: number, d: number) => void
  return {
    output: new Float32Array(buf, out, nlabels * dim),
    hidden: new Float32Array(buf, hid, dim),
    grad: new Float32Array(buf, grad, dim),
    scores: new Float32Array(buf, scores, nlabels),
    dots: () => dots(out, hid, nlabels, dim, scores),
    rank1: () => rank1(out, hid, grad, scores, nlabels, dim),
  }
}
