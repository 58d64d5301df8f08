/**
 * The device check's mesh case judges what it found without a GPU: members off the driver's adapter
 * are named, and a case passes only with every step run, weights compared and each error within 1e-4
 * (a missing, infinite or NaN error fails it). The case itself runs in src/webgpu/device-check.test.ts.
 */
import { expect, test } from 'vitest'
import type { BackendInfo } from '../src/backend.js'
import { MESH_STEPS, maxAbs, memberOffDriver, meshPasses } from './device-mesh-check.js'

const gpu = (description: string, software = false): BackendInfo => ({
  name: 'webgpu',
  threads: 0,
  simd: false,
  adapter: { vendor: 'nvidia', architecture: 'hopper', device: '0x2335', description, software },
})
const H200 = gpu('NVIDIA H200')

test('a member on another adapter, off webgpu or missing is named; members on the driver adapter pass', () => {
  expect(memberOffDriver([H200, H200], H200)).toBeUndefined()
  expect(memberOffDriver([H200, gpu('SwiftShader', true)], H200)).toBe(
    "member 1 computes on webgpu SwiftShader (0x2335, software), not on the driver's webgpu NVIDIA H200 (0x2335)",
  )
  expect(memberOffDriver([{ name: 'wasm', threads: 4, simd: true }, H200], H200)).toMatch(
    /^member 0 computes on wasm \(no adapter\), not on the driver's webgpu NVIDIA H200/,
  )
  expect(memberOffDriver([], H200)).toBe('no member answered')
})

test('a case passes only when every step and weight was compared within 1e-4', () => {
  const good = { steps: MESH_STEPS, maxLossErr: 2e-7, maxGradNormErr: 1e-7, maxWeightErr: 9e-6, weightsCompared: 16 }
  expect(meshPasses(good)).toBe(true)
  expect(meshPasses({ ...good, maxWeightErr: 2e-4 })).toBe(false)
  expect(meshPasses({ ...good, maxLossErr: Number.NaN })).toBe(false)
  expect(meshPasses({ ...good, maxGradNormErr: Infinity })).toBe(false)
  expect(meshPasses({ ...good, steps: MESH_STEPS - 1 })).toBe(false)
  expect(meshPasses({ ...good, weightsCompared: 0 })).toBe(false)
  expect(meshPasses({ ...good, error: 'actor MeshReplica-1/1 died' })).toBe(false)
})

test('maxAbs: a NaN anywhere or a length mismatch is Infinity', () => {
  expect(maxAbs([1, 2, 3], [1, 2.5, 3])).toBe(0.5)
  expect(maxAbs([1, Number.NaN, 3], [1, 2, 3])).toBe(Infinity)
  expect(maxAbs([1, 2], [1, 2, 3])).toBe(Infinity)
})
