import * as tf from '@tensorflow/tfjs'
import { expect, test } from 'vitest'
import { backendOrder, initBackend } from './backend.js'
import { isLevanterError } from './errors.js'

test('LEVANTER_BACKEND-style override: a bad name is refused, a good one is used and reported once', async () => {
  await expect(initBackend('tpu')).rejects.toSatisfy(
    (e) =>
      isLevanterError(e, 'BACKEND_UNAVAILABLE') &&
      /LEVANTER_BACKEND=tpu is not one of tensorflow, webgpu, wasm, cpu/.test((e as Error).message),
  )
  const info = await initBackend('cpu')
  expect(info).toEqual({ name: 'cpu', threads: 1, simd: false })
  expect(tf.getBackend()).toBe('cpu')
  expect(await initBackend('wasm')).toBe(info) // chosen once per process
})

test('default order: TensorFlow, webgpu on a hardware adapter, the CPU backends; SwiftShader only when asked', () => {
  expect(backendOrder(undefined)).toEqual([
    { name: 'tensorflow', software: false },
    { name: 'webgpu', software: false },
    { name: 'wasm', software: false },
    { name: 'cpu', software: false },
  ])
  expect(backendOrder('')).toEqual(backendOrder(undefined))
  expect(backendOrder('webgpu')).toEqual([{ name: 'webgpu', software: true }])
  expect(backendOrder('wasm')).toEqual([{ name: 'wasm', software: false }])
})
