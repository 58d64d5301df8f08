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

/** The format's cap on the JSON header (safetensors refuses larger headers as a denial of service). */
export const MAX_HEADER_BYTES = 100_000_000

/** Bytes per value of each dtype read here; a Map, so that no other name (`__proto__`, `toString`) is one. */
const DTYPE_BYTES: ReadonlyMap<string, number> = new Map<StoredDtype, number>([
  ['F32', 4],
  ['F16', 2],
  ['BF16', 2],
  ['I32', 4],
])

/** Where a tensor's values lie, relative to the start of the data (just after the header). */
export type TensorEntry = {
  readonly dtype: StoredDtype
  readonly shape: readonly number[]
  readonly begin: number
  readonly end: number
}

/** A validated header: every tensor's entry, the string metadata, and where the data starts in the file. */
export type SafetensorsHeader = {
  readonly entries: ReadonlyMap<string, TensorEntry>
  readonly metadata: Record<string, string>
  readonly dataStart: number
}

const damaged = (what: string, msg: string) =>
  new LevanterError('BAD_SAFETENSORS', `${what}: ${msg}; the file is truncated or not safetensors`)

/**
 * The header's length from the file's first 8 bytes, checked against the file's size and the format's
 * 100 MB cap; `fileSize` is the whole file's.
 */
export function safetensorsHeaderLength(first8: Uint8Array, fileSize: number, what = 'safetensors'): number {
  if (first8.length < 8 || fileSize < 8)
    throw damaged(what, `${Math.min(first8.length, fileSize)} bytes is shorter than the 8-byte header length`)
  const len = new DataView(first8.buffer, first8.byteOffset, 8).getBigUint64(0, true)
  if (len > BigInt(MAX_HEADER_BYTES))
    throw damaged(what, `header length ${len} exceeds the format's cap of ${MAX_HEADER_BYTES} bytes`)
  if (8 + Number(len) > fileSize) throw damaged(what, `header length ${len} exceeds the file size ${fileSize}`)
  return Number(len)
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v)

const isCount = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0

/** One tensor's entry, as the format requires it; `dataLength` bounds its offsets. */
function entryOf(name: string, e: unknown, dataLength: number, what: string): TensorEntry {
  const bad = (msg: string) => damaged(what, `tensor ${JSON.stringify(name)} ${msg}`)
  if (!isObject(e)) throw bad(`has entry ${JSON.stringify(e)}, not an object with dtype, shape and data_offsets`)
  const { dtype, shape, data_offsets: offsets } = e
  const size = typeof dtype === 'string' ? DTYPE_BYTES.get(dtype) : undefined
  if (size === undefined)
    throw bad(
      `has dtype ${typeof dtype === 'string' ? dtype : JSON.stringify(dtype)}; only F32, F16, BF16 and I32 are read`,
    )
  if (!Array.isArray(shape) || !shape.every(isCount))
    throw bad(`has shape ${JSON.stringify(shape)}, not an array of non-negative integers`)
  if (!Array.isArray(offsets) || offsets.length !== 2 || !offsets.every(isCount))
    throw bad(`has data_offsets ${JSON.stringify(offsets)}, not [begin, end] non-negative integers`)
  const [begin, end] = offsets as [number, number]
  if (begin > end || end > dataLength)
    throw bad(`has data_offsets [${begin}, ${end}] outside the ${dataLength} data bytes`)
  // Multiplied step by step so that a huge shape stops before leaving the safe integers.
  let bytes = size
  for (const d of shape as number[]) {
    bytes *= d
    if (bytes > end - begin) break
  }
  if (bytes !== end - begin)
    throw bad(
      `has data_offsets [${begin}, ${end}] (${end - begin} bytes), but dtype ${dtype} ` +
        `× shape [${shape.join(', ')}] needs ${shape.reduce((a: number, b: number) => a * b, size)}`,
    )
  return { dtype: dtype as StoredDtype, shape: shape as number[], begin, end }
}

/**
 * Parse and check a header as the format requires: a JSON object; `__metadata__` a map of strings; every
 * other entry a dtype read here, a shape of non-negative integers and data_offsets of exactly dtype × shape
 * bytes; the entries, sorted by offset, cover the `dataLength` data bytes from 0 without gap or overlap.
 */
export function parseSafetensorsHeader(json: Uint8Array, dataLength: number, what = 'safetensors'): SafetensorsHeader {
  let header: unknown
  try {
    header = JSON.parse(new TextDecoder().decode(json))
  } catch (_err) {
    throw damaged(what, 'header is not JSON')
  }
  if (!isObject(header)) throw damaged(what, 'header is not a JSON object')
  const entries = new Map<string, TensorEntry>()
  let metadata: Record<string, string> = {}
  for (const [name, e] of Object.entries(header)) {
    if (name === '__metadata__') {
      if (!isObject(e) || !Object.values(e).every((v) => typeof v === 'string'))
        throw damaged(what, `__metadata__ is ${JSON.stringify(e)}, not a map of strings to strings`)
      metadata = e as Record<string, string>
    } else entries.set(name, entryOf(name, e, dataLength, what))
  }
  const sorted = [...entries].sort(([, a], [, b]) => a.begin - b.begin || a.end - b.end)
  let at = 0
  for (const [name, e] of sorted) {
    if (e.begin !== at)
      throw damaged(
        what,
        `tensor ${JSON.stringify(name)} starts at ${e.begin}, but the tensor before it ends at ${at} ` +
          `(${e.begin < at ? 'they overlap' : 'a gap'}); the data must be covered exactly once`,
      )
    at = e.end
  }
  if (at !== dataLength)
    throw damaged(what, `the tensors cover ${at} of the ${dataLength} data bytes; the data must be covered exactly`)
  return { entries, metadata, dataStart: 8 + json.length }
}

/** The checked header of a whole safetensors file (its data is not decoded). */
export function readSafetensorsHeader(bytes: Uint8Array, what = 'safetensors'): SafetensorsHeader {
  const len = safetensorsHeaderLength(bytes, bytes.length, what)
  return parseSafetensorsHeader(bytes.subarray(8, 8 + len), bytes.length - 8 - len, what)
}

/** Decode a safetensors file (checked as {@link parseSafetensorsHeader} says); `what` names it in errors. */
export function decodeSafetensors(
  bytes: Uint8Array,
  what = 'safetensors',
): { tensors: Map<string, SafeTensor>; metadata: Record<string, string> } {
  const { entries, metadata, dataStart: base } = readSafetensorsHeader(bytes, what)
  const tensors = new Map<string, SafeTensor>()
  for (const [name, { dtype, shape, begin: b, end }] of entries) {
    const size = DTYPE_BYTES.get(dtype)!
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
    tensors.set(name, { shape, data, dtype })
  }
  return { tensors, metadata }
}
