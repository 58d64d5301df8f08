import { expect, test } from 'vitest'
import { type FrameHeader, FrameSink, HEADER_BYTES } from './framing.js'

function frame(h: FrameHeader, payload: Uint8Array): Uint8Array {
  const out = new Uint8Array(HEADER_BYTES + payload.byteLength)
  const v = new DataView(out.buffer)
  ;[payload.byteLength, h.comm, h.seq, h.kind, h.chunk, h.from, h.total].forEach((x, i) => v.setUint32(i * 4, x, true))
  out.set(payload, HEADER_BYTES)
  return out
}

/** Feeds `stream` to the sink as a socket would: each read fills part of the buffer the sink offers. */
function feed(sink: FrameSink, stream: Uint8Array, readSizes: () => number): void {
  let off = 0
  while (off < stream.byteLength) {
    const into = sink.next()
    const n = Math.min(into.byteLength, readSizes(), stream.byteLength - off)
    into.set(stream.subarray(off, off + n))
    sink.landed(n)
    off += n
  }
}

test('frames split across reads of any size arrive whole, payloads in the receiver buffer when it has one', () => {
  const payloads = [
    new Uint8Array(0),
    Uint8Array.from({ length: 1000 }, (_, i) => i % 251),
    Uint8Array.from({ length: 20_001 }, (_, i) => (i * 7) % 256),
  ]
  const heads: FrameHeader[] = payloads.map((p, i) => ({
    comm: 1,
    seq: 2 + i,
    kind: 3,
    chunk: i,
    from: 5,
    total: p.byteLength,
  }))
  const stream = new Uint8Array(payloads.reduce((s, p) => s + HEADER_BYTES + p.byteLength, 0))
  let off = 0
  heads.forEach((h, i) => {
    const f = frame(h, payloads[i]!)
    stream.set(f, off)
    off += f.byteLength
  })
  for (const sizes of [() => 1, () => 13, () => 65_536, () => 1 + Math.floor(Math.random() * 5000)]) {
    const dest = new Uint8Array(1000) // waiting for the second frame's payload
    const got: [FrameHeader, Uint8Array][] = []
    const sink = new FrameSink({
      onFrame: (h, b) => got.push([h, b]),
      bodyFor: (h, len) => (h.seq === 3 && len === 1000 ? dest : undefined),
    })
    feed(sink, stream, sizes)
    expect(got.map(([h]) => h)).toEqual(heads)
    got.forEach(([, b], i) => expect(b).toEqual(payloads[i]))
    expect(got[1]![1]).toBe(dest)
  }
})
