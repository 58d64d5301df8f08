import { describe, expect, test } from 'vitest'
import { RpcError } from './errors.js'
import { decodeMessage, encodeMessage, encodeTransient, TRANSIENT_MAX_BYTES } from './wire.js'

/** The message as grpc-js hands it over: a subarray after the 5-byte frame prefix. */
function asReceived(msg: Buffer): Buffer {
  const frame = Buffer.alloc(msg.length + 5)
  msg.copy(frame, 5)
  return frame.subarray(5)
}

describe('wire format', () => {
  test('plain JSON values round-trip', () => {
    for (const v of [null, 0, '', 'x', true, [1, 'a', null], { a: { b: [1, { c: 'd' }] } }]) {
      expect(decodeMessage(encodeMessage(v))).toEqual(v)
    }
  })

  test('typed arrays come back as the same type with the same values', () => {
    const msg = {
      f32: new Float32Array([1.5, -2, 3.25]),
      f64: new Float64Array([Math.PI]),
      i8: new Int8Array([-1, 2]),
      u16: new Uint16Array([65535]),
      i32: new Int32Array([-7]),
      u8c: new Uint8ClampedArray([255]),
      big: new BigInt64Array([-5n]),
      buf: Buffer.from('hi'),
      nested: [{ bytes: new Uint8Array([1, 2, 3]) }, 'text'],
      ab: new Uint8Array([9, 8]).buffer,
    }
    const out = decodeMessage(asReceived(encodeMessage(msg))) as typeof msg
    expect(out.f32).toBeInstanceOf(Float32Array)
    expect(Array.from(out.f32)).toEqual([1.5, -2, 3.25])
    expect(out.f64).toBeInstanceOf(Float64Array)
    expect(out.f64[0]).toBe(Math.PI)
    expect(Array.from(out.i8)).toEqual([-1, 2])
    expect(out.u16).toBeInstanceOf(Uint16Array)
    expect(Array.from(out.i32)).toEqual([-7])
    expect(out.u8c).toBeInstanceOf(Uint8ClampedArray)
    expect(out.big[0]).toBe(-5n)
    expect(Buffer.isBuffer(out.buf)).toBe(true)
    expect(out.buf.toString()).toBe('hi')
    expect((out.nested[0] as { bytes: Uint8Array }).bytes).toEqual(new Uint8Array([1, 2, 3]))
    expect(out.nested[1]).toBe('text')
    expect(new Uint8Array(out.ab)).toEqual(new Uint8Array([9, 8]))
  })

  test('binary data costs its size, not base64 or a number list', () => {
    const data = new Float32Array(1 << 18) // 1 MiB
    const size = encodeMessage({ data }).length
    expect(size).toBeGreaterThanOrEqual(data.byteLength)
    expect(size).toBeLessThan(data.byteLength + 128)
  })

  test('an aligned segment is a view on the received frame; an unaligned one is copied', () => {
    const msg = asReceived(encodeMessage({ x: new Float32Array([1, 2, 3, 4]) }))
    const aligned = decodeMessage(msg) as { x: Float32Array }
    expect(aligned.x.buffer).toBe(msg.buffer)
    // The same bytes shifted by two: the decoder must copy to keep Float32 alignment.
    const shifted = Buffer.alloc(msg.length + 2).subarray(2)
    msg.copy(shifted)
    const copied = decodeMessage(shifted) as { x: Float32Array }
    expect(copied.x.buffer).not.toBe(shifted.buffer)
    expect(Array.from(copied.x)).toEqual([1, 2, 3, 4])
  })

  test('the caller’s object is left untouched', () => {
    const data = new Float32Array([1])
    const msg = { a: { data }, list: [data] }
    encodeMessage(msg)
    expect(msg.a.data).toBe(data)
    expect(msg.list[0]).toBe(data)
  })

  test('a binary value at the root', () => {
    const out = decodeMessage(encodeMessage(new Uint16Array([1, 2])))
    expect(out).toEqual(new Uint16Array([1, 2]))
  })

  test('malformed messages are INVALID_ARGUMENT', () => {
    const bad = [Buffer.from('{}'), Buffer.alloc(12), Buffer.from([0x44, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0])]
    for (const b of bad) expect(() => decodeMessage(b)).toThrow(RpcError)
    const ok = encodeMessage({ a: new Uint8Array(4) })
    expect(() => decodeMessage(ok.subarray(0, ok.length - 2))).toThrow(/exceeds the message/)
  })

  test('a binary path can never reach a prototype', () => {
    const body = '{"__proto__":0}'
    const table = JSON.stringify([[['__proto__', 'polluted'], 'Uint8Array', 1]])
    const head = Buffer.alloc(12)
    head[0] = 0x44
    head[1] = 1
    head.writeUInt32LE(Buffer.byteLength(body), 4)
    head.writeUInt32LE(Buffer.byteLength(table), 8)
    const msg = Buffer.concat([head, Buffer.from(body), Buffer.from(table), Buffer.alloc(16)])
    expect(() => decodeMessage(msg)).toThrow(/does not exist/)
    expect(({} as Record<string, unknown>).polluted).toBeUndefined()
  })

  test('transient encoding reuses one buffer, writes every byte, and matches encodeMessage', () => {
    const big = { name: 'big', data: new Float32Array(1000).fill(2.5) }
    const first = encodeTransient(big)
    expect(first.equals(encodeMessage(big))).toBe(true)
    // A shorter message with a different layout overwrites the same memory completely.
    const small = { n: 1, bytes: new Uint8Array([7]) }
    const second = encodeTransient(small)
    expect(second.buffer).toBe(first.buffer)
    expect(second.equals(encodeMessage(small))).toBe(true)
    expect(decodeMessage(asReceived(second))).toEqual(small)
    // Beyond the limit a message gets its own buffer, so the reused one stays small.
    const huge = encodeTransient({ data: new Uint8Array(TRANSIENT_MAX_BYTES + 1) })
    expect(huge.buffer).not.toBe(first.buffer)
    expect(encodeTransient(small).buffer).toBe(first.buffer)
  })
})
