/**
 * @module `s3://bucket/prefix` over the optional peer `@aws-sdk/client-s3`.
 *
 * Conditional writes use S3's own preconditions: `If-None-Match: *` for
 * create-if-absent and `If-Match: <etag>` for replace-if-generation; S3 answers
 * 412 (or 409 for a concurrent conditional write) and changes nothing when the
 * condition fails. The generation is the object's ETag. Note: for a plain
 * (non-multipart) upload the ETag is the MD5 of the bytes, so rewriting the
 * exact same bytes keeps the same generation; writers that need every write
 * to be distinguishable (leases do this) include something that changes.
 */
import { createReadStream } from 'node:fs'
import { Readable } from 'node:stream'
import type { Writable } from 'node:stream'
import { RiggingError } from '../errors.js'
import { checkPath, checkPrefix } from './paths.js'
import { importPeer } from './peer.js'
import { spoolWriter } from './spool.js'
import type { ListOptions, ObjectInfo, Storage, WriteOptions } from './types.js'

/** The part of `@aws-sdk/client-s3` this adapter uses. */
type S3Module = {
  S3Client: new (config: Record<string, unknown>) => S3Client
  PutObjectCommand: new (input: Record<string, unknown>) => unknown
  GetObjectCommand: new (input: Record<string, unknown>) => unknown
  HeadObjectCommand: new (input: Record<string, unknown>) => unknown
  DeleteObjectCommand: new (input: Record<string, unknown>) => unknown
  ListObjectsV2Command: new (input: Record<string, unknown>) => unknown
}
type S3Client = { send(command: unknown): Promise<Record<string, unknown>> }
type S3Error = Error & { $metadata?: { httpStatusCode?: number }; Code?: string }

/** The npm package the `s3://` adapter needs. */
export const S3_PEER = '@aws-sdk/client-s3'

export type S3StorageOptions = {
  /** Passed to `new S3Client(...)`: region, endpoint, forcePathStyle, credentials. @default {} (the SDK's environment
   * and profile chain) */
  readonly client?: Record<string, unknown>
}

/** Opens `s3://bucket/prefix`; throws STORAGE_ADAPTER_MISSING when the SDK is not installed. */
export async function openS3Storage(url: string, opts: S3StorageOptions = {}): Promise<Storage> {
  const { bucket, prefix } = parseBucketUrl(url, 's3')
  const sdk = await importPeer<S3Module>(S3_PEER, url)
  // The SDK warns on every process under Node < 22 that its releases after January 2027 will need Node 22: the
  // release the lockfile pins runs on Node 20, so the warning names nothing a user can act on. Unless the user has
  // chosen for themselves, it is off.
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true'
  return new S3Storage(url, bucket, prefix, sdk, new sdk.S3Client(opts.client ?? {}))
}

/** `scheme://bucket/some/prefix` → bucket and prefix (no leading or trailing `/`). */
export function parseBucketUrl(url: string, scheme: string): { bucket: string; prefix: string } {
  const m = new RegExp(`^${scheme}://([^/]+)(?:/(.*))?$`).exec(url)
  if (!m?.[1]) {
    throw new RiggingError(
      'STORAGE_INVALID_PATH',
      `storage URL ${url}: expected ${scheme}://bucket or ${scheme}://bucket/prefix`,
    )
  }
  const prefix = (m[2] ?? '').replace(/^\/+|\/+$/g, '')
  if (prefix !== '') checkPath(prefix, url)
  return { bucket: m[1], prefix }
}

const status = (err: unknown): number | undefined => (err as S3Error).$metadata?.httpStatusCode

class S3Storage implements Storage {
  constructor(
    readonly url: string,
    private readonly bucket: string,
    private readonly prefix: string,
    private readonly sdk: S3Module,
    private readonly client: S3Client,
  ) {}

  private key(rel: string): string {
    return this.prefix ? `${this.prefix}/${rel}` : rel
  }

  private fail(err: unknown, op: string, rel: string): RiggingError {
    if (err instanceof RiggingError) return err
    const code = status(err)
    const where = `storage ${this.url}: cannot ${op} ${rel}`
    const detail = `${(err as Error).name}: ${(err as Error).message}`
    if (code === 404)
      return new RiggingError('STORAGE_NOT_FOUND', `${where}: it does not exist (${detail})`, { cause: err })
    if (code === 412 || code === 409) {
      return new RiggingError(
        'STORAGE_CONDITION_FAILED',
        `${where}: its condition does not hold (${detail}); re-read it and retry`,
        { cause: err },
      )
    }
    if (code === 401 || code === 403) {
      return new RiggingError(
        'STORAGE_PERMISSION',
        `${where}: access denied (${detail}); check the AWS credentials ` +
          `(AWS_PROFILE, AWS_ACCESS_KEY_ID) and the bucket policy`,
        { cause: err },
      )
    }
    return new RiggingError('STORAGE_IO', `${where}: ${detail}`, { cause: err })
  }

  async read(path: string): Promise<Uint8Array> {
    const rel = checkPath(path, this.url)
    try {
      const out = await this.client.send(new this.sdk.GetObjectCommand({ Bucket: this.bucket, Key: this.key(rel) }))
      return await (out.Body as { transformToByteArray(): Promise<Uint8Array> }).transformToByteArray()
    } catch (err) {
      throw this.fail(err, 'read', rel)
    }
  }

  async readText(path: string): Promise<string> {
    return new TextDecoder().decode(await this.read(path))
  }

  private async put(rel: string, body: unknown, size: number, opts: WriteOptions): Promise<ObjectInfo> {
    const c = opts.condition
    try {
      const out = await this.client.send(
        new this.sdk.PutObjectCommand({
          Bucket: this.bucket,
          Key: this.key(rel),
          Body: body,
          ContentLength: size,
          ...(c && 'ifAbsent' in c ? { IfNoneMatch: '*' } : {}),
          ...(c && 'ifGeneration' in c ? { IfMatch: c.ifGeneration } : {}),
        }),
      )
      return { path: rel, size, mtimeMs: Date.now(), generation: String(out.ETag) }
    } catch (err) {
      throw this.fail(err, 'write', rel)
    }
  }

  async write(path: string, data: Uint8Array | string, opts: WriteOptions = {}): Promise<ObjectInfo> {
    const rel = checkPath(path, this.url)
    const body = typeof data === 'string' ? Buffer.from(data) : data
    return this.put(rel, body, body.byteLength, opts)
  }

  async readStream(path: string, range: { start?: number; end?: number } = {}): Promise<Readable> {
    const rel = checkPath(path, this.url)
    const start = range.start ?? 0
    if (range.end !== undefined && range.end <= start) {
      if (!(await this.stat(rel)))
        throw this.fail(Object.assign(new Error('NotFound'), { $metadata: { httpStatusCode: 404 } }), 'read', rel)
      return Readable.from([])
    }
    const Range =
      start > 0 || range.end !== undefined
        ? `bytes=${start}-${range.end !== undefined ? range.end - 1 : ''}`
        : undefined
    try {
      const out = await this.client.send(
        new this.sdk.GetObjectCommand({ Bucket: this.bucket, Key: this.key(rel), ...(Range ? { Range } : {}) }),
      )
      return out.Body as Readable
    } catch (err) {
      throw this.fail(err, 'read', rel)
    }
  }

  async writeStream(path: string, opts: WriteOptions = {}): Promise<Writable> {
    const rel = checkPath(path, this.url)
    return spoolWriter(async (file, size) => {
      await this.put(rel, createReadStream(file), size, opts)
    })
  }

  async *list(prefix = '', opts: ListOptions = {}): AsyncIterable<ObjectInfo> {
    const pre = checkPrefix(prefix, this.url)
    const strip = this.prefix ? this.prefix.length + 1 : 0
    let token: string | undefined
    do {
      let out: Record<string, unknown>
      try {
        out = await this.client.send(
          new this.sdk.ListObjectsV2Command({
            Bucket: this.bucket,
            Prefix: this.key(pre),
            ...(opts.recursive === false ? { Delimiter: '/' } : {}),
            ...(token ? { ContinuationToken: token } : {}),
          }),
        )
      } catch (err) {
        throw this.fail(err, 'list', pre || '/')
      }
      for (const o of (out.Contents ?? []) as { Key: string; Size?: number; LastModified?: Date; ETag?: string }[]) {
        yield {
          path: o.Key.slice(strip),
          size: o.Size ?? 0,
          mtimeMs: o.LastModified?.getTime() ?? 0,
          generation: String(o.ETag),
        }
      }
      token = out.IsTruncated ? (out.NextContinuationToken as string) : undefined
    } while (token)
  }

  async stat(path: string): Promise<ObjectInfo | undefined> {
    const rel = checkPath(path, this.url)
    try {
      const out = await this.client.send(new this.sdk.HeadObjectCommand({ Bucket: this.bucket, Key: this.key(rel) }))
      return {
        path: rel,
        size: Number(out.ContentLength ?? 0),
        mtimeMs: (out.LastModified as Date | undefined)?.getTime() ?? 0,
        generation: String(out.ETag),
      }
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
    if (opts.ifGeneration !== undefined) {
      const cur = await this.stat(rel)
      if (cur?.generation !== opts.ifGeneration) {
        throw new RiggingError(
          'STORAGE_CONDITION_FAILED',
          `storage ${this.url}: ${rel} is at generation ` +
            `${cur?.generation ?? '(absent)'}, not ${opts.ifGeneration}; not deleted`,
        )
      }
    }
    try {
      await this.client.send(
        new this.sdk.DeleteObjectCommand({
          Bucket: this.bucket,
          Key: this.key(rel),
          ...(opts.ifGeneration !== undefined ? { IfMatch: opts.ifGeneration } : {}),
        }),
      )
    } catch (err) {
      if (status(err) === 404 && opts.ifGeneration === undefined) return
      throw this.fail(err, 'delete', rel)
    }
  }

  localPath(): undefined {
    return undefined
  }
}
