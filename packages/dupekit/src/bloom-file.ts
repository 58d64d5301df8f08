/**
 * @module Save and load Bloom filters in a versioned binary format with a checksum.
 *
 * Format version 1, little-endian:
 * ```
 * offset size  field
 *      0    4  magic "MBLF"
 *      4    2  format version (1)
 *      6    2  header size in bytes (48)
 *      8    4  hashes per key
 *     12    4  seed
 *     16    8  bits
 *     24    8  keys added
 *     32    8  payload size in bytes (bits / 8)
 *     40    8  reserved (0)
 *     48    …  payload: the filter's 32-bit words
 *    end    8  XXH64 (seed 0) of every byte before it
 * ```
 * Loading checks the magic, the version, the header's consistency, the length and the
 * checksum, and names the file in every error.
 */
import { randomBytes } from 'node:crypto'
import { endianness } from 'node:os'
import { logger } from '@marin/rigging'
import { readFile, rename, rm, writeFile } from 'node:fs/promises'
import { BloomFilter } from './bloom.js'
import { DupekitError } from './errors.js'
import { xxh64 } from './hash.js'

export const BLOOM_MAGIC = 'MBLF'
export const BLOOM_FORMAT_VERSION = 1
const HEADER = 48
const TRAILER = 8
// The payload is little-endian words: on little-endian hosts it is the Uint32Array's own bytes.
const LITTLE_ENDIAN = endianness() === 'LE'

/** The filter in the saved format. */
export function bloomToBytes(filter: BloomFilter): Uint8Array {
  const payload = filter.bits / 8
  const out = new Uint8Array(HEADER + payload + TRAILER)
  const dv = new DataView(out.buffer)
  out.set(new TextEncoder().encode(BLOOM_MAGIC), 0)
  dv.setUint16(4, BLOOM_FORMAT_VERSION, true)
  dv.setUint16(6, HEADER, true)
  dv.setUint32(8, filter.hashes, true)
  dv.setUint32(12, filter.seed, true)
  dv.setBigUint64(16, BigInt(filter.bits), true)
  dv.setBigUint64(24, BigInt(filter.added), true)
  dv.setBigUint64(32, BigInt(payload), true)
  const words = filter.words
  if (LITTLE_ENDIAN) out.set(new Uint8Array(words.buffer, words.byteOffset, words.byteLength), HEADER)
  else for (let i = 0; i < words.length; i++) dv.setUint32(HEADER + i * 4, words[i]!, true)
  dv.setBigUint64(HEADER + payload, xxh64(out.subarray(0, HEADER + payload)), true)
  return out
}

/** Parses the saved format; `source` (a file name) appears in every error. */
export function bloomFromBytes(bytes: Uint8Array, source = '<bytes>'): BloomFilter {
  const what = `Bloom filter file ${source}`
  const head = new TextDecoder().decode(bytes.subarray(0, 4))
  if (bytes.length < 4 && BLOOM_MAGIC.startsWith(head)) {
    throw new DupekitError(
      'BLOOM_TRUNCATED',
      `${what} is truncated: ${bytes.length} bytes, not even a header; re-create or re-copy the file`,
    )
  }
  if (head !== BLOOM_MAGIC) {
    throw new DupekitError(
      'BLOOM_FORMAT',
      `${what} is not a saved Bloom filter (no "${BLOOM_MAGIC}" magic); check the path`,
    )
  }
  if (bytes.length < HEADER + TRAILER) {
    throw new DupekitError(
      'BLOOM_TRUNCATED',
      `${what} is truncated: ${bytes.length} bytes, shorter than the ` +
        `${HEADER}-byte header; re-create or re-copy the file`,
    )
  }
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const version = dv.getUint16(4, true)
  if (version !== BLOOM_FORMAT_VERSION) {
    throw new DupekitError(
      'BLOOM_FORMAT',
      `${what} has format version ${version}; this @marin/dupekit ` +
        `reads version ${BLOOM_FORMAT_VERSION}: use a matching ` +
        `@marin/dupekit`,
    )
  }
  const headerSize = dv.getUint16(6, true)
  const hashes = dv.getUint32(8, true)
  const seed = dv.getUint32(12, true)
  const bits = Number(dv.getBigUint64(16, true))
  const added = Number(dv.getBigUint64(24, true))
  const payload = Number(dv.getBigUint64(32, true))
  if (
    headerSize !== HEADER ||
    bits < 64 ||
    bits % 64 !== 0 ||
    bits > 2 ** 32 ||
    payload !== bits / 8 ||
    hashes < 1 ||
    hashes > 64
  ) {
    throw new DupekitError(
      'BLOOM_CORRUPT',
      `${what} is corrupted: impossible header (header ${headerSize} ` +
        `bytes, ${bits} bits, ${payload} payload bytes, ${hashes} ` +
        `hashes); re-create the filter`,
    )
  }
  const expected = HEADER + payload + TRAILER
  if (bytes.length < expected) {
    throw new DupekitError(
      'BLOOM_TRUNCATED',
      `${what} is truncated: ${bytes.length} bytes, the header says ${expected}; re-create or re-copy the file`,
    )
  }
  if (bytes.length > expected) {
    throw new DupekitError(
      'BLOOM_CORRUPT',
      `${what} is corrupted: ${bytes.length} bytes, the header says ${expected}; re-create the filter`,
    )
  }
  const stored = dv.getBigUint64(HEADER + payload, true)
  const actual = xxh64(bytes.subarray(0, HEADER + payload))
  if (stored !== actual) {
    throw new DupekitError(
      'BLOOM_CORRUPT',
      `${what} is corrupted: checksum ${actual.toString(16)} does not ` +
        `match the stored ${stored.toString(16)}; re-create or re-copy the file`,
    )
  }
  const words = new Uint32Array(bits / 32)
  if (LITTLE_ENDIAN) new Uint8Array(words.buffer).set(bytes.subarray(HEADER, HEADER + payload))
  else for (let i = 0; i < words.length; i++) words[i] = dv.getUint32(HEADER + i * 4, true)
  return new BloomFilter(bits, hashes, seed, words, added)
}

/** Writes the filter to `path` atomically (a temporary file renamed into place). */
export async function saveBloom(filter: BloomFilter, path: string): Promise<void> {
  const tmp = `${path}.tmp-${process.pid}-${randomBytes(4).toString('hex')}`
  try {
    await writeFile(tmp, bloomToBytes(filter))
    await rename(tmp, path)
    logger('dupekit').debug(
      { path, bits: filter.bits, hashes: filter.hashes, added: filter.added },
      'saved bloom filter',
    )
  } catch (err) {
    await rm(tmp, { force: true })
    throw new DupekitError(
      'BLOOM_IO',
      `cannot save Bloom filter to ${path}: ${(err as Error).message}; check the directory exists and is writable`,
      { cause: err },
    )
  }
}

/** Reads a filter saved by `saveBloom`. */
export async function loadBloom(path: string): Promise<BloomFilter> {
  let bytes: Uint8Array
  try {
    bytes = await readFile(path)
  } catch (err) {
    throw new DupekitError(
      'BLOOM_IO',
      `cannot read Bloom filter file ${path}: ${(err as Error).message}; check the path`,
      { cause: err },
    )
  }
  return bloomFromBytes(bytes, path)
}
