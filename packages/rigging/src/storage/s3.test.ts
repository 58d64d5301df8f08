/**
 * The `s3://` adapter through the real `@aws-sdk/client-s3` against s3rver, an
 * S3-compatible server from npm, on loopback. s3rver predates S3's conditional
 * writes (it ignores If-None-Match / If-Match on PUT), so the conditional tests
 * go through a loopback proxy that answers those headers the way S3 does
 * (fixtures/s3-preconditions.ts); what the adapter sends and how it reads the
 * 412 are real, the precondition check itself is the proxy's.
 */
import { mkdtempSync } from 'node:fs'
import { rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { text } from 'node:stream/consumers'
import S3rver from 's3rver'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { isRiggingError } from '../errors.js'
import { Lease, releaseLease } from '../lease.js'
import { startPreconditionProxy } from './fixtures/s3-preconditions.js'
import type { PreconditionProxy } from './fixtures/s3-preconditions.js'
import { openStorage } from './open-storage.js'
import type { Storage } from './types.js'

const dir = mkdtempSync(join(tmpdir(), 'rigging-s3rver-'))
const server = new S3rver({
  port: 0,
  address: '127.0.0.1',
  silent: true,
  directory: dir,
  configureBuckets: [{ name: 'marin-test' }],
})
let endpoint = ''
let proxy: PreconditionProxy

beforeAll(async () => {
  const addr = await server.run()
  endpoint = `http://127.0.0.1:${addr.port}`
  proxy = await startPreconditionProxy(endpoint)
})
afterAll(async () => {
  await proxy.close()
  await server.close()
  await rm(dir, { recursive: true, force: true })
})

const client = (accessKeyId = 'S3RVER', via = endpoint) => ({
  endpoint: via,
  forcePathStyle: true,
  region: 'us-east-1',
  credentials: { accessKeyId, secretAccessKey: 'S3RVER' },
  // s3rver predates the SDK's default CRC checksums (aws-chunked uploads).
  requestChecksumCalculation: 'WHEN_REQUIRED',
})
let n = 0
const open = (): Promise<Storage> => openStorage(`s3://marin-test/run-${n++}/`, { s3: { client: client() } })

describe('s3:// against a local S3-compatible server', () => {
  test('write, read, stat, exists, delete; missing objects are STORAGE_NOT_FOUND', async () => {
    const s = await open()
    const w = await s.write('a/b.txt', 'hello')
    expect(w).toMatchObject({ path: 'a/b.txt', size: 5 })
    expect(await s.readText('a/b.txt')).toBe('hello')
    const st = await s.stat('a/b.txt')
    expect(st).toMatchObject({ path: 'a/b.txt', size: 5, generation: w.generation })
    expect(st!.mtimeMs).toBeGreaterThan(Date.now() - 60_000)
    expect(await s.exists('a/b.txt')).toBe(true)
    expect((await s.write('a/b.txt', 'changed')).generation).not.toBe(w.generation)
    await s.delete('a/b.txt')
    expect(await s.stat('a/b.txt')).toBeUndefined()
    await s.delete('a/b.txt')
    const err = await s.read('a/b.txt').catch((e: unknown) => e)
    expect(isRiggingError(err, 'STORAGE_NOT_FOUND')).toBe(true)
    expect((err as Error).message).toContain('cannot read a/b.txt')
  })

  test('list under the URL prefix: recursive or not, paths relative to the prefix', async () => {
    const s = await open()
    const other = await open()
    await other.write('a/1', 'not ours')
    for (const p of ['a/1', 'a/2', 'a/sub/3', 'b/4']) await s.write(p, p)
    const paths = async (prefix: string, recursive = true) => {
      const out: string[] = []
      for await (const o of s.list(prefix, { recursive })) out.push(o.path)
      return out
    }
    expect(await paths('')).toEqual(['a/1', 'a/2', 'a/sub/3', 'b/4'])
    expect(await paths('a/')).toEqual(['a/1', 'a/2', 'a/sub/3'])
    expect(await paths('a/', false)).toEqual(['a/1', 'a/2'])
    const infos = []
    for await (const o of s.list('b/')) infos.push(o)
    expect(infos).toEqual([
      expect.objectContaining({ path: 'b/4', size: 3, generation: (await s.stat('b/4'))!.generation }),
    ])
  })

  test('readStream ranges and writeStream (spooled, visible only when finished)', async () => {
    const s = await open()
    await s.write('r', '0123456789')
    expect(await text(await s.readStream('r', { start: 2, end: 5 }))).toBe('234')
    expect(await text(await s.readStream('r', { start: 7 }))).toBe('789')
    expect(await text(await s.readStream('r', { start: 3, end: 3 }))).toBe('')
    const w = await s.writeStream('streamed')
    w.write('part one, ')
    expect(await s.exists('streamed')).toBe(false)
    await new Promise<void>((res, rej) => w.end('part two', (err?: Error | null) => (err ? rej(err) : res())))
    expect(await s.readText('streamed')).toBe('part one, part two')
    const gone = await s.writeStream('never')
    gone.write('x')
    const closed = new Promise((r) => gone.on('close', r))
    gone.destroy()
    await closed
    expect(await s.exists('never')).toBe(false)
  })

  test('bad credentials are STORAGE_PERMISSION saying what to check', async () => {
    const s = await openStorage('s3://marin-test/x', { s3: { client: client('UNKNOWN-KEY') } })
    const err = await s.read('anything').catch((e: unknown) => e)
    expect(isRiggingError(err, 'STORAGE_PERMISSION')).toBe(true)
    expect((err as Error).message).toMatch(/check the AWS credentials/)
  })
})

describe('s3:// conditional writes (S3 preconditions answered by the loopback proxy)', () => {
  const openC = (): Promise<Storage> =>
    openStorage(`s3://marin-test/cond-${n++}`, { s3: { client: client('S3RVER', proxy.endpoint) } })

  test('ifAbsent creates once; ifGeneration replaces only the ETag it names', async () => {
    const s = await openC()
    const g1 = (await s.write('HEAD', 'v1', { condition: { ifAbsent: true } })).generation
    const again = await s.write('HEAD', 'v2', { condition: { ifAbsent: true } }).catch((e: unknown) => e)
    expect(isRiggingError(again, 'STORAGE_CONDITION_FAILED')).toBe(true)
    expect((again as Error).message).toMatch(/cannot write HEAD: its condition does not hold .*PreconditionFailed/)
    const g2 = (await s.write('HEAD', 'v2', { condition: { ifGeneration: g1 } })).generation
    expect(g2).toBe((await s.stat('HEAD'))!.generation)
    await expect(s.write('HEAD', 'v3', { condition: { ifGeneration: g1 } })).rejects.toSatisfy((e) =>
      isRiggingError(e, 'STORAGE_CONDITION_FAILED'),
    )
    expect(await s.readText('HEAD')).toBe('v2')
    await expect(s.delete('HEAD', { ifGeneration: g1 })).rejects.toSatisfy((e) =>
      isRiggingError(e, 'STORAGE_CONDITION_FAILED'),
    )
    await s.delete('HEAD', { ifGeneration: g2 })
    expect(await s.exists('HEAD')).toBe(false)
  })

  test('a conditional writeStream is refused at finish', async () => {
    const s = await openC()
    await s.write('x', 'one', { condition: { ifAbsent: true } })
    const w = await s.writeStream('x', { condition: { ifAbsent: true } })
    const failed = new Promise((r) => w.on('error', r))
    w.end('two')
    expect(isRiggingError(await failed, 'STORAGE_CONDITION_FAILED')).toBe(true)
    expect(await s.readText('x')).toBe('one')
  })

  test('concurrent compare-and-swap increments never lose an update', async () => {
    const s = await openC()
    const inc = async () => {
      for (;;) {
        const st = await s.stat('n')
        const cur = st ? Number(await s.readText('n')) : 0
        try {
          return await s.write('n', String(cur + 1), {
            condition: st ? { ifGeneration: st.generation } : { ifAbsent: true },
          })
        } catch (err) {
          if (!isRiggingError(err, 'STORAGE_CONDITION_FAILED')) throw err
        }
      }
    }
    await Promise.all(Array.from({ length: 10 }, inc))
    expect(await s.readText('n')).toBe('10')
  })

  test('leases: exactly one of three racers wins; release only by the owner', async () => {
    const s = await openC()
    const got = await Promise.all(
      ['a', 'b', 'c'].map((owner) => Lease.tryAcquire(s, 'step/.lock', { ttlMs: 60_000, owner })),
    )
    const winners = got.filter((l) => l !== undefined)
    expect(winners).toHaveLength(1)
    const loser = ['a', 'b', 'c'].find((o) => o !== winners[0]!.owner)!
    await expect(releaseLease(s, 'step/.lock', loser)).rejects.toSatisfy((e) => isRiggingError(e, 'LEASE_NOT_OWNER'))
    await winners[0]!.release()
    expect(await s.exists('step/.lock')).toBe(false)
  })
})
