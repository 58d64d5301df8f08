/**
 * @module `gs://bucket/prefix` over the optional peer `@google-cloud/storage`.
 *
 * GCS gives every write of an object a new generation number, which is our
 * generation. Conditional writes pass `ifGenerationMatch`: `0` for
 * create-if-absent, the generation for replace-if-unchanged; GCS answers 412
 * and changes nothing when the condition fails. Uploads become visible only
 * when complete.
 */
import { Readable } from 'node:stream'
import type { Writable } from 'node:stream'
import { RiggingError } from '../errors.js'
import { checkPath, checkPrefix } from './paths.js'
import { importPeer } from './peer.js'
import { parseBucketUrl } from './s3.js'
import { spoolWriter } from './spool.js'
import type { ListOptions, ObjectInfo, Storage, WriteOptions } from './types.js'

/** The part of `@google-cloud/storage` this adapter uses. */
type GcsMetadata = { name?: string; generation?: string | number; size?: string | number; updated?: string }
type GcsFile = {
  name: string
  metadata: GcsMetadata
  download(): Promise<[Buffer]>
  save(data: Buffer | Uint8Array, opts: Record<string, unknown>): Promise<void>
  createReadStream(opts: { start?: number; end?: number }): Readable
  getMetadata(): Promise<[GcsMetadata]>
  delete(opts: Record<string, unknown>): Promise<unknown>
}
type GcsBucket = {
  file(name: string): GcsFile
  upload(path: string, opts: Record<string, unknown>): Promise<[GcsFile]>
  getFiles(query: Record<string, unknown>): Promise<[GcsFile[], Record<string, unknown> | null | undefined, unknown?]>
}
type GcsModule = { Storage: new (opts: Record<string, unknown>) => { bucket(name: string): GcsBucket } }

/** The npm package the `gs://` adapter needs. */
export const GCS_PEER = '@google-cloud/storage'

export type GcsStorageOptions = {
  /** Passed to `new Storage(...)`: projectId, keyFilename, apiEndpoint. @default {} (application default credentials)
   * */
  readonly client?: Record<string, unknown>
}

/** Opens `gs://bucket/prefix`; throws STORAGE_ADAPTER_MISSING when the client library is not installed. */
export async function openGcsStorage(url: string, opts: GcsStorageOptions = {}): Promise<Storage> {
  const { bucket, prefix } = parseBucketUrl(url, 'gs')
  const sdk = await importPeer<GcsModule>(GCS_PEER, url)
  return new GcsStorage(url, prefix, new sdk.Storage(opts.client ?? {}).bucket(bucket))
}

const status = (err: unknown): number | undefined => {
  const code = (err as { code?: unknown }).code
  return typeof code === 'number' ? code : undefined
}

const precondition = (opts: WriteOptions): Record<string, unknown> => {
  const c = opts.condition
  if (!c) return {}
  return { preconditionOpts: { ifGenerationMatch: 'ifAbsent' in c ? 0 : c.ifGeneration } }
}

class GcsStorage implements Storage {
  constructor(
    readonly url: string,
    private readonly prefix: string,
    private readonly bucket: GcsBucket,
  ) {}

  private key(rel: string): string {
    return this.prefix ? `${this.prefix}/${rel}` : rel
  }

  private info(rel: string, m: GcsMetadata): ObjectInfo {
    return {
      path: rel,
      size: Number(m.size ?? 0),
      mtimeMs: m.updated ? Date.parse(m.updated) : 0,
      generation: String(m.generation),
    }
  }

  private fail(err: unknown, op: string, rel: string): RiggingError {
    if (err instanceof RiggingError) return err
    const code = status(err)
    const where = `storage ${this.url}: cannot ${op} ${rel}`
    const detail = (err as Error).message
    if (code === 404)
      return new RiggingError('STORAGE_NOT_FOUND', `${where}: it does not exist (${detail})`, { cause: err })
    if (code === 412) {
      return new RiggingError(
        'STORAGE_CONDITION_FAILED',
        `${where}: its generation condition does not hold (${detail}); re-read it and retry`,
        {
          cause: err,
        },
      )
    }
    if (code === 401 || code === 403) {
      return new RiggingError(
        'STORAGE_PERMISSION',
        `${where}: access denied (${detail}); check GOOGLE_APPLICATION_CREDENTIALS and the bucket's IAM roles`,
        { cause: err },
      )
    }
    return new RiggingError('STORAGE_IO', `${where}: ${detail}`, { cause: err })
  }

  async read(path: string): Promise<Uint8Array> {
    const rel = checkPath(path, this.url)
    try {
      const [buf] = await this.bucket.file(this.key(rel)).download()
      return new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength)
    } catch (err) {
      throw this.fail(err, 'read', rel)
    }
  }

  async readText(path: string): Promise<string> {
    return new TextDecoder().decode(await this.read(path))
  }

  async write(path: string, data: Uint8Array | string, opts: WriteOptions = {}): Promise<ObjectInfo> {
    const rel = checkPath(path, this.url)
    const file = this.bucket.file(this.key(rel))
    try {
      await file.save(typeof data === 'string' ? Buffer.from(data) : data, { resumable: false, ...precondition(opts) })
      return this.info(rel, file.metadata)
    } catch (err) {
      throw this.fail(err, 'write', rel)
    }
  }

  async readStream(path: string, range: { start?: number; end?: number } = {}): Promise<Readable> {
    const rel = checkPath(path, this.url)
    if (!(await this.stat(rel)))
      throw new RiggingError('STORAGE_NOT_FOUND', `storage ${this.url}: object ${rel} does not exist`)
    const start = range.start ?? 0
    if (range.end !== undefined && range.end <= start) {
      return Readable.from([])
    }
    return this.bucket
      .file(this.key(rel))
      .createReadStream({ start, ...(range.end !== undefined ? { end: range.end - 1 } : {}) })
  }

  async writeStream(path: string, opts: WriteOptions = {}): Promise<Writable> {
    const rel = checkPath(path, this.url)
    return spoolWriter(async (file) => {
      try {
        await this.bucket.upload(file, { destination: this.key(rel), resumable: false, ...precondition(opts) })
      } catch (err) {
        throw this.fail(err, 'write', rel)
      }
    })
  }

  async *list(prefix = '', opts: ListOptions = {}): AsyncIterable<ObjectInfo> {
    const pre = checkPrefix(prefix, this.url)
    const strip = this.prefix ? this.prefix.length + 1 : 0
    let query: Record<string, unknown> | undefined = {
      prefix: this.key(pre),
      autoPaginate: false,
      ...(opts.recursive === false ? { delimiter: '/' } : {}),
    }
    while (query) {
      let page: Awaited<ReturnType<GcsBucket['getFiles']>>
      try {
        page = await this.bucket.getFiles(query)
      } catch (err) {
        throw this.fail(err, 'list', pre || '/')
      }
      for (const f of page[0]) yield this.info(f.name.slice(strip), f.metadata)
      // Follow the API's nextPageToken: with autoPaginate off, the library hands the
      // last query back even after the last page, so its "next query" never ends.
      const token = (page[2] as { nextPageToken?: string } | undefined)?.nextPageToken
      query = page[1] && token ? { ...query, pageToken: token } : undefined
    }
  }

  async stat(path: string): Promise<ObjectInfo | undefined> {
    const rel = checkPath(path, this.url)
    try {
      const [m] = await this.bucket.file(this.key(rel)).getMetadata()
      return this.info(rel, m)
    } catch (err) {
      if (status(err) === 404) return undefined
      throw this.fail(err, 'stat', rel)
    }
  }

  async exists(path: string): Promise<boolean> {
    return (await this.stat(path)) !== undefined
  }

  async delete(path: string, opts: { readonly ifGeneration?: string } = {}): Promise<void> {
    const rel = checkPath(path, this.url)
    try {
      await this.bucket
        .file(this.key(rel))
        .delete(opts.ifGeneration !== undefined ? { ifGenerationMatch: opts.ifGeneration } : {})
    } catch (err) {
      if (status(err) === 404 && opts.ifGeneration === undefined) return
      if (status(err) === 404) {
        throw new RiggingError(
          'STORAGE_CONDITION_FAILED',
          `storage ${this.url}: ${rel} is absent, not at generation ${opts.ifGeneration}; not deleted`,
        )
      }
      throw this.fail(err, 'delete', rel)
    }
  }

  localPath(): undefined {
    return undefined
  }
}
