/**
 * The `gs://` adapter through the real `@google-cloud/storage` client against a
 * loopback server for the part of the GCS JSON API it uses
 * (fixtures/fake-gcs.ts; there is no GCS emulator on npm).
 */
import { text } from 'node:stream/consumers'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { isRiggingError } from '../errors.js'
import { Lease, releaseLease } from '../lease.js'
import { startFakeGcs } from './fixtures/fake-gcs.js'
import type { FakeGcs } from './fixtures/fake-gcs.js'
import { openStorage } from './open-storage.js'
import type { Storage } from './types.js'

let gcs: FakeGcs
beforeAll(async () => {
  gcs = await startFakeGcs(2) // tiny pages, so listing must follow page tokens
})
afterAll(async () => {
  await gcs.close()
})
let n = 0
const open = (): Promise<Storage> =>
  openStorage(`gs://marin-test/run-${n++}`, { gcs: { client: { apiEndpoint: gcs.endpoint, projectId: 'test' } } })

describe('gs:// against a loopback GCS JSON API', () => {
  test('write, read, stat, exists, delete; generations are GCS generations', async () => {
    const s = await open()
    const w = await s.write('a/b.txt', 'hello')
    expect(w).toMatchObject({ path: 'a/b.txt', size: 5 })
    expect(w.generation).toMatch(/^\d+$/)
    expect(await s.readText('a/b.txt')).toBe('hello')
    expect(await s.stat('a/b.txt')).toEqual(w)
    const w2 = await s.write('a/b.txt', 'hello')
    expect(w2.generation).not.toBe(w.generation) // same bytes, new generation
    await s.delete('a/b.txt')
    expect(await s.exists('a/b.txt')).toBe(false)
    await s.delete('a/b.txt')
    await expect(s.read('a/b.txt')).rejects.toSatisfy((e) => isRiggingError(e, 'STORAGE_NOT_FOUND'))
    expect(await s.stat('a/b.txt')).toBeUndefined()
  })

  test('list across pages, recursive or not, relative to the URL prefix', async () => {
    const s = await open()
    await (await open()).write('a/1', 'other run')
    for (const p of ['a/1', 'a/2', 'a/3', 'a/sub/4', 'b/5']) await s.write(p, p)
    const paths = async (prefix: string, recursive = true) => {
      const out: string[] = []
      for await (const o of s.list(prefix, { recursive })) out.push(o.path)
      return out
    }
    expect(await paths('')).toEqual(['a/1', 'a/2', 'a/3', 'a/sub/4', 'b/5'])
    expect(await paths('a/', false)).toEqual(['a/1', 'a/2', 'a/3'])
  })

  test('readStream ranges; writeStream appears on finish and not at all when destroyed', async () => {
    const s = await open()
    await s.write('r', '0123456789')
    expect(await text(await s.readStream('r'))).toBe('0123456789')
    expect(await text(await s.readStream('r', { start: 2, end: 5 }))).toBe('234')
    expect(await text(await s.readStream('r', { start: 4, end: 4 }))).toBe('')
    await expect(s.readStream('missing')).rejects.toSatisfy((e) => isRiggingError(e, 'STORAGE_NOT_FOUND'))
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

  test('ifAbsent and ifGeneration map to ifGenerationMatch; failures are STORAGE_CONDITION_FAILED', async () => {
    const s = await open()
    const g1 = (await s.write('HEAD', 'v1', { condition: { ifAbsent: true } })).generation
    const again = await s.write('HEAD', 'v2', { condition: { ifAbsent: true } }).catch((e: unknown) => e)
    expect(isRiggingError(again, 'STORAGE_CONDITION_FAILED')).toBe(true)
    expect((again as Error).message).toMatch(/cannot write HEAD: its generation condition does not hold/)
    const g2 = (await s.write('HEAD', 'v2', { condition: { ifGeneration: g1 } })).generation
    await expect(s.write('HEAD', 'v3', { condition: { ifGeneration: g1 } })).rejects.toSatisfy((e) =>
      isRiggingError(e, 'STORAGE_CONDITION_FAILED'),
    )
    expect(await s.readText('HEAD')).toBe('v2')
    const w = await s.writeStream('HEAD', { condition: { ifAbsent: true } })
    const failed = new Promise((r) => w.on('error', r))
    w.end('v4')
    expect(isRiggingError(await failed, 'STORAGE_CONDITION_FAILED')).toBe(true)
    await expect(s.delete('HEAD', { ifGeneration: g1 })).rejects.toSatisfy((e) =>
      isRiggingError(e, 'STORAGE_CONDITION_FAILED'),
    )
    await s.delete('HEAD', { ifGeneration: g2 })
    await expect(s.delete('HEAD', { ifGeneration: g2 })).rejects.toSatisfy((e) =>
      isRiggingError(e, 'STORAGE_CONDITION_FAILED'),
    )
  })

  test('concurrent compare-and-swap increments and a lease race', async () => {
    const s = await open()
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
    const got = await Promise.all(['a', 'b', 'c'].map((owner) => Lease.tryAcquire(s, 'l', { ttlMs: 60_000, owner })))
    const winners = got.filter((l) => l !== undefined)
    expect(winners).toHaveLength(1)
    const loser = ['a', 'b', 'c'].find((o) => o !== winners[0]!.owner)!
    await expect(releaseLease(s, 'l', loser)).rejects.toSatisfy((e) => isRiggingError(e, 'LEASE_NOT_OWNER'))
    await winners[0]!.release()
    expect(await s.exists('l')).toBe(false)
  })
})
