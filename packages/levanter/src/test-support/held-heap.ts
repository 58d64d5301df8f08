/**
 * A preload (`--import`, through `NODE_OPTIONS` so that every process a test starts loads it) that
 * holds this process's wasm heap to `LEVANTER_TEST_WASM_HEAP_MIB` MiB (parallel/heap-limit.ts): the
 * big-model test's processes then behave as ones whose heap is that small, and a model that small
 * heap cannot hold shows what a model 4 GiB cannot hold does, at a fraction of the compute.
 */
import { holdWasmHeapTo } from '../parallel/heap-limit.js'

const mib = process.env.LEVANTER_TEST_WASM_HEAP_MIB
if (mib !== undefined) holdWasmHeapTo(Number(mib) * 2 ** 20)
