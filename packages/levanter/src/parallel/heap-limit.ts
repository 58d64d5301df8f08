/**
 * @module What a run that outgrows one process's wasm heap is told: the model's size, what it
 * needs of the heap at the least, and the mesh layouts that shard it. Also a lower limit a process
 * can hold its wasm heaps to ({@link holdWasmHeapTo}), so that a model a few times smaller than
 * 4 GiB shows the same overflow (the big-model test does, in every process it starts).
 */
import { isLevanterError, LevanterError } from '../errors.js'
import { noteWasmHeapLimit, WASM_HEAP_MAX_BYTES } from '../kernels/wasm-heap.js'

/** A size as the messages name it: "4 GiB", "4.1 GiB", "145 MiB". */
const size = (n: number) =>
  n >= 2 ** 30 ? `${Number((n / 2 ** 30).toFixed(1))} GiB` : `${(n / 2 ** 20).toFixed(0)} MiB`
const PAGE = 65536
/** The part of `WebAssembly.Memory` this module patches (the project's type check has no WebAssembly types). */
type MemoryProto = { grow(this: { buffer: ArrayBuffer }, delta: number): number }
const Memory = (globalThis as unknown as { WebAssembly: { Memory: { prototype: MemoryProto } } }).WebAssembly.Memory
let held: number | undefined

/** Most this process's wasm heap can hold: 4 GiB, or the limit {@link holdWasmHeapTo} set. */
export function wasmHeapLimit(): number {
  return held ?? WASM_HEAP_MAX_BYTES
}

/**
 * Holds every wasm memory of this process (the wasm backend's heap among them) to `bytes`: a
 * `grow` past it fails as growing past 4 GiB does, so the backend's allocator hands back 0 and the
 * heap guard (kernels/wasm-heap.ts) raises `OUT_OF_MEMORY`. For a process that should behave as one
 * with less memory; call it before the heap grows past `bytes`. Once per process.
 */
export function holdWasmHeapTo(bytes: number): void {
  if (!Number.isInteger(bytes) || bytes % PAGE !== 0 || bytes <= 0 || bytes > WASM_HEAP_MAX_BYTES)
    throw new LevanterError(
      'BAD_CONFIG',
      `wasm heap limit ${bytes}: give a positive multiple of 64 KiB (a wasm page) up to 4 GiB`,
    )
  if (held !== undefined) throw new LevanterError('BAD_CONFIG', `the wasm heap is already held to ${size(held)}`)
  held = bytes
  noteWasmHeapLimit(bytes)
  const grow = Memory.prototype.grow
  Memory.prototype.grow = function (this: { buffer: ArrayBuffer }, delta: number): number {
    if (this.buffer.byteLength + delta * PAGE > bytes)
      throw new RangeError(`WebAssembly.Memory.grow(): held to ${size(bytes)} (holdWasmHeapTo)`)
    return grow.call(this, delta)
  }
}

/**
 * `err` as it should reach a one-process run's caller: an `OUT_OF_MEMORY` of the wasm heap
 * (kernels/wasm-heap.ts) becomes one naming the model's size and the layouts that fit it; any
 * other error is returned as it is.
 */
export function explainOutOfMemory(err: unknown, numParams: number): unknown {
  if (!isLevanterError(err, 'OUT_OF_MEMORY')) return err
  // Parameters and their gradients live on the heap together at the end of the backward pass.
  const least = 8 * numParams
  const limit = wasmHeapLimit()
  const heap = `${size(limit)} wasm heap`
  const why =
    least > limit
      ? `its parameters and their gradients alone need ${size(least)}, more than one process's ${heap} ` +
        'holds at any batch size'
      : `its parameters and gradients need ${size(least)} and the step's activations the rest of one process's ` + heap
  return new LevanterError(
    'OUT_OF_MEMORY',
    `one process cannot train this model of ${(numParams / 1e6).toFixed(1)}M parameters: ${why} (${err.message}). ` +
      'Shard it over processes: mesh: { data: 2 }, fsdp: true (each member owns half of every parameter and of its ' +
      'AdamW moments, and holds one stage at a time), or mesh: { model: 2 } (tensor parallel)' +
      (least > limit ? '' : '; or lower batchSize, or split it into microbatches'),
    { cause: err },
  )
}
