/**
 * @module GPT-2's byte-level alphabet: every byte 0–255 is shown as one printable
 * Unicode character, so that a BPE vocabulary of strings covers any byte sequence
 * (and hence any UTF-8 text, including bytes never seen in training).
 */

/** `BYTE_TO_CHAR[b]` is the character that stands for byte `b` (`' '` → `'Ġ'`). */
export const BYTE_TO_CHAR: readonly string[] = (() => {
  const printable: number[] = []
  for (let b = 0x21; b <= 0x7e; b++) printable.push(b)
  for (let b = 0xa1; b <= 0xac; b++) printable.push(b)
  for (let b = 0xae; b <= 0xff; b++) printable.push(b)
  const out = new Array<string>(256)
  for (const b of printable) out[b] = String.fromCharCode(b)
  let next = 0
  for (let b = 0; b < 256; b++) if (out[b] === undefined) out[b] = String.fromCharCode(256 + next++)
  return out
})()

/** The inverse of `BYTE_TO_CHAR`, by char code; -1 for characters outside the alphabet. */
export const CHAR_TO_BYTE: Int16Array = (() => {
  const out = new Int16Array(512).fill(-1)
  BYTE_TO_CHAR.forEach((ch, b) => (out[ch.charCodeAt(0)] = b))
  return out
})()

/** The bytes a byte-level token string stands for; `undefined` if it has a character outside the alphabet. */
export function symbolsToBytes(token: string): Uint8Array | undefined {
  const out = new Uint8Array(token.length)
  for (let i = 0; i < token.length; i++) {
    const code = token.charCodeAt(i)
    const b = code < 512 ? CHAR_TO_BYTE[code]! : -1
    if (b < 0) return undefined
    out[i] = b
  }
  return out
}
