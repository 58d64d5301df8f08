/**
 * float16/bfloat16 conversion against numpy's and torch's rounding (test-fixtures/half-floats/make_half_floats.py),
 * and headers held to the format (issue 33: offsets, dtypes, shapes and metadata someone else wrote).
 */
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, test } from 'vitest'
import { readHeaderFromFile } from './read-header.js'
import {
  MAX_HEADER_BYTES,
  decodeSafetensors,
  encodeSafetensors,
  fromBf16,
  fromF16,
  toBf16,
  toF16,
} from './safetensors.js'
import type { SafeTensor } from './safetensors.js'

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

describe('a header someone else wrote is held to the format', () => {
  const two = () =>
    encodeSafetensors(
      new Map([
        ['a', { shape: [2], data: new Float32Array([1, 2]) }],
        ['b', { shape: [1, 2], data: new Float32Array([3, 4]) }],
      ]),
    )
  const headerOf = (bytes: Uint8Array) => {
    const len = Number(new DataView(bytes.buffer, bytes.byteOffset, 8).getBigUint64(0, true))
    return { json: JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + len))), data: bytes.subarray(8 + len) }
  }
  /** A file with header `h` (any JSON) over `data`. */
  const file = (h: unknown, data: Uint8Array) => {
    const j = new TextEncoder().encode(JSON.stringify(h))
    const out = new Uint8Array(8 + j.length + data.length)
    new DataView(out.buffer).setBigUint64(0, BigInt(j.length), true)
    out.set(j, 8)
    out.set(data, 8 + j.length)
    return out
  }
  const edited = (edit: (h: Record<string, Record<string, unknown>>) => unknown, extra = 0) => {
    const { json, data } = headerOf(two())
    const h = edit(json) ?? json
    return file(h, new Uint8Array([...data, ...new Uint8Array(extra)]))
  }
  const cases: [string, Uint8Array, RegExp][] = [
    ['negative offsets', edited((h) => void (h.a!.data_offsets = [-8, 0])), /tensor "a" has data_offsets \[-8,0\]/],
    [
      'every tensor at [0, n]: the same bytes twice',
      edited((h) => void (h.b!.data_offsets = [0, 8])),
      /tensor "b" starts at 0, but the tensor before it ends at 8 \(they overlap\)/,
    ],
    ['a gap before a tensor', edited((h) => void (h.b!.data_offsets = [12, 20]), 4), /tensor "b" starts at 12.*a gap/],
    ['data no tensor covers', edited(() => {}, 8), /the tensors cover 16 of the 24 data bytes/],
    [
      'offsets past the data',
      edited((h) => void (h.b!.data_offsets = [8, 24])),
      /"b" has data_offsets \[8, 24\] outside/,
    ],
    ['offsets not dtype × shape', edited((h) => void (h.b!.shape = [3])), /"b" has data_offsets \[8, 16\].*needs 12/],
    ['begin after end', edited((h) => void (h.b!.data_offsets = [16, 8])), /"b" has data_offsets \[16, 8\] outside/],
    ['offsets not integers', edited((h) => void (h.a!.data_offsets = [0, 7.5])), /"a" has data_offsets \[0,7.5\]/],
    ['three offsets', edited((h) => void (h.a!.data_offsets = [0, 8, 9])), /"a" has data_offsets \[0,8,9\]/],
    ['dtype __proto__', edited((h) => void (h.a!.dtype = '__proto__')), /"a" has dtype __proto__; only F32/],
    ['dtype toString', edited((h) => void (h.a!.dtype = 'toString')), /"a" has dtype toString; only F32/],
    ['dtype a number', edited((h) => void (h.a!.dtype = 4)), /"a" has dtype 4; only F32/],
    ['an entry null', edited((h) => void ((h as Record<string, unknown>).a = null)), /tensor "a" has entry null/],
    ['shape "abc"', edited((h) => void (h.a!.shape = 'abc')), /tensor "a" has shape "abc", not an array/],
    ['a negative dimension', edited((h) => void (h.b!.shape = [-1, -2])), /tensor "b" has shape \[-1,-2\]/],
    ['a huge shape', edited((h) => void (h.b!.shape = [2 ** 52, 2 ** 52])), /"b" has data_offsets \[8, 16\]/],
    ['header a JSON array', file([1, 2], new Uint8Array(0)), /header is not a JSON object/],
    ['header null', file(null, new Uint8Array(0)), /header is not a JSON object/],
    ['metadata not strings', edited((h) => ({ ...h, __metadata__: { format: 1 } })), /__metadata__ is \{"format":1\}/],
    ['metadata a string', edited((h) => ({ ...h, __metadata__: 'pt' })), /__metadata__ is "pt", not a map/],
  ]
  test.each(cases)('%s: BAD_SAFETENSORS naming the file and the entry', (_name, bytes, message) => {
    let err: unknown
    try {
      decodeSafetensors(bytes, 'x.safetensors')
    } catch (e) {
      err = e
    }
    expect(err).toMatchObject({ name: 'LevanterError', code: 'BAD_SAFETENSORS' })
    expect((err as Error).message).toMatch(/^x\.safetensors: /)
    expect((err as Error).message).toMatch(message)
  })

  test('a header length past the format cap or the file is refused before anything is read', () => {
    const bytes = two()
    const dv = new DataView(bytes.buffer, bytes.byteOffset, 8)
    dv.setBigUint64(0, 2n ** 62n, true)
    expect(() => decodeSafetensors(bytes, 'x.safetensors')).toThrow(
      /x\.safetensors: header length 4611686018427387904 exceeds the format's cap of 100000000 bytes/,
    )
    dv.setBigUint64(0, BigInt(MAX_HEADER_BYTES), true)
    expect(() => decodeSafetensors(bytes, 'x.safetensors')).toThrow(/exceeds the file size/)
  })

  test('what the format allows still reads: empty tensors, scalars, the header only as the file describes', () => {
    const bytes = encodeSafetensors(
      new Map<string, SafeTensor>([
        ['empty', { shape: [0, 3], data: new Float32Array(0) }],
        ['scalar', { shape: [], data: new Float32Array([7]) }],
        ['after', { shape: [1], data: new Int32Array([-1]) }],
      ]),
    )
    const back = decodeSafetensors(bytes).tensors
    expect([...back.keys()]).toEqual(['empty', 'scalar', 'after'])
    expect(Array.from(back.get('scalar')!.data)).toEqual([7])
    expect(back.get('empty')!.data.length).toBe(0)
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lev-st-head-'))
    fs.writeFileSync(path.join(dir, 'w.safetensors'), bytes)
    const h = readHeaderFromFile(path.join(dir, 'w.safetensors'))
    expect([h.fileSize, h.entries.get('after')]).toEqual([bytes.length, { dtype: 'I32', shape: [1], begin: 4, end: 8 }])
  })
})
