/**
 * Assemble levanter's GEMM (src/kernels/gemm-wat.ts) into src/kernels/gemm-{fma,simd}.wasm.
 * Run after changing the generator: `pnpm --filter @marin/levanter build:gemm`. The tests fail
 * while the committed bytes differ from what this writes.
 */
import { writeFileSync } from 'node:fs'
import { assembleGemm } from './gemm-assemble.js'
import { GEMM_BUILDS } from '../src/kernels/wasm-gemm.js'

for (const build of GEMM_BUILDS) {
  const bytes = await assembleGemm(build)
  const file = new URL(`../src/kernels/gemm-${build}.wasm`, import.meta.url)
  writeFileSync(file, bytes)
  console.log(`${file.pathname}: ${bytes.length} bytes`)
}
