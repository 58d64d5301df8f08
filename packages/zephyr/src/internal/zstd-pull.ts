/**
 * @module Zstandard decoding one block at a time, on demand (fzstd does the decoding).
 *
 * fzstd's streaming decoder decodes every complete block of a pushed chunk at
 * once, and 4 bytes of input can be a 128 KiB block: one 1 MiB read could
 * expand to 32 GiB. Here the frame and block headers are parsed first and
 * fzstd is handed one block at a time, only when the reader wants more, so a
 * pull yields at most a few blocks (128 KiB each). Frame headers are checked
 * before fzstd allocates their window: like the reference decoder's default,
 * a window over 128 MiB is refused.
 */
import { Decompress } from 'fzstd'
import { ByteQueue, TruncatedInput } from './pull-stream.js'
import type { PullDecoder } from './pull-stream.js'

/** The reference decoder's default limit (`ZSTD_WINDOWLOG_LIMIT_DEFAULT` = 27). */
export const ZSTD_MAX_WINDOW = 1 << 27
const BLOCK_MAX = 1 << 17
const ZSTD_MAGIC = 0xfd2fb528

type State =
  | { readonly at: 'frame' }
  | { readonly at: 'block'; readonly window: number; readonly checksum: boolean }
  | { readonly at: 'checksum' }
  | { readonly at: 'skip'; left: number }

export class ZstdPullDecoder implements PullDecoder {
  private readonly input = new ByteQueue()
  private readonly output: Buffer[] = []
  private state: State = { at: 'frame' }
  private readonly decoder = new Decompress((data) => {
    if (data.length) this.output.push(Buffer.from(data.buffer, data.byteOffset, data.byteLength))
  })
  private finished = false

  feed(chunk: Buffer): void {
    this.input.push(chunk)
  }

  pull(ended: boolean): Buffer | undefined | null {
    for (;;) {
      const out = this.output.shift()
      if (out) return out
      if (this.finished) return null
      if (!this.step()) {
        if (!ended) return undefined
        if (this.state.at !== 'frame' && !(this.state.at === 'skip' && this.state.left === 0))
          throw new TruncatedInput(`input ended inside a zstd frame (${this.input.length} bytes of a part left)`)
        if (this.input.length > 0) throw new TruncatedInput('input ended inside a zstd frame header')
        // fzstd holds back inputs under 18 bytes (a tiny frame) until the final push
        this.decoder.push(new Uint8Array(0), true)
        this.finished = true
      }
    }
  }

  /** Moves one frame part from the input into fzstd; false when the input holds no whole part. */
  private step(): boolean {
    const q = this.input
    const s = this.state
    if (s.at === 'skip') {
      const n = Math.min(s.left, q.length)
      q.drop(n)
      s.left -= n
      if (s.left > 0) return false
      this.state = { at: 'frame' }
      return true
    }
    if (s.at === 'checksum') {
      if (q.length < 4) return false
      this.decoder.push(q.take(4))
      this.state = { at: 'frame' }
      return true
    }
    if (s.at === 'block') {
      if (q.length < 3) return false
      const b0 = q.at(0)
      const type = (b0 >> 1) & 3
      const size = (b0 >> 3) | (q.at(1) << 5) | (q.at(2) << 13)
      if (type === 3) throw new Error('zstd block of the reserved type 3')
      if (size > Math.min(BLOCK_MAX, s.window))
        throw new Error(`zstd block of ${size} bytes, over the ${Math.min(BLOCK_MAX, s.window)}-byte maximum`)
      const whole = 3 + (type === 1 ? 1 : size)
      if (q.length < whole) return false
      this.decoder.push(q.take(whole))
      if (b0 & 1) this.state = s.checksum ? { at: 'checksum' } : { at: 'frame' }
      return true
    }
    if (q.length < 4) return false
    const magic = (q.at(0) | (q.at(1) << 8) | (q.at(2) << 16) | (q.at(3) << 24)) >>> 0
    if (magic >>> 4 === 0x184d2a5) {
      // a skippable frame: 4 bytes of magic, 4 of size, then data fzstd never needs to see
      if (q.length < 8) return false
      const left = (q.at(4) | (q.at(5) << 8) | (q.at(6) << 16) | (q.at(7) << 24)) >>> 0
      q.drop(8)
      this.state = { at: 'skip', left }
      return true
    }
    if (magic !== ZSTD_MAGIC) throw new Error('not a zstd frame (bad magic number)')
    if (q.length < 5) return false
    const fhd = q.at(4)
    if (fhd & 8) throw new Error('zstd frame header with the reserved bit set')
    const single = (fhd >> 5) & 1
    const dictBytes = [0, 1, 2, 4][fhd & 3]!
    const fcsBytes = fhd >> 6 === 0 ? single : 1 << (fhd >> 6)
    const headerBytes = 5 + (single ? 0 : 1) + dictBytes + fcsBytes
    if (q.length < headerBytes) return false
    let window: number
    if (single) {
      // the window is the content size: at most 8 bytes, little-endian
      const at = 5 + dictBytes
      window = 0
      for (let i = fcsBytes - 1; i >= 0; i--) window = window * 256 + q.at(at + i)
      if (fcsBytes === 2) window += 256
    } else {
      const wd = q.at(5)
      const base = 2 ** (10 + (wd >> 3))
      window = base + (base / 8) * (wd & 7)
    }
    if (window > ZSTD_MAX_WINDOW)
      throw new Error(
        `zstd frame needs a ${Math.ceil(window / 2 ** 20)} MiB window, over the ${ZSTD_MAX_WINDOW / 2 ** 20} MiB ` +
          `limit (as the zstd tool's default); recompress without --long or with a smaller window`,
      )
    this.decoder.push(q.take(headerBytes))
    this.state = { at: 'block', window: Math.max(window, 1), checksum: ((fhd >> 2) & 1) === 1 }
    return true
  }
}
