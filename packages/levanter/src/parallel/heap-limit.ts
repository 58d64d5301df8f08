/**
 * @module What a run that outgrows one process's wasm heap is told: the model's size, what it
 * needs of the heap at the least, and the mesh layouts that shard it.
 */
import { isLevanterError, LevanterError } from '../errors.js'
import { WASM_HEAP_MAX_BYTES } from '../kernels/wasm-heap.js'

const GiB = (n: number) => (n / 2 ** 30).toFixed(1)

/**
 * `err` as it should reach a one-process run's caller: an `OUT_OF_MEMORY` of the wasm heap
 * (kernels/wasm-heap.ts) becomes one naming the model's size and the layouts that fit it; any
 * other error is returned as it is.
 */
export function explainOutOfMemory(err: unknown, numParams: number): unknown {
  if (!isLevanterError(err, 'OUT_OF_MEMORY')) return err
  // Parameters and their gradients live on the heap together at the end of the backward pass.
  const least = 8 * numParams
  const why =
    least > WASM_HEAP_MAX_BYTES
      ? `its parameters and their gradients alone need ${GiB(least)} GiB, more than one process's 4 GiB wasm heap ` +
        'holds at any batch size'
      : `its parameters and gradients need ${GiB(least)} GiB and the step's activations the rest of one process's ` +
        '4 GiB wasm heap'
  return new LevanterError(
    'OUT_OF_MEMORY',
    `one process cannot train this model of ${(numParams / 1e6).toFixed(1)}M parameters: ${why} (${err.message}). ` +
      'Shard it over processes: mesh: { data: 2 }, fsdp: true (each member owns half of every parameter and of its ' +
      'AdamW moments, and holds one stage at a time), or mesh: { model: 2 } (tensor parallel)' +
      (least > WASM_HEAP_MAX_BYTES ? '' : '; or lower batchSize, or split it into microbatches'),
    { cause: err },
  )
}
