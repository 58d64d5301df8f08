/**
 * @module Generations of `file://` objects: `inode-mtimeNs-size`, made unique.
 *
 * Inode numbers are reused after a file is deleted and the kernel's mtime
 * clock is coarse (a timer tick), so on its own that triple could repeat: the
 * same bytes rewritten within one tick may land on a recycled inode (ABA).
 * While holding the object's lock, each commit therefore stamps the new file's
 * mtime at least 2 µs past the current object's mtime (`stampGeneration`): an
 * object's generation never repeats while it exists. After a delete, a
 * re-created object would need the same inode, the same size and the same
 * microsecond mtime to collide. Files written behind our back still get a new
 * generation from the kernel's inode and mtime.
 */
import type { BigIntStats } from 'node:fs'
import type { FileHandle } from 'node:fs/promises'
import type { ObjectInfo } from './types.js'

// A wall clock with sub-millisecond resolution (Date.now() is only ms).
const clockOffset = BigInt(Date.now()) * 1_000_000n - process.hrtime.bigint()
const nowNs = (): bigint => process.hrtime.bigint() + clockOffset

export const generationOf = (st: BigIntStats): string =>
  `${st.ino.toString(16)}-${st.mtimeNs.toString(16)}-${st.size.toString(16)}`

export const infoOf = (path: string, st: BigIntStats): ObjectInfo => ({
  path,
  size: Number(st.size),
  mtimeMs: Number(st.mtimeNs / 1000n) / 1000,
  generation: generationOf(st),
})

/**
 * Sets the mtime of the staged file `fh` to now, or to 2 µs past `cur`'s mtime
 * if that is later, and returns its stat (which its generation comes from).
 * Call it under the object's lock, just before the rename.
 */
export async function stampGeneration(fh: FileHandle, cur: BigIntStats | undefined): Promise<BigIntStats> {
  let want = nowNs()
  if (cur && want < cur.mtimeNs + 2000n) want = cur.mtimeNs + 2000n
  for (;;) {
    // utimes takes seconds as a double: ~0.24 µs resolution today, so check and bump.
    const sec = Number(want) / 1e9
    await fh.utimes(sec, sec)
    const st = await fh.stat({ bigint: true })
    if (!cur || st.mtimeNs > cur.mtimeNs) return st
    want += 1000n
  }
}
