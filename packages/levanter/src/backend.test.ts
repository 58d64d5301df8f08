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
  // processes that read tensors synchronously (data-parallel replicas, mesh members) never default to webgpu
  expect(backendOrder(undefined, { syncReads: true })).toEqual([
    { name: 'tensorflow', software: false },
    { name: 'wasm', software: false },
    { name: 'cpu', software: false },
  ])
})

test('a process that reads tensors synchronously refuses LEVANTER_BACKEND=webgpu, saying why', async () => {
  await expect(initBackend('webgpu', { syncReads: true })).rejects.toSatisfy(
    (e) =>
      isLevanterError(e, 'BACKEND_UNAVAILABLE') &&
      /reads? tensors synchronously/.test((e as Error).message) &&
      /LEVANTER_BACKEND=webgpu/.test((e as Error).message),
  )
})
