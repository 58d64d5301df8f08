/** @module Assemble the GEMM's text with wabt (a development dependency: the build script and the tests use it,
 * training does not). */
import { gemmWat } from '../src/kernels/gemm-wat.js'

export async function assembleGemm(build: 'fma' | 'simd'): Promise<Uint8Array> {
  const wabt = await (await import('wabt')).default()
  const mod = wabt.parseWat(`gemm-${build}.wat`, gemmWat(build === 'fma'), { simd: true, relaxed_simd: true })
  try {
    mod.validate()
    return new Uint8Array(mod.toBinary({}).buffer)
  } finally {
    mod.destroy()
  }
}
