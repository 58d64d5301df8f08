/**
 * @module Text to tokens the way fastText's dictionary reads them: tokens are the runs between
 * the seven bytes fastText treats as space (space, `\n`, `\r`, `\t`, `\v`, `\f`, NUL), every
 * example ends with the end-of-sentence token `</s>`, and a token's hash is 32-bit FNV-1a over
 * its UTF-8 bytes, each byte sign-extended first as fastText's `int8_t` cast does (so non-ASCII
 * words hash as they do in fastText). Word n-grams combine those hashes in 64-bit arithmetic and
 * land in `bucket` rows after the vocabulary, as fastText's `addWordNgrams` places them.
 *
 * Nothing here allocates per byte: a token is one `slice` and one hash; the 64-bit steps are done
 * on two 32-bit halves.
 */

/** The end-of-sentence token fastText appends to every line. */
export const EOS = '</s>'

/** Where labels start: a token beginning with this is a label, not a word (fastText's `-label`). */
export const LABEL_PREFIX = '__label__'

const FNV_OFFSET = 0x811c9dc5
const FNV_PRIME = 0x01000193
/** fastText's multiplier when it folds one word hash into the hash of an n-gram. */
const NGRAM_MUL = 116049371
const TWO32 = 4294967296

function isSpace(c: number): boolean {
  return c === 32 || c === 10 || c === 13 || c === 9 || c === 11 || c === 12 || c === 0
}

/** One byte folded into an FNV-1a state: the byte is sign-extended, as `uint32_t(int8_t(b))` is. */
function fnvByte(h: number, b: number): number {
  return Math.imul(h ^ (b >= 0x80 ? b | 0xffffff00 : b), FNV_PRIME)
}

/** fastText's hash of `s` (unsigned 32-bit), over its UTF-8 bytes, from `start` to `end`. */
export function fastTextHash(s: string, start = 0, end = s.length): number {
  let h = FNV_OFFSET
  for (let i = start; i < end; i++) {
    let c = s.charCodeAt(i)
    if (c < 0x80) {
      h = Math.imul(h ^ c, FNV_PRIME)
      continue
    }
    if (c >= 0xd800 && c < 0xdc00 && i + 1 < end) {
      const d = s.charCodeAt(i + 1)
      if (d >= 0xdc00 && d < 0xe000) {
        c = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00)
        i++
      }
    }
    if (c >= 0xd800 && c < 0xe000) c = 0xfffd // a lone surrogate is written as U+FFFD in UTF-8
    if (c < 0x800) {
      h = fnvByte(h, 0xc0 | (c >> 6))
    } else if (c < 0x10000) {
      h = fnvByte(h, 0xe0 | (c >> 12))
      h = fnvByte(h, 0x80 | ((c >> 6) & 63))
    } else {
      h = fnvByte(h, 0xf0 | (c >> 18))
      h = fnvByte(h, 0x80 | ((c >> 12) & 63))
      h = fnvByte(h, 0x80 | ((c >> 6) & 63))
    }
    h = fnvByte(h, 0x80 | (c & 63))
  }
  return h >>> 0
}

/**
 * Calls `fn(token, hash)` for each whitespace-separated token of `text` and then once for `</s>`,
 * as fastText reads one line. A newline inside `text` is a separator like any space (one example
 * is one line: documents are scored whole, as Marin's filters join their lines).
 */
export function forEachToken(text: string, fn: (token: string, hash: number) => void): void {
  const n = text.length
  let i = 0
  while (i < n) {
    while (i < n && isSpace(text.charCodeAt(i))) i++
    if (i >= n) break
    const start = i
    while (i < n && !isSpace(text.charCodeAt(i))) i++
    fn(text.slice(start, i), fastTextHash(text, start, i))
  }
  fn(EOS, EOS_HASH)
}

/** The hash of `</s>`. */
export const EOS_HASH = fastTextHash(EOS)

/**
 * Appends the bucket rows of the word n-grams (2 to `n` words) of the word hashes in
 * `hashes[0..count)` to `out` from `at`, returning the new end. Rows are `nwords + (h mod bucket)`
 * where `h` starts as a word's hash sign-extended to 64 bits and takes each next word's hash as
 * `h * 116049371 + hash`, modulo 2^64, as fastText computes them.
 */
export function addWordNgrams(
  hashes: Int32Array,
  count: number,
  n: number,
  bucket: number,
  nwords: number,
  out: Int32Array,
  at: number,
): number {
  if (n <= 1 || bucket <= 0) return at
  const r32 = TWO32 % bucket
  for (let i = 0; i < count; i++) {
    let lo = hashes[i]! >>> 0
    let hi = hashes[i]! < 0 ? 0xffffffff : 0
    for (let j = i + 1; j < count && j < i + n; j++) {
      // (hi, lo) *= NGRAM_MUL, on 16-bit pieces of lo so that no product passes 2^53
      const p0 = (lo & 0xffff) * NGRAM_MUL
      const p1 = (lo >>> 16) * NGRAM_MUL
      const s = (p1 % 65536) * 65536 + p0
      const carry = Math.floor(p1 / 65536) + Math.floor(s / TWO32)
      lo = s % TWO32
      hi = (Math.imul(hi, NGRAM_MUL) + carry) >>> 0
      // (hi, lo) += the next hash, sign-extended
      const x = hashes[j]!
      lo += x >>> 0
      if (lo >= TWO32) {
        lo -= TWO32
        hi = (hi + 1) >>> 0
      }
      if (x < 0) hi = (hi + 0xffffffff) >>> 0
      // (hi * 2^32 + lo) mod bucket, without a product past 2^53
      const id = (((hi % bucket) * r32) % bucket) + (lo % bucket)
      out[at++] = nwords + (id >= bucket ? id - bucket : id)
    }
  }
  return at
}
