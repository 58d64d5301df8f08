/**
 * @module The ducky wire format: one gRPC message = JSON for the structure plus raw binary
 * segments for typed arrays, so a Float32Array travels as its bytes, not as base64 or a number list.
 *
 * ```
 * offset 0   u8  magic 0x44 ('D')
 *        1   u8  format version (1)
 *        2   u16 reserved, 0
 *        4   u32 LE  body length B      (UTF-8 JSON of the message, each binary value replaced by 0)
 *        8   u32 LE  table length T     (UTF-8 JSON [[path, type, byteLength], …], 0 when no binary)
 *       12   body, then table
 *            then each segment's bytes, in table order, each starting 8-byte aligned
 *            relative to the gRPC frame (which prefixes the message with 5 bytes)
 * ```
 * `path` is the list of object keys and array indices leading to the value; `type` is the
 * constructor name (`Float32Array`, `Uint8Array`, `Buffer`, `DataView`, `ArrayBuffer`, …), so
 * the receiver rebuilds the same type. A received segment that lands aligned is a view on the
 * received frame (no copy); otherwise it is copied once. Everything else follows JSON
 * semantics (a `Date` becomes its ISO string, `undefined` object fields vanish).
 */
import { RpcError } from './errors.js'

const MAGIC = 0x44
const VERSION = 1
const HEADER = 12
/** gRPC's length prefix (1 flag byte + u32 length) that precedes every message in a frame. */
const FRAME_PREFIX = 5

type ViewCtor = {
  new (buffer: ArrayBufferLike, byteOffset: number, length: number): ArrayBufferView
  BYTES_PER_ELEMENT?: number
}

const VIEW_TYPES: Record<string, { ctor: ViewCtor; size: number }> = {
  Int8Array: { ctor: Int8Array, size: 1 },
  Uint8Array: { ctor: Uint8Array, size: 1 },
  Uint8ClampedArray: { ctor: Uint8ClampedArray, size: 1 },
  Int16Array: { ctor: Int16Array, size: 2 },
  Uint16Array: { ctor: Uint16Array, size: 2 },
  Int32Array: { ctor: Int32Array, size: 4 },
  Uint32Array: { ctor: Uint32Array, size: 4 },
  Float32Array: { ctor: Float32Array, size: 4 },
  Float64Array: { ctor: Float64Array, size: 8 },
  BigInt64Array: { ctor: BigInt64Array, size: 8 },
  BigUint64Array: { ctor: BigUint64Array, size: 8 },
  DataView: { ctor: DataView as unknown as ViewCtor, size: 1 },
}

type Path = (string | number)[]
type Segment = { path: Path; type: string; bytes: Uint8Array }

function typeOf(v: ArrayBufferView): string {
  if (Buffer.isBuffer(v)) return 'Buffer'
  const name = v.constructor.name
  if (name in VIEW_TYPES) return name
  // A subclass of a typed array travels as the closest built-in type.
  for (const [key, { ctor }] of Object.entries(VIEW_TYPES))
    if (v instanceof (ctor as unknown as abstract new (...a: never[]) => unknown)) return key
  return 'Uint8Array'
}

/**
 * Returns `v` with every binary value replaced by 0, copying only the objects and arrays on the
 * way to a binary value, and records each one in `segs`.
 */
function strip(v: unknown, path: Path, segs: Segment[]): unknown {
  if (typeof v !== 'object' || v === null) return v
  if (ArrayBuffer.isView(v)) {
    segs.push({ path: [...path], type: typeOf(v), bytes: new Uint8Array(v.buffer, v.byteOffset, v.byteLength) })
    return 0
  }
  if (v instanceof ArrayBuffer) {
    segs.push({ path: [...path], type: 'ArrayBuffer', bytes: new Uint8Array(v) })
    return 0
  }
  if (Array.isArray(v)) {
    let out: unknown[] | undefined
    for (let i = 0; i < v.length; i++) {
      const e: unknown = v[i]
      if (typeof e !== 'object' || e === null) continue
      path.push(i)
      const s = strip(e, path, segs)
      path.pop()
      if (s !== e) (out ??= v.slice())[i] = s
    }
    return out ?? v
  }
  if (typeof (v as { toJSON?: unknown }).toJSON === 'function') return v
  let out: Record<string, unknown> | undefined
  const obj = v as Record<string, unknown>
  for (const k of Object.keys(obj)) {
    const e = obj[k]
    if (typeof e !== 'object' || e === null) continue
    path.push(k)
    const s = strip(e, path, segs)
    path.pop()
    if (s !== e) (out ??= { ...obj })[k] = s
  }
  return out ?? v
}

/** Next offset ≥ `off` whose position in the gRPC frame is a multiple of 8. */
const align = (off: number) => off + ((8 - ((off + FRAME_PREFIX) % 8)) % 8)

/** Encodes one message; the only copy of binary data is into the returned buffer. */
export function encodeMessage(value: unknown): Buffer {
  return encodeInto(value, Buffer.allocUnsafe)
}

/** Messages up to this size are encoded into a reused buffer by {@link encodeTransient}. */
export const TRANSIENT_MAX_BYTES = 4 * 1024 * 1024
let scratch: Buffer = Buffer.allocUnsafe(0)

function scratchOf(total: number): Buffer {
  if (total > TRANSIENT_MAX_BYTES) return Buffer.allocUnsafe(total)
  if (scratch.length < total)
    scratch = Buffer.allocUnsafeSlow(Math.min(TRANSIENT_MAX_BYTES, Math.max(total, 2 * scratch.length, 4096)))
  return scratch.subarray(0, total)
}

/**
 * Like {@link encodeMessage}, but messages up to {@link TRANSIENT_MAX_BYTES} land in one buffer
 * reused by the next call, so the result is valid only until then. For grpc-js's server-side
 * response serializer, which copies the message into its frame before it returns: a fresh
 * megabyte per streamed chunk would cost more (page faults and garbage collection) than the copy.
 * Never for client requests, which grpc-js keeps for retries.
 */
export function encodeTransient(value: unknown): Buffer {
  return encodeInto(value, scratchOf)
}

function encodeInto(value: unknown, alloc: (total: number) => Buffer): Buffer {
  const segs: Segment[] = []
  const body = JSON.stringify(strip(value, [], segs)) ?? 'null'
  const table = segs.length === 0 ? '' : JSON.stringify(segs.map((s) => [s.path, s.type, s.bytes.byteLength]))
  const bodyLen = Buffer.byteLength(body)
  const tableLen = Buffer.byteLength(table)
  let total = HEADER + bodyLen + tableLen
  for (const s of segs) total = align(total) + s.bytes.byteLength
  // Every byte of the result is written below (header, body, table, zeroed padding, segments):
  // neither allocUnsafe memory nor a previous message may reach the wire.
  const buf = alloc(total)
  buf[0] = MAGIC
  buf[1] = VERSION
  buf.writeUInt16LE(0, 2)
  buf.writeUInt32LE(bodyLen, 4)
  buf.writeUInt32LE(tableLen, 8)
  buf.write(body, HEADER, bodyLen, 'utf8')
  if (tableLen > 0) buf.write(table, HEADER + bodyLen, tableLen, 'utf8')
  let off = HEADER + bodyLen + tableLen
  for (const s of segs) {
    const start = align(off)
    if (start > off) buf.fill(0, off, start)
    buf.set(s.bytes, start)
    off = start + s.bytes.byteLength
  }
  return buf
}

function malformed(what: string): RpcError {
  return new RpcError(
    'INVALID_ARGUMENT',
    `malformed ducky message: ${what}; the sender must use the ducky wire format v${VERSION}`,
  )
}

function viewOf(buf: Buffer, off: number, type: string, len: number): unknown {
  const abs = buf.byteOffset + off
  if (type === 'Buffer') return Buffer.from(buf.buffer, abs, len)
  if (type === 'ArrayBuffer') return buf.buffer.slice(abs, abs + len)
  const t = VIEW_TYPES[type]
  if (t === undefined) throw malformed(`unknown binary type ${JSON.stringify(type)}`)
  if (len % t.size !== 0) throw malformed(`${type} of ${len} bytes is not a whole number of elements`)
  if (abs % t.size === 0) return new t.ctor(buf.buffer, abs, type === 'DataView' ? len : len / t.size)
  // Unaligned in the received frame: one copy into fresh (aligned) memory.
  const copy = new Uint8Array(len)
  copy.set(buf.subarray(off, off + len))
  return new t.ctor(copy.buffer, 0, type === 'DataView' ? len : len / t.size)
}

function place(root: unknown, path: unknown[], value: unknown): unknown {
  if (path.length === 0) return value
  let holder: unknown = root
  for (let i = 0; i < path.length; i++) {
    const key = path[i]
    if (typeof holder !== 'object' || holder === null || (typeof key !== 'string' && typeof key !== 'number')) {
      throw malformed(`binary path ${JSON.stringify(path)} does not exist in the message`)
    }
    // Only an own property may be replaced: a path can never reach a prototype.
    if (!Object.hasOwn(holder, key))
      throw malformed(`binary path ${JSON.stringify(path)} does not exist in the message`)
    if (i === path.length - 1) (holder as Record<string | number, unknown>)[key] = value
    else holder = (holder as Record<string | number, unknown>)[key]
  }
  return root
}

/** Decodes one message; aligned binary segments are views on `buf`. */
export function decodeMessage(buf: Buffer): unknown {
  if (buf.length < HEADER || buf[0] !== MAGIC) throw malformed('missing header')
  if (buf[1] !== VERSION) throw malformed(`format version ${buf[1]}`)
  const bodyLen = buf.readUInt32LE(4)
  const tableLen = buf.readUInt32LE(8)
  if (HEADER + bodyLen + tableLen > buf.length) throw malformed('lengths exceed the message')
  let value: unknown
  let table: unknown
  try {
    value = JSON.parse(buf.toString('utf8', HEADER, HEADER + bodyLen))
    table = tableLen === 0 ? [] : JSON.parse(buf.toString('utf8', HEADER + bodyLen, HEADER + bodyLen + tableLen))
  } catch (err) {
    throw malformed(`invalid JSON (${(err as Error).message})`)
  }
  if (!Array.isArray(table)) throw malformed('binary table is not a list')
  let off = HEADER + bodyLen + tableLen
  for (const entry of table as unknown[]) {
    if (
      !Array.isArray(entry) ||
      !Array.isArray(entry[0]) ||
      typeof entry[1] !== 'string' ||
      !Number.isSafeInteger(entry[2]) ||
      entry[2] < 0
    ) {
      throw malformed('bad binary table entry')
    }
    const len = entry[2] as number
    const start = align(off)
    if (start + len > buf.length) throw malformed('binary segment exceeds the message')
    value = place(value, entry[0] as unknown[], viewOf(buf, start, entry[1], len))
    off = start + len
  }
  return value
}

/**
 * A decoded message in a box. grpc-js treats a falsy decoded value as "no message" (and a
 * `null` pushed into a stream as its end, and refuses to write `null`), so messages such as `0`,
 * `''` or `null` travel boxed between ducky's code and the (de)serializers.
 */
export type Boxed = { readonly value: unknown }

export function decodeBoxed(buf: Buffer): Boxed {
  return { value: decodeMessage(buf) }
}

export function encodeBoxed(box: Boxed): Buffer {
  return encodeMessage(box.value)
}

/** {@link encodeTransient} of a boxed message: for server responses only. */
export function encodeBoxedTransient(box: Boxed): Buffer {
  return encodeTransient(box.value)
}

/** The `bytes` codec: the message is the Uint8Array itself (a view, never a copy). */
export function encodeBytes(box: Boxed): Buffer {
  const v = box.value
  if (Buffer.isBuffer(v)) return v
  if (v instanceof Uint8Array) return Buffer.from(v.buffer, v.byteOffset, v.byteLength)
  throw new RpcError(
    'INTERNAL',
    `a bytes-codec message must be a Uint8Array, got ${v === null ? 'null' : typeof v}; fix the method's schema`,
  )
}

export function decodeBytes(buf: Buffer): Boxed {
  return { value: buf }
}

/**
 * Serializers of a codec, for grpc-js. `encodeResponse` is for the server's responses, which
 * grpc-js copies into its frame at once (see {@link encodeTransient}).
 */
export function codecOf(codec: 'ducky' | 'bytes'): {
  encode: (b: Boxed) => Buffer
  encodeResponse: (b: Boxed) => Buffer
  decode: (buf: Buffer) => Boxed
} {
  return codec === 'bytes'
    ? { encode: encodeBytes, encodeResponse: encodeBytes, decode: decodeBytes }
    : { encode: encodeBoxed, encodeResponse: encodeBoxedTransient, decode: decodeBoxed }
}
