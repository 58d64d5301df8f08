/**
 * @module A Writable that spools to a local temp file and hands the finished
 * file to `commit` (an object-store upload). Object stores make an upload
 * visible only when it completes, so the object appears atomically; a stream
 * that is destroyed or errors deletes its spool and uploads nothing.
 */
import { randomBytes } from 'node:crypto'
import { createWriteStream } from 'node:fs'
import { unlink } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Writable } from 'node:stream'
import { finished } from 'node:stream/promises'

/** `commit(path, size)` uploads the spooled file; its error becomes the stream's error. */
export function spoolWriter(commit: (file: string, size: number) => Promise<void>): Writable {
  const file = join(tmpdir(), `rigging-spool-${process.pid}-${randomBytes(6).toString('hex')}`)
  const out = createWriteStream(file, { flags: 'wx', mode: 0o600 })
  // Errors reach us through write callbacks and finished(); keep them from going unhandled.
  out.on('error', () => undefined)
  let size = 0
  const drop = () => unlink(file).catch(() => undefined)
  return new Writable({
    highWaterMark: 1 << 20,
    write(chunk: Buffer, _enc, cb) {
      size += chunk.byteLength
      out.write(chunk, (err) => cb(err ?? null))
    },
    final(cb) {
      out.end()
      finished(out)
        .then(() => commit(file, size))
        .then(
          () => drop().then(() => cb()),
          (err: Error) => drop().then(() => cb(err)),
        )
    },
    destroy(err, cb) {
      out.destroy()
      drop().then(() => cb(err))
    },
  })
}
