/**
 * @module safetensors reader and writer: 8-byte little-endian header length, a JSON header
 * `{ name: { dtype, shape, data_offsets: [begin, end] }, __metadata__?: { k: string } }`, then raw
 * little-endian data. Float32 and int32 only (what training produces).
 */
import { LevanterError } from '../errors.js'

export type SafeTensor = { readonly shape: readonly number[]; readonly data: Float32Array | Int32Array }

const DTYPES = { F32: Float32Array, I32: Int32Array } as const

/** Encode tensors (in the given order) and string metadata. */
export function encodeSafetensors(
  tensors: ReadonlyMap<string, SafeTensor>,
  metadata: Readonly<Record<string, string>> = {},
): Uint8Array {
  const header: Record<string, unknown> = {}
  if (Object.keys(metadata).length) header.__metadata__ = metadata
  let offset = 0
  for (const [name, t] of tensors) {
    const n = t.shape.reduce((a, b) => a * b, 1)
    if (n !== t.data.length)
      throw new LevanterError(
        'BAD_SHAPE',
        `safetensors: "${name}" has ${t.data.length} values for shape [${t.shape.join(', ')}]`,
      )
    header[name] = {
      dtype: t.data instanceof Int32Array ? 'I32' : 'F32',
      shape: t.shape,
      data_offsets: [offset, offset + t.data.byteLength],
    }
    offset += t.data.byteLength
  }
  let json = JSON.stringify(header)
  json += ' '.repeat((8 - ((json.length + 8) % 8)) % 8) // data starts 8-byte aligned
  const head = new TextEncoder().encode(json)
  const out = new Uint8Array(8 + head.length + offset)
  new DataView(out.buffer).setBigUint64(0, BigInt(head.length), true)
  out.set(head, 8)
  let o = 8 + head.length
  for (const t of tensors.values()) {
    out.set(new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength), o)
    o += t.data.byteLength
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
    const Ctor = DTYPES[dtype as keyof typeof DTYPES]
    if (!Ctor) throw bad(`tensor "${name}" has dtype ${dtype}; only F32 and I32 are read`)
    const [b, end] = data_offsets
    if (base + end > bytes.length || end - b !== shape.reduce((x, y) => x * y, 1) * 4)
      throw bad(`tensor "${name}" offsets [${b}, ${end}] do not fit its shape or the file`)
    // A real copy (a Node Buffer's slice is a view into a shared pool): aligned, and independent of the file buffer.
    const copy = new Uint8Array(end - b)
    copy.set(bytes.subarray(base + b, base + end))
    tensors.set(name, { shape, data: new Ctor(copy.buffer, 0, (end - b) / 4) })
  }
  return { tensors, metadata }
}
