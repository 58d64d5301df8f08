/**
 * @module A bzip2 decoder that decodes one block at a time and yields its output in bounded chunks.
 *
 * Ported from micro-bunzip (Rob Landley) by way of bzip2.js (antimatter15,
 * MIT), the decoder inside unbzip2-stream. That stream decodes every block it
 * has input for and pushes each whole (a block of 5-byte runs expands to
 * 46 MB), so a 6 KB file became 1.2 GB in memory. Here a block's Huffman
 * stage runs once its input is present, and the inverse BWT and run expansion
 * are resumable: each `pull` makes at most 64 KiB. Multistream files
 * (pbzip2) are read stream after stream; block and stream CRCs are checked.
 */
import { TruncatedInput } from './pull-stream.js'
import type { PullDecoder } from './pull-stream.js'

const OUT_CHUNK = 1 << 16
const MAX_CODE_BITS = 20
const MAX_SYMBOLS = 258
const GROUP_SIZE = 50

const CRC_TABLE = (() => {
  const t = new Int32Array(256)
  for (let i = 0; i < 256; i++) {
    let c = i << 24
    for (let k = 0; k < 8; k++) c = c & 0x80000000 ? (c << 1) ^ 0x04c11db7 : c << 1
    t[i] = c
  }
  return t
})()

/** Thrown by `bits` when the input runs out: the block is retried once more input is there. */
const NEED_INPUT = Symbol('need input')

export class Bzip2Decoder implements PullDecoder {
  private buf = Buffer.alloc(0)
  private pos = 0
  private bit = 0
  /** Unread bytes to wait for before retrying a block that ran out of input. */
  private want = 0
  private at: 'stream' | 'block' | 'output' = 'stream'
  private blockMax = 0
  private streamCrc = 0
  private tt = new Int32Array(0)
  private readonly byteCount = new Int32Array(256)
  private readonly symToByte = new Uint8Array(256)
  private readonly mtfSymbol = new Int32Array(256)
  private readonly selectors = new Uint8Array(0x8000)
  // inverse-BWT state of the block being written out
  private ttPos = 0
  private current = 0
  private run = 0
  private left = 0
  private copies = 0
  private outByte = 0
  private crc = 0
  private blockCrc = 0

  feed(chunk: Buffer): void {
    this.buf = Buffer.concat([this.buf.subarray(this.pos), chunk])
    this.pos = 0
  }

  pull(ended: boolean): Buffer | undefined | null {
    for (;;) {
      if (this.at === 'output') return this.output()
      const available = this.buf.length - this.pos
      // the end of the last stream, or an empty file (which decodes to nothing, as before)
      if (this.at === 'stream' && available === 0 && ended) return null
      if (!ended && available < this.want) return undefined
      const savePos = this.pos
      const saveBit = this.bit
      try {
        if (this.at === 'stream') this.streamHeader()
        else this.block()
        this.want = 0
      } catch (err) {
        if (err !== NEED_INPUT) throw err
        this.pos = savePos
        this.bit = saveBit
        if (ended)
          throw new TruncatedInput(`bzip2 input ends inside a ${this.at === 'stream' ? 'stream header' : 'block'}`)
        // retry after twice the input: a block is decoded at most a few times
        this.want = 2 * available + 1
        return undefined
      }
    }
  }

  private bits(n: number): number {
    let result = 0
    while (n > 0) {
      if (this.pos >= this.buf.length) throw NEED_INPUT
      const left = 8 - this.bit
      const byte = this.buf[this.pos]!
      if (n >= left) {
        result = (result << left) | (byte & ((1 << left) - 1))
        this.pos++
        this.bit = 0
        n -= left
      } else {
        result = (result << n) | ((byte >> (left - n)) & ((1 << n) - 1))
        this.bit += n
        n = 0
      }
    }
    return result
  }

  private bits32(): number {
    return ((this.bits(16) << 16) | this.bits(16)) >>> 0
  }

  private streamHeader(): void {
    if (this.bits(24) !== 0x425a68) throw new Error('not bzip2 data (no "BZh" magic number)')
    const level = this.bits(8) - 48
    if (level < 1 || level > 9) throw new Error(`bzip2 block size digit ${level} is not 1-9`)
    this.blockMax = level * 100_000
    if (this.tt.length < this.blockMax) this.tt = new Int32Array(this.blockMax)
    this.streamCrc = 0
    this.at = 'block'
  }

  /** One block's Huffman, MTF and run decoding into `tt`, then the inverse BWT links; or the stream end. */
  private block(): void {
    const m1 = this.bits(24)
    const m2 = this.bits(24)
    if (m1 === 0x177245 && m2 === 0x385090) {
      const crc = this.bits32()
      if (crc !== this.streamCrc >>> 0) throw new Error('bzip2 stream CRC does not match: the data is damaged')
      if (this.bit !== 0) {
        this.bit = 0
        this.pos++
      }
      this.at = 'stream'
      return
    }
    if (m1 !== 0x314159 || m2 !== 0x265359) throw new Error('bzip2 block does not start with its magic number')
    const blockCrc = this.bits32()
    if (this.bits(1)) throw new Error('bzip2 randomised blocks (an obsolete format) are not supported')
    const origPtr = this.bits(24)
    const tt = this.tt
    const bufsize = this.blockMax
    if (origPtr > bufsize) throw new Error('bzip2 block origin is beyond the block size')

    const { symToByte, mtfSymbol, byteCount, selectors } = this
    const used = this.bits(16)
    let symTotal = 0
    for (let i = 0; i < 16; i++) {
      if (used & (1 << (15 - i))) {
        const k = this.bits(16)
        for (let j = 0; j < 16; j++) if (k & (1 << (15 - j))) symToByte[symTotal++] = 16 * i + j
      }
    }
    const groupCount = this.bits(3)
    if (groupCount < 2 || groupCount > 6) throw new Error(`bzip2 block has ${groupCount} Huffman groups (2-6)`)
    const nSelectors = this.bits(15)
    if (nSelectors === 0) throw new Error('bzip2 block has no selectors')
    for (let i = 0; i < groupCount; i++) mtfSymbol[i] = i
    for (let i = 0; i < nSelectors; i++) {
      let j = 0
      while (this.bits(1)) if (++j >= groupCount) throw new Error('bzip2 selector out of range')
      const uc = mtfSymbol[j]!
      for (let k = j - 1; k >= 0; k--) mtfSymbol[k + 1] = mtfSymbol[k]!
      mtfSymbol[0] = uc
      selectors[i] = uc
    }

    const symCount = symTotal + 2
    const groups: { permute: Int32Array; limit: Int32Array; base: Int32Array; minLen: number; maxLen: number }[] = []
    const length = new Uint8Array(MAX_SYMBOLS)
    const temp = new Uint16Array(MAX_CODE_BITS + 1)
    for (let g = 0; g < groupCount; g++) {
      let t = this.bits(5)
      for (let i = 0; i < symCount; i++) {
        for (;;) {
          if (t < 1 || t > MAX_CODE_BITS) throw new Error('bzip2 Huffman code length out of range')
          if (!this.bits(1)) break
          if (!this.bits(1)) t++
          else t--
        }
        length[i] = t
      }
      let minLen = length[0]!
      let maxLen = length[0]!
      for (let i = 1; i < symCount; i++) {
        if (length[i]! > maxLen) maxLen = length[i]!
        else if (length[i]! < minLen) minLen = length[i]!
      }
      const group = {
        permute: new Int32Array(MAX_SYMBOLS),
        limit: new Int32Array(MAX_CODE_BITS + 1),
        base: new Int32Array(MAX_CODE_BITS + 1),
        minLen,
        maxLen,
      }
      groups.push(group)
      const { permute, limit, base } = group
      let pp = 0
      for (let i = minLen; i <= maxLen; i++) for (let s = 0; s < symCount; s++) if (length[s] === i) permute[pp++] = s
      for (let i = minLen; i <= maxLen; i++) temp[i] = limit[i] = 0
      for (let i = 0; i < symCount; i++) temp[length[i]!]!++
      pp = 0
      let tsum = 0
      for (let i = minLen; i < maxLen; i++) {
        pp += temp[i]!
        limit[i] = pp - 1
        pp <<= 1
        tsum += temp[i]!
        base[i + 1] = pp - tsum
      }
      limit[maxLen] = pp + temp[maxLen]! - 1
      base[minLen] = 0
    }

    for (let i = 0; i < 256; i++) {
      mtfSymbol[i] = i
      byteCount[i] = 0
    }
    let runPos = 0
    let run = 0
    let count = 0
    let groupLeft = 0
    let selector = 0
    let group = groups[0]!
    for (;;) {
      if (groupLeft-- === 0) {
        groupLeft = GROUP_SIZE - 1
        if (selector >= nSelectors) throw new Error('bzip2 block uses more selectors than it declares')
        group = groups[selectors[selector++]!]!
        if (!group) throw new Error('bzip2 selector names a missing Huffman group')
      }
      let i = group.minLen
      let j = this.bits(i)
      for (;;) {
        if (i > group.maxLen) throw new Error('bzip2 Huffman code not in the table')
        if (j <= group.limit[i]!) break
        i++
        j = (j << 1) | this.bits(1)
      }
      j -= group.base[i]!
      if (j < 0 || j >= MAX_SYMBOLS) throw new Error('bzip2 Huffman symbol out of range')
      const nextSym = group.permute[j]!
      if (nextSym === 0 || nextSym === 1) {
        // RUNA/RUNB: a run length in bijective base 2; bounded so it cannot overflow
        if (!runPos) {
          runPos = 1
          run = 0
        }
        run += nextSym === 0 ? runPos : 2 * runPos
        runPos <<= 1
        if (run > bufsize) throw new Error('bzip2 run is longer than the block')
        continue
      }
      if (runPos) {
        runPos = 0
        if (count + run > bufsize) throw new Error('bzip2 block is longer than its declared size')
        const uc = symToByte[mtfSymbol[0]!]!
        byteCount[uc]! += run
        tt.fill(uc, count, count + run)
        count += run
      }
      if (nextSym > symTotal) break
      if (count >= bufsize) throw new Error('bzip2 block is longer than its declared size')
      const k = nextSym - 1
      const uc = mtfSymbol[k]!
      for (let m = k - 1; m >= 0; m--) mtfSymbol[m + 1] = mtfSymbol[m]!
      mtfSymbol[0] = uc
      const b = symToByte[uc]!
      byteCount[b]!++
      tt[count++] = b
    }
    if (origPtr >= count) throw new Error('bzip2 block origin is beyond its data')
    let sum = 0
    for (let i = 0; i < 256; i++) {
      const k = sum + byteCount[i]!
      byteCount[i] = sum
      sum = k
    }
    for (let i = 0; i < count; i++) {
      const uc = tt[i]! & 0xff
      tt[byteCount[uc]!]! |= i << 8
      byteCount[uc]!++
    }
    this.left = count
    this.copies = 0
    this.crc = -1
    this.blockCrc = blockCrc
    if (count) {
      const p = tt[origPtr]!
      this.current = p & 0xff
      this.ttPos = p >> 8
      this.run = -1
    }
    this.at = 'output'
  }

  /** Up to 64 KiB of the current block: inverse BWT and the initial run-length expansion. */
  private output(): Buffer {
    const out = Buffer.allocUnsafe(OUT_CHUNK)
    const tt = this.tt
    let n = 0
    let { ttPos, current, run, left, copies, outByte, crc } = this
    while (n < OUT_CHUNK) {
      if (copies > 0) {
        out[n++] = outByte
        crc = (crc << 8) ^ CRC_TABLE[((crc >>> 24) ^ outByte) & 0xff]!
        copies--
        continue
      }
      if (left === 0) break
      left--
      const previous = current
      const p = tt[ttPos]!
      current = p & 0xff
      ttPos = p >> 8
      // four equal bytes are followed by a count of further copies
      if (run++ === 3) {
        copies = current
        outByte = previous
        current = -1
      } else {
        copies = 1
        outByte = current
      }
      if (current !== previous) run = 0
    }
    this.ttPos = ttPos
    this.current = current
    this.run = run
    this.left = left
    this.copies = copies
    this.outByte = outByte
    this.crc = crc
    if (left === 0 && copies === 0) {
      const got = ~crc >>> 0
      if (got !== this.blockCrc) throw new Error('bzip2 block CRC does not match: the data is damaged')
      this.streamCrc = (got ^ ((this.streamCrc << 1) | (this.streamCrc >>> 31))) >>> 0
      this.at = 'block'
    }
    return n === OUT_CHUNK ? out : out.subarray(0, n)
  }
}
