/** @module Direct file access for `file://` storage, through the paths `Storage.localPath` hands out. */
import { createWriteStream } from 'node:fs'
import { mkdir, open } from 'node:fs/promises'
import { dirname } from 'node:path'
import type { Readable, Transform } from 'node:stream'
import { pipeline } from 'node:stream/promises'

const CHUNK = 1 << 20

/**
 * On `file://` the temp upload is written straight to its file (`localPath`),
 * in large chunks, and (with `fsync`) made durable before it can get a blob name:
 * the storage's own object writes would add a lock and a rename per object that
 * a name nobody else uses does not need.
 */
export async function writeLocalFile(src: Readable, hasher: Transform, file: string, fsync: boolean): Promise<void> {
  await mkdir(dirname(file), { recursive: true })
  await pipeline(src, hasher, createWriteStream(file, { flags: 'wx', highWaterMark: CHUNK }))
  if (!fsync) return
  // fsync through a second descriptor: it flushes the file's data whichever descriptor wrote it.
  const fh = await open(file, 'r')
  try {
    await fh.sync()
  } finally {
    await fh.close()
  }
}

export async function fsyncDir(dir: string): Promise<void> {
  const fh = await open(dir, 'r')
  try {
    await fh.sync()
  } finally {
    await fh.close()
  }
}

/** A local blob file as a stream; a missing file reads as the storage's not-found error. */
export async function openLocal(file: string, path: string): Promise<Readable> {
  try {
    const fh = await open(file, 'r')
    return fh.createReadStream({ highWaterMark: CHUNK })
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') {
      throw Object.assign(new Error(`object ${path} does not exist`), { code: 'STORAGE_NOT_FOUND', cause: err })
    }
    throw err
  }
}
