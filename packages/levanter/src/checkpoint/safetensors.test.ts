/** float16/bfloat16 conversion against numpy's and torch's rounding (test-fixtures/half-floats/make_half_floats.py). */
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { expect, test } from 'vitest'
import { decodeSafetensors, encodeSafetensors, fromBf16, fromF16, toBf16, toF16 } from './safetensors.js'

type Ref = {
  values: (number | string)[]
  f16: number[]
  bf16: number[]
  patterns: number[]
  f16Decoded: (number | string)[]
  bf16Decoded: (number | string)[]
}
const ref = JSON.parse(
  fs.readFileSync(
    path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../test-fixtures/half-floats/half-floats.json'),
    'utf8',
  ),
) as Ref
const num = (v: number | string) => (typeof v === 'number' ? v : v === 'inf' ? Infinity : -Infinity)
const values = Float32Array.from(ref.values.map(num))

test('float32 → float16 and bfloat16 bits round as numpy and torch do (ties to even, overflow, subnormals)', () => {
  expect(Array.from(values, toF16)).toEqual(ref.f16)
  expect(Array.from(values, toBf16)).toEqual(ref.bf16)
})

test('float16 and bfloat16 bits → float32 as numpy and torch read them', () => {
  expect(ref.patterns.map(fromF16)).toEqual(ref.f16Decoded.map(num))
  expect(ref.patterns.map(fromBf16)).toEqual(ref.bf16Decoded.map(num))
})

test('a tensor written as F16 or BF16 reads back rounded, with its stored dtype', () => {
  for (const dtype of ['F16', 'BF16'] as const) {
    const bytes = encodeSafetensors(new Map([['w', { shape: [values.length], data: values, dtype }]]))
    const t = decodeSafetensors(bytes).tensors.get('w')!
    expect(t.dtype).toBe(dtype)
    const bits = dtype === 'F16' ? ref.f16 : ref.bf16,
      from = dtype === 'F16' ? fromF16 : fromBf16
    expect(Array.from(t.data)).toEqual(bits.map(from).map((v) => Math.fround(v)))
  }
})

test('an unsupported dtype is refused, naming the tensor and the dtypes read', () => {
  const bytes = encodeSafetensors(new Map([['w', { shape: [2], data: new Float32Array(2) }]]))
  const text = new TextDecoder().decode(bytes).replace('"F32"', '"F64"')
  expect(() => decodeSafetensors(new TextEncoder().encode(text), 'x.safetensors')).toThrow(
    /x\.safetensors: tensor "w" has dtype F64; only F32, F16, BF16 and I32 are read/,
  )
})
