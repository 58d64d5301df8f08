/**
 * @module The local input cache: objects from non-local storage (buckets,
 * `memory://`) are downloaded once into a local folder and read from there.
 *
 * A cached copy is keyed by URL and the object's generation, so a rewritten
 * object is fetched again and a stale copy is never read. Copies appear
 * atomically (temp file + rename), so concurrent workers on one host share
 * them safely. Nothing is evicted: point the cache at scratch disk and clear it
 * between projects.
 */
import { createHash, randomBytes } from 'node:crypto'
import { createWriteStream } from 'node:fs'
import { mkdir, rename, rm, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { pipeline } from 'node:stream/promises'
import type { TaskCounters } from '../counters.js'
import { countingTransform, notFound } from './byte-streams.js'
import type { Location } from './location.js'

let cacheDir: string | undefined

/** Turns the cache on (a local folder) or off (`undefined`) for this process. */
export function setInputCache(dir: string | undefined): void {
  cacheDir = dir
}

/**
 * A local file holding the object at `loc`: its own path for `file://`, a
 * cached copy when the cache is on, `undefined` otherwise. Bytes downloaded
 * are counted as read.
 */
export async function localCopy(loc: Location, counters?: TaskCounters): Promise<string | undefined> {
  const own = loc.storage.localPath(loc.path)
  if (own !== undefined || cacheDir === undefined) return own
  const info = await loc.storage.stat(loc.path)
  if (!info) throw notFound(loc.url, undefined)
  const key = createHash('sha256').update(`${loc.url}\n${info.generation}`).digest('hex').slice(0, 32)
  const ext = /\.[a-z0-9.]+$/i.exec(loc.path.slice(loc.path.lastIndexOf('/') + 1))?.[0] ?? ''
  const file = join(cacheDir, key.slice(0, 2), `${key}${ext}`)
  try {
    if ((await stat(file)).size === info.size) return file
  } catch {
    // not cached yet
  }
  await mkdir(join(cacheDir, key.slice(0, 2)), { recursive: true })
  const tmp = `${file}.tmp-${randomBytes(6).toString('hex')}`
  try {
    await pipeline(
      await loc.storage.readStream(loc.path),
      countingTransform(counters, 'bytesRead'),
      createWriteStream(tmp),
    )
    await rename(tmp, file)
  } catch (err) {
    await rm(tmp, { force: true })
    throw err
  }
  return file
}
