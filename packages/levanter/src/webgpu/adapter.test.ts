/**
 * How adapters are classified for the default backend selection: descriptions a GPU, a software
 * rasterizer and a CPU-type (fallback) adapter give, injected; the real probe on this machine.
 */
import { expect, test } from 'vitest'
import { describeAdapter, hardwareAdapter, probeAdapter, swiftShaderAdapter } from './adapter.js'

const H200 = { vendor: 'nvidia', architecture: 'hopper', device: '0x2335', description: 'NVIDIA H200' }

test('a GPU is hardware; SwiftShader, llvmpipe/lavapipe and fallback (CPU-type) adapters are software', () => {
  expect(describeAdapter({ ...H200, isFallbackAdapter: false })).toEqual({ ...H200, software: false })
  expect(describeAdapter(H200).software).toBe(false) // a Dawn without isFallbackAdapter
  const ss = { vendor: 'google', architecture: 'swiftshader', device: 'swiftshader-device-subzero-' }
  expect(describeAdapter({ ...ss, description: 'SwiftShader driver 5.0.0', isFallbackAdapter: false }).software).toBe(
    true,
  )
  const lavapipe = {
    vendor: 'mesa',
    architecture: '',
    device: '0x0000',
    description: 'llvmpipe (LLVM 15.0.6, 256 bits)',
  }
  expect(describeAdapter(lavapipe).software).toBe(true)
  expect(describeAdapter({ ...H200, description: 'a CPU adapter', isFallbackAdapter: true }).software).toBe(true)
})

test('hardwareAdapter takes a probed GPU and refuses a software adapter, whatever its device', async () => {
  // the real SwiftShader device, described once as itself and once as a GPU would be
  const ss = (await swiftShaderAdapter())!
  const asItself = { gpu: ss.gpu, adapter: ss.adapter, description: ss.adapter.info }
  expect(await hardwareAdapter(async () => asItself)).toBeUndefined()
  const asGpu = await hardwareAdapter(async () => ({ ...asItself, description: { ...H200, isFallbackAdapter: false } }))
  expect(asGpu?.info).toEqual({ ...H200, software: false })
  expect(asGpu?.adapter).toBe(ss.adapter)
  expect(await hardwareAdapter(async () => undefined)).toBeUndefined()
})

test('the probe on this machine: no adapter, or a GPU that hardwareAdapter names as hardware', async () => {
  const p = await probeAdapter()
  const hw = await hardwareAdapter()
  if (!p) expect(hw).toBeUndefined()
  else expect(hw === undefined).toBe(describeAdapter(p.description).software)
}, 60_000)
