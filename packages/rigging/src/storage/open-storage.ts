/** @module `openStorage(url)`: the one way packages get a `Storage` for a URL. */
import { isAbsolute, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { RiggingError } from '../errors.js'
import { FileStorage } from './file.js'
import type { FileLockOptions } from './file-lock.js'
import { openGcsStorage } from './gcs.js'
import type { GcsStorageOptions } from './gcs.js'
import { MemoryStorage } from './memory.js'
import { openS3Storage } from './s3.js'
import type { S3StorageOptions } from './s3.js'
import type { Storage } from './types.js'

/** The URL schemes `openStorage` understands. */
export const STORAGE_SCHEMES = ['file://', 'memory://', 's3://', 'gs://'] as const

export type OpenStorageOptions = {
  /** For `file://`: how object locks wait and when a lock counts as stale. */
  readonly lock?: FileLockOptions
  /** For `file://`: objects created 0600 and folders 0700 (see `FileStorageOptions.private`). @default false */
  readonly private?: boolean
  /** For `s3://`: options of the S3 client (region, endpoint, forcePathStyle, credentials). */
  readonly s3?: S3StorageOptions
  /** For `gs://`: options of the GCS client (projectId, keyFilename, apiEndpoint). */
  readonly gcs?: GcsStorageOptions
}

const SCHEME = /^([a-zA-Z][a-zA-Z0-9+.-]*):\/\//

const fileOptions = (opts: OpenStorageOptions) => ({
  ...(opts.lock ? { lock: opts.lock } : {}),
  ...(opts.private ? { private: true } : {}),
})

/**
 * Opens the storage a URL names:
 * - `file:///abs/dir` or a plain local path (`./.marin`, `/data/x`): files under that directory;
 * - `memory://name`: a process-wide in-memory store shared by every opener of that name;
 * - `s3://bucket/prefix`, `gs://bucket/prefix`: object stores, through the optional
 *   peers `@aws-sdk/client-s3` and `@google-cloud/storage` (STORAGE_ADAPTER_MISSING
 *   names the package to add when it is not installed).
 *
 * @example
 * const store = await openStorage(marinPrefix())
 * await store.write('artifacts/x/HEAD', 'v1', { condition: { ifAbsent: true } })
 * @throws RiggingError('STORAGE_UNKNOWN_SCHEME') for any other scheme.
 */
export async function openStorage(url: string, opts: OpenStorageOptions = {}): Promise<Storage> {
  const m = SCHEME.exec(url)
  if (!m) {
    if (url === '')
      throw new RiggingError('STORAGE_INVALID_PATH', 'storage URL is empty; pass e.g. file:///data/marin or ./.marin')
    return new FileStorage(resolve(url), fileOptions(opts))
  }
  const scheme = m[1]!.toLowerCase()
  const rest = url.slice(m[0].length)
  switch (scheme) {
    case 'file': {
      let path: string
      try {
        path = fileURLToPath(url)
      } catch (err) {
        throw new RiggingError(
          'STORAGE_INVALID_PATH',
          `storage URL ${url}: not a local file URL (${(err as Error).message}); use file:///absolute/path`,
          { cause: err },
        )
      }
      if (!isAbsolute(path)) {
        throw new RiggingError(
          'STORAGE_INVALID_PATH',
          `storage URL ${url}: file URLs need an absolute path; use file:///absolute/path`,
        )
      }
      return new FileStorage(path, fileOptions(opts))
    }
    case 'memory':
      return new MemoryStorage(rest.replace(/\/+$/, ''))
    case 's3':
      return openS3Storage(url, opts.s3)
    case 'gs':
      return openGcsStorage(url, opts.gcs)
    default:
      throw new RiggingError(
        'STORAGE_UNKNOWN_SCHEME',
        `storage URL ${url}: unknown scheme "${scheme}://"; supported: ` +
          `${STORAGE_SCHEMES.join(', ')} (or a plain local path)`,
      )
  }
}
