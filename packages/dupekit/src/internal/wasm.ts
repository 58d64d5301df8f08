/**
 * @module The kernels instance of this thread and the memory it shares with JavaScript.
 *
 * Compiled once per thread, synchronously (the module is small), so that every
 * public function stays synchronous. Memory above `heapBase()` belongs to the
 * caller of the moment: each public function lays out its own inputs there, calls
 * one kernel and reads the results before returning, so calls never overlap.
 */
import { KERNELS_WASM_BASE64 } from './kernels-wasm.js'

// The workspace compiles without DOM typings, where the WebAssembly globals live;
// these are the few members used here.
type WasmMemory = { readonly buffer: ArrayBuffer; grow(pages: number): number }
/** A compiled WebAssembly module (structured-cloneable to worker threads). */
export type WasmModule = object
type WasmApi = {
  Module: new (bytes: Uint8Array) => WasmModule
  Instance: new (module: WasmModule, imports: object) => { exports: unknown }
}
const WA = (globalThis as unknown as { WebAssembly: WasmApi }).WebAssembly

/** The exports of `assembly/kernels.ts`. Pointers and lengths are byte offsets. */
export type Kernels = {
  memory: WasmMemory
  heapBase(): number
  xxh64(p: number, len: number, seed: bigint): bigint
  xxh3(p: number, len: number, seed: bigint): bigint
  xxh128(p: number, len: number, seed: bigint, out: number): void
  xxh64To(p: number, len: number, seedLo: number, seedHi: number, out: number): void
  xxh3To(p: number, len: number, seedLo: number, seedHi: number, out: number): void
  xxh128To(p: number, len: number, seedLo: number, seedHi: number, out: number): void
  charShingles(text: number, len: number, n: number, seed: number, scratch: number, out: number, flags: number): number
  wordShingles(text: number, len: number, n: number, seed: number, scratch: number, out: number, flags: number): number
  minhash(hashes: number, n: number, params: number, groups: number, out: number): void
}

let compiled: WasmModule | undefined

/** The compiled module; it can be posted to worker threads, which then skip compiling. */
export function kernelsModule(): WasmModule {
  compiled ??= new WA.Module(Buffer.from(KERNELS_WASM_BASE64, 'base64'))
  return compiled
}

/** A view of the kernels' memory that follows growth (growing detaches old views). */
export class KernelMemory {
  readonly k: Kernels
  /** First byte free for callers, 16-aligned. */
  readonly base: number
  private buf: ArrayBuffer
  u8: Uint8Array
  u32: Uint32Array

  constructor(k: Kernels) {
    this.k = k
    this.base = (k.heapBase() + 15) & ~15
    this.buf = k.memory.buffer
    this.u8 = new Uint8Array(this.buf)
    this.u32 = new Uint32Array(this.buf)
  }

  /** Makes sure bytes [0, end) exist; refreshes the views after growth. */
  ensure(end: number): void {
    const have = this.k.memory.buffer.byteLength
    if (end > have) {
      const pages = Math.ceil((end - have) / 65536)
      // Grow by at least half again, so that a growing batch does not grow on every call.
      this.k.memory.grow(Math.max(pages, Math.ceil(have / 65536 / 2)))
    }
    if (this.buf !== this.k.memory.buffer) {
      this.buf = this.k.memory.buffer
      this.u8 = new Uint8Array(this.buf)
      this.u32 = new Uint32Array(this.buf)
    }
  }

  get buffer(): ArrayBuffer {
    return this.buf
  }

  /**
   * What MinHash permutations sit at `base` (so that consecutive signatures skip
   * rewriting them); anyone else writing there must go through `scratch()`.
   */
  resident: unknown = undefined

  /** The start of the caller's area, for callers that do not keep data resident. */
  scratch(): number {
    this.resident = undefined
    return this.base
  }
}

let mem: KernelMemory | undefined

/** This thread's kernels and memory. */
export function kernels(): KernelMemory {
  if (mem === undefined) {
    const instance = new WA.Instance(kernelsModule(), { env: { abort: kernelAbort } })
    mem = new KernelMemory(instance.exports as unknown as Kernels)
  }
  return mem
}

function kernelAbort(): never {
  // The kernels are compiled with --noAssert and never allocate; reaching here is a bug.
  throw new Error('dupekit kernels aborted')
}
