/**
 * @module safetensors reader and writer: 8-byte little-endian header length, a JSON header
 * `{ name: { dtype, shape, data_offsets: [begin, end] }, __metadata__?: { k: string } }`, then raw
 * little-endian data. Values live here as float32 (or int32); F16 and BF16 tensors are converted
 * on read, and written (rounded to nearest, ties to even) when a tensor asks for that dtype.
 */
import { LevanterError } from '../errors.js'

/** How a tensor is stored in the file. */
export type StoredDtype = 'F32' | 'F16' | 'BF16' | 'I32'

/**
 * A tensor's shape and values; `dtype` is how it is (read: was) stored, F32 or I32 by the values'
 * type when absent. Float16/bfloat16 tensors carry float32 values.
 */
export type SafeTensor = {
  readonly shape: readonly number[]
  readonly data: Float32Array | Int32Array
  readonly dtype?: StoredDtype
}

const BYTES: Record<StoredDtype, number> = { F32: 4, F16: 2, BF16: 2, I32: 4 }

const f32 = new Float32Array(1),
  u32 = new Uint32Array(f32.buffer)

/** float32 → bfloat16 bits, rounded to nearest even (NaN stays NaN). */
export function toBf16(x: number): number {
  f32[0] = x
  const b = u32[0]!
  if ((b & 0x7fffffff) > 0x7f800000) return ((b >>> 16) | 0x40) & 0xffff
  return ((b + 0x7fff + ((b >>> 16) & 1)) >>> 16) & 0xffff
}

/** bfloat16 bits → float32. */
export function fromBf16(h: number): number {
  u32[0] = h << 16
  return f32[0]!
}

/** float32 → IEEE half bits, rounded to nearest even; overflow → ±Infinity, tiny → subnormal or ±0. */
export function toF16(x: number): number {
  f32[0] = x
  const b = u32[0]!
  const sign = (b >>> 16) & 0x8000,
    exp = (b >>> 23) & 0xff,
    mant = b & 0x7fffff
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0)
  const e = exp - 127 + 15
  if (e >= 0x1f) return sign | 0x7c00
  if (e <= 0) {
    if (e < -10) return sign
    const m = mant | 0x800000,
      shift = 14 - e
    const half = 1 << (shift - 1)
    let r = m >>> shift
    const rest = m & ((1 << shift) - 1)
    if (rest > half || (rest === half && r & 1)) r++
    return sign | r
  }
  let r = (e << 10) | (mant >>> 13)
  const rest = mant & 0x1fff
  if (rest > 0x1000 || (rest === 0x1000 && r & 1)) r++ // may carry into the exponent: still correct, up to Infinity
  return sign | r
}

/** IEEE half bits → float32. */
export function fromF16(h: number): number {
  const sign = h & 0x8000 ? -1 : 1,
    exp = (h >>> 10) & 0x1f,
    mant = h & 0x3ff
  if (exp === 0) return sign * mant * 2 ** -24
  if (exp === 0x1f) return mant ? NaN : sign * Infinity
  return sign * (1 + mant / 1024) * 2 ** (exp - 15)
}

function dtypeOf(t: SafeTensor): StoredDtype {
  return t.dtype ?? (t.data instanceof Int32Array ? 'I32' : 'F32')
}

/** The stored bytes of a tensor. */
function bytesOf(t: SafeTensor, name: string): Uint8Array {
  const dtype = dtypeOf(t)
  if ((dtype === 'I32') !== t.data instanceof Int32Array)
    throw new LevanterError(
      'BAD_SHAPE',
      `safetensors: "${name}" has ${t.data.constructor.name} values for dtype ${dtype}`,
    )
  if (dtype === 'F32' || dtype === 'I32') return new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength)
  const half = new Uint16Array(t.data.length),
    conv = dtype === 'BF16' ? toBf16 : toF16
  for (let i = 0; i < half.length; i++) half[i] = conv(t.data[i]!)
  return new Uint8Array(half.buffer)
}

/** Encode tensors (in the given order) and string metadata. */
export function encodeSafetensors(
  tensors: ReadonlyMap<string, SafeTensor>,
  metadata: Readonly<Record<string, string>> = {},
): Uint8Array {
  const header: Record<string, unknown> = {}
  if (Object.keys(metadata).length) header.__metadata__ = metadata
  let offset = 0
  const blobs: Uint8Array[] = []
  for (const [name, t] of tensors) {
    const n = t.shape.reduce((a, b) => a * b, 1)
    if (n !== t.data.length)
      throw new LevanterError(
        'BAD_SHAPE',
        `safetensors: "${name}" has ${t.data.length} values for shape [${t.shape.join(', ')}]`,
      )
    const bytes = bytesOf(t, name)
    blobs.push(bytes)
    header[name] = { dtype: dtypeOf(t), shape: t.shape, data_offsets: [offset, offset + bytes.length] }
    offset += bytes.length
  }
  let json = JSON.stringify(header)
  json += ' '.repeat((8 - ((json.length + 8) % 8)) % 8) // data starts 8-byte aligned
  const head = new TextEncoder().encode(json)
  const out = new Uint8Array(8 + head.length + offset)
  new DataView(out.buffer).setBigUint64(0, BigInt(head.length), true)
  out.set(head, 8)
  let o = 8 + head.length
  for (const b of blobs) {
    out.set(b, o)
    o += b.length
  }
  return out
}

/** Decode a safetensors file; `what` names it in errors. */
export function decodeSafetensors(
  bytes: Uint8Array,
  what = 'safetensors',
): { tensors: Map<string, SafeTensor>; metadata: Record<string, string> } {
  const bad = (msg: string) =>
    new LevanterError('BAD_SAFETENSORS', `${what}: ${msg}; the file is truncated or not safetensors`)
  if (bytes.length < 8) throw bad(`${bytes.length} bytes is shorter than the 8-byte header length`)
  const len = Number(new DataView(bytes.buffer, bytes.byteOffset, 8).getBigUint64(0, true))
  if (8 + len > bytes.length) throw bad(`header length ${len} exceeds the file size ${bytes.length}`)
  let header: Record<
    string,
    { dtype: string; shape: number[]; data_offsets: [number, number] } | Record<string, string>
  >
  try {
    header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + len)))
  } catch (_err) {
    throw bad('header is not JSON')
  }
  const base = 8 + len
  const tensors = new Map<string, SafeTensor>()
  let metadata: Record<string, string> = {}
  for (const [name, e] of Object.entries(header)) {
    if (name === '__metadata__') {
      metadata = e as Record<string, string>
      continue
    }
    const { dtype, shape, data_offsets } = e as { dtype: string; shape: number[]; data_offsets: [number, number] }
    if (!(dtype in BYTES)) throw bad(`tensor "${name}" has dtype ${dtype}; only F32, F16, BF16 and I32 are read`)
    const size = BYTES[dtype as StoredDtype]
    const [b, end] = data_offsets
    if (base + end > bytes.length || end - b !== shape.reduce((x, y) => x * y, 1) * size)
      throw bad(`tensor "${name}" offsets [${b}, ${end}] do not fit its shape or the file`)
    // A real copy (a Node Buffer's slice is a view into a shared pool): aligned, and independent of the file buffer.
    const copy = new Uint8Array(end - b)
    copy.set(bytes.subarray(base + b, base + end))
    const n = (end - b) / size
    let data: Float32Array | Int32Array
    if (dtype === 'F32') data = new Float32Array(copy.buffer, 0, n)
    else if (dtype === 'I32') data = new Int32Array(copy.buffer, 0, n)
    else {
      const half = new Uint16Array(copy.buffer, 0, n),
        conv = dtype === 'BF16' ? fromBf16 : fromF16
      data = new Float32Array(n)
      for (let i = 0; i < n; i++) data[i] = conv(half[i]!)
    }
    tensors.set(name, { shape, data, dtype: dtype as StoredDtype })
  }
  return { tensors, metadata }
}
