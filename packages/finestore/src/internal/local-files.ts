/** @module Direct file access for `file://` storage, through the paths `Storage.localPath` hands out. */
import { type FileHandle, mkdir, open } from 'node:fs/promises'
import { dirname } from 'node:path'
import type { Readable } from 'node:stream'
import { type Copied, copyHashing, writeHashing } from './copy-hashing.js'

const CHUNK = 1 << 20

/**
 * On `file://` a temp upload is written straight to its new file (`localPath`),
 * hashed in the same pass, and (with `fsync`) made durable before it can get a
 * blob name: the storage's own object writes would add a lock, a rename and a
 * directory fsync per object that a name nobody else uses does not need.
 */
export async function writeLocalHashing(
  src: AsyncIterable<Uint8Array> | { readonly file: string },
  file: string,
  fsync: boolean,
): Promise<Copied> {
  await mkdir(dirname(file), { recursive: true })
  const out = await open(file, 'wx')
  try {
    if (!('file' in src)) return await writeHashing(src, out, { fsync })
    const from = await open(src.file, 'r')
    try {
      return await copyHashing(from, out, { fsync })
    } finally {
      await from.close()
    }
  } finally {
    await out.close()
  }
}

/** A local blob file opened for reading; a missing file reads as the storage's not-found error. */
export async function openLocalHandle(file: string, path: string): Promise<FileHandle> {
  try {
    return await open(file, 'r')
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') {
      throw Object.assign(new Error(`object ${path} does not exist`), { code: 'STORAGE_NOT_FOUND', cause: err })
    }
    throw err
  }
}

/** A local blob file as a stream; a missing file reads as the storage's not-found error. */
export async function openLocal(file: string, path: string): Promise<Readable> {
  return (await openLocalHandle(file, path)).createReadStream({ highWaterMark: CHUNK })
}
