import { mkdtempSync, readFileSync } from 'node:fs'
import { rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, test } from 'vitest'
import { RiggingError, isRiggingError } from './errors.js'
import { Lease, readLease, releaseLease } from './lease.js'
import { exited, spawnFixture } from './storage/fixtures/spawn.js'
import { openStorage } from './storage/open-storage.js'
import type { Storage, WriteOptions } from './storage/types.js'

const dirs: string[] = []
afterAll(async () => {
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })))
})
const fileStore = async () => {
  const d = mkdtempSync(join(tmpdir(), 'rigging-lease-'))
  dirs.push(d)
  return openStorage(d)
}
let n = 0
const memStore = () => openStorage(`memory://lease-${process.pid}-${n++}`)

/** A clock the test moves by hand. */
const clock = (start = 1_000_000) => {
  const c = { t: start, now: () => c.t }
  return c
}

describe.each([
  ['file', fileStore],
  ['memory', memStore],
])('%s leases', (_kind, open) => {
  test('acquire writes {owner, expiresAt}; a second owner gets LEASE_HELD naming the holder', async () => {
    const s = await open()
    const c = clock()
    const a = await Lease.acquire(s, 'step/.lock', { ttlMs: 1000, owner: 'alice', now: c.now })
    expect(a.expiresAt).toBe(c.t + 1000)
    const onDisk = JSON.parse(await s.readText('step/.lock')) as Record<string, unknown>
    expect(onDisk).toMatchObject({ owner: 'alice', expiresAt: c.t + 1000, pid: process.pid })
    const err = await Lease.acquire(s, 'step/.lock', { ttlMs: 1000, owner: 'bob', now: c.now }).catch((e: unknown) => e)
    expect(isRiggingError(err, 'LEASE_HELD')).toBe(true)
    expect((err as Error).message).toMatch(/held by alice until .*wait for it to be released or to expire/)
    expect(await Lease.tryAcquire(s, 'step/.lock', { ttlMs: 1000, owner: 'bob', now: c.now })).toBeUndefined()
  })

  test(
    'an expired lease is stolen; the old holder then cannot renew ' + '(LEASE_LOST) or release (LEASE_NOT_OWNER)',
    async () => {
      const s = await open()
      const c = clock()
      const a = await Lease.acquire(s, 'l', { ttlMs: 1000, owner: 'alice', now: c.now })
      c.t += 999
      expect(await Lease.tryAcquire(s, 'l', { ttlMs: 1000, owner: 'bob', now: c.now })).toBeUndefined()
      c.t += 2
      const b = await Lease.acquire(s, 'l', { ttlMs: 1000, owner: 'bob', now: c.now })
      expect(b.record.owner).toBe('bob')
      const lost = await a.renew().catch((e: unknown) => e)
      expect(isRiggingError(lost, 'LEASE_LOST')).toBe(true)
      expect((lost as Error).message).toMatch(/lost by alice: it is now held by bob/)
      const notOwner = await a.release().catch((e: unknown) => e)
      expect(isRiggingError(notOwner, 'LEASE_NOT_OWNER')).toBe(true)
      expect((notOwner as Error).message).toMatch(/held by bob, not alice; only its owner may release it/)
      expect((await readLease(s, 'l'))?.record?.owner).toBe('bob')
    },
  )

  test('renew extends expiry and keeps a challenger out; release frees it', async () => {
    const s = await open()
    const c = clock()
    const a = await Lease.acquire(s, 'l', { ttlMs: 1000, owner: 'alice', now: c.now })
    c.t += 800
    await a.renew()
    expect(a.expiresAt).toBe(c.t + 1000)
    c.t += 800
    expect(await Lease.tryAcquire(s, 'l', { ttlMs: 1000, owner: 'bob', now: c.now })).toBeUndefined()
    await a.release()
    expect(await s.exists('l')).toBe(false)
    await a.release() // already gone: a no-op
    const b = await Lease.acquire(s, 'l', { ttlMs: 1000, owner: 'bob', now: c.now })
    expect(b.record.owner).toBe('bob')
  })

  test('releaseLease by a non-owner is LEASE_NOT_OWNER and leaves the lease', async () => {
    const s = await open()
    await Lease.acquire(s, 'l', { ttlMs: 60_000, owner: 'alice' })
    await expect(releaseLease(s, 'l', 'mallory')).rejects.toSatisfy((e) => isRiggingError(e, 'LEASE_NOT_OWNER'))
    expect(await s.exists('l')).toBe(true)
    await releaseLease(s, 'l', 'alice')
    expect(await s.exists('l')).toBe(false)
  })

  test('the same owner acquiring again renews rather than failing', async () => {
    const s = await open()
    const c = clock()
    const a1 = await Lease.acquire(s, 'l', { ttlMs: 1000, owner: 'alice', now: c.now })
    c.t += 500
    const a2 = await Lease.acquire(s, 'l', { ttlMs: 1000, owner: 'alice', now: c.now })
    expect(a2.expiresAt).toBe(c.t + 1000)
    expect(a2.record.acquiredAt).toBe(a1.record.acquiredAt)
  })

  test('a file that is not a lease counts as expired and is replaced', async () => {
    const s = await open()
    await s.write('l', 'not json')
    const a = await Lease.acquire(s, 'l', { ttlMs: 1000, owner: 'alice' })
    expect(a.record.owner).toBe('alice')
  })

  test('two holders racing in one process: exactly one wins each round', async () => {
    const s = await open()
    for (let r = 0; r < 20; r++) {
      const got = await Promise.all(
        ['a', 'b', 'c'].map((owner) => Lease.tryAcquire(s, `race/${r}`, { ttlMs: 60_000, owner })),
      )
      const winners = got.filter((l) => l !== undefined)
      expect(winners).toHaveLength(1)
      expect((await readLease(s, `race/${r}`))?.record?.owner).toBe(winners[0]!.owner)
    }
  })

  test('keepAlive renews in the background and reports LEASE_LOST once taken over', async () => {
    const s = await open()
    const a = await Lease.acquire(s, 'l', { ttlMs: 60_000, owner: 'alice' })
    const first = a.record.renewedAt
    const lost = new Promise<unknown>((resolve) => a.keepAlive({ intervalMs: 10, onLost: resolve }))
    // Renewals really happen: the file's renewedAt moves.
    for (;;) {
      const rec = (await readLease(s, 'l'))?.record
      if (rec && rec.renewedAt > first) break
      await new Promise((r) => setTimeout(r, 5))
    }
    // Someone overwrites the lease behind alice's back (e.g. an operator forcing it).
    await s.write(
      'l',
      JSON.stringify({ owner: 'bob', expiresAt: Date.now() + 60_000, acquiredAt: 0, renewedAt: 0, host: 'h', pid: 1 }),
    )
    const err = await lost
    expect(isRiggingError(err, 'LEASE_LOST')).toBe(true)
    expect(a.lost.aborted).toBe(true)
    expect(a.lost.reason).toBe(err)
    expect((await readLease(s, 'l'))?.record?.owner).toBe('bob')
  })

  test('keepAlive reports LEASE_LOST when renewals keep failing until the lease expires', async () => {
    const inner = await open()
    let broken = false
    // The same storage, with writes failing on demand (a disk or network outage).
    const s: Storage = Object.assign(Object.create(inner) as Storage, {
      write: (path: string, data: Uint8Array | string, opts?: WriteOptions) => {
        if (broken)
          return Promise.reject(new RiggingError('STORAGE_IO', `storage ${inner.url}: cannot write ${path}: outage`))
        return inner.write(path, data, opts)
      },
    })
    const c = clock()
    const a = await Lease.acquire(s, 'l', { ttlMs: 1000, owner: 'alice', now: c.now })
    broken = true
    const lost = new Promise<unknown>((resolve) => a.keepAlive({ intervalMs: 5, onLost: resolve }))
    await new Promise((r) => setTimeout(r, 30)) // a few failed renewals, still within the TTL
    expect(a.lost.aborted).toBe(false)
    c.t += 1001
    const err = await lost
    expect(isRiggingError(err, 'LEASE_LOST')).toBe(true)
    expect((err as Error).message).toMatch(/renewal kept failing until it expired .*outage/)
  })

  test('ttlMs must be positive', async () => {
    const s: Storage = await open()
    await expect(Lease.acquire(s, 'l', { ttlMs: 0 })).rejects.toSatisfy((e) => isRiggingError(e, 'LEASE_INVALID'))
  })
})

describe('leases across processes', () => {
  test('two child processes race for 40 leases (fresh and expired): exactly one wins each round', async () => {
    const s = await fileStore()
    const rounds = 40
    // Odd rounds start with an expired lease of a dead holder: both racers try to steal it.
    for (let r = 1; r < rounds; r += 2) {
      await s.write(
        `leases/${r}`,
        JSON.stringify({ owner: 'dead', expiresAt: Date.now() - 1000, acquiredAt: 0, renewedAt: 0, host: 'h', pid: 1 }),
      )
    }
    const racers = ['1', '2'].map((id) => spawnFixture('lease-racer.ts', [s.url, id, String(rounds)]))
    const outs = await Promise.all(racers.map(exited))
    const won = outs.map((o) => new Set((JSON.parse(o.stdout.trim()) as { won: number[] }).won))
    for (let r = 0; r < rounds; r++) {
      const winners = ['1', '2'].filter((_, i) => won[i]!.has(r))
      expect(winners, `round ${r}`).toHaveLength(1)
      expect((await readLease(s, `leases/${r}`))?.record?.owner).toBe(`racer-${winners[0]}`)
    }
    // Both racers won some rounds: the race was real, not one process running alone.
    expect(won[0]!.size + won[1]!.size).toBe(rounds)
    expect(Math.min(won[0]!.size, won[1]!.size)).toBeGreaterThan(0)
  })
})

describe('keep-alive off the main thread', () => {
  /** Blocks this thread: no timer, I/O callback or promise of its event loop runs meanwhile. */
  const blockFor = (ms: number) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms)

  test(
    'a main thread blocked for 3 TTLs keeps its lease with ' + 'keepAliveOffThread; with keepAlive it expires',
    async () => {
      const s = await fileStore()
      const ttlMs = 1000
      const off = await Lease.acquire(s, 'off', { ttlMs, owner: 'alice' })
      await off.keepAliveOffThread()
      const on = await Lease.acquire(s, 'on', { ttlMs, owner: 'alice' })
      on.keepAlive()
      const blockedAt = Date.now()
      blockFor(3 * ttlMs)
      // Read before this thread's event loop runs again: the worker renewed during the block, the timer of this thread
      // could not.
      const onDisk = (p: string) =>
        JSON.parse(readFileSync(s.localPath(p)!, 'utf8')) as { renewedAt: number; expiresAt: number }
      expect(onDisk('off').renewedAt).toBeGreaterThan(blockedAt + ttlMs)
      expect(onDisk('on').expiresAt).toBeLessThan(blockedAt + 2 * ttlMs)
      expect(await Lease.tryAcquire(s, 'off', { ttlMs, owner: 'bob' })).toBeUndefined()
      await off.fence()
      expect(off.lost.aborted).toBe(false)
      await on.release()
      await off.release()
      expect(await s.exists('off')).toBe(false)
    },
  )

  test(
    'the main thread follows the generations the worker writes: ' + 'fence and release act at the latest one',
    async () => {
      const s = await fileStore()
      const a = await Lease.acquire(s, 'l', { ttlMs: 60_000, owner: 'alice' })
      const first = a.generation
      const renewed: number[] = []
      await a.keepAliveOffThread({ intervalMs: 10, onRenewed: (r) => renewed.push(r.renewedAt) })
      expect(a.generation).not.toBe(first)
      for (let i = 0; i < 400 && renewed.length < 3; i++) await new Promise((r) => setTimeout(r, 10))
      expect(renewed.length).toBeGreaterThanOrEqual(3)
      await a.fence()
      const onDisk = await readLease(s, 'l')
      expect(a.generation).toBe(onDisk?.generation)
      await a.release()
      // Renewals stopped with the release: nothing writes the lease again.
      await new Promise((r) => setTimeout(r, 100))
      expect(await s.exists('l')).toBe(false)
    },
  )

  test('a lease taken over behind the worker: LEASE_LOST through onLost, lost and fence', async () => {
    const s = await fileStore()
    const a = await Lease.acquire(s, 'l', { ttlMs: 60_000, owner: 'alice' })
    const lost = new Promise<unknown>((resolve) => void a.keepAliveOffThread({ intervalMs: 10, onLost: resolve }))
    await new Promise((r) => setTimeout(r, 50))
    await s.write(
      'l',
      JSON.stringify({ owner: 'bob', expiresAt: Date.now() + 60_000, acquiredAt: 0, renewedAt: 0, host: 'h', pid: 1 }),
    )
    const err = await lost
    expect(isRiggingError(err, 'LEASE_LOST')).toBe(true)
    expect((err as Error).message).toMatch(/lost by alice: it is now held by bob/)
    expect(a.lost.reason).toBe(err)
    await expect(a.fence()).rejects.toBe(err)
    expect((await readLease(s, 'l'))?.record?.owner).toBe('bob')
  })

  test('fence right after a takeover fails even before keep-alive notices', async () => {
    const s = await fileStore()
    const a = await Lease.acquire(s, 'l', { ttlMs: 60_000, owner: 'alice' })
    await a.keepAliveOffThread({ intervalMs: 60_000 })
    await s.write(
      'l',
      JSON.stringify({ owner: 'bob', expiresAt: Date.now() + 60_000, acquiredAt: 0, renewedAt: 0, host: 'h', pid: 1 }),
    )
    const err = await a.fence().catch((e: unknown) => e)
    expect(isRiggingError(err, 'LEASE_LOST')).toBe(true)
    expect(a.lost.aborted).toBe(true)
  })

  test('fence while the news of a loss is still on its way from the worker: LEASE_LOST', async () => {
    const s = await fileStore()
    const a = await Lease.acquire(s, 'l', { ttlMs: 60_000, owner: 'alice' })
    await a.keepAliveOffThread({ intervalMs: 10 })
    await s.write(
      'l',
      JSON.stringify({ owner: 'bob', expiresAt: Date.now() + 60_000, acquiredAt: 0, renewedAt: 0, host: 'h', pid: 1 }),
    )
    // The worker finds the lease lost while this thread is blocked; fence is called before this thread reads that news.
    blockFor(500)
    const err = await a.fence().catch((e: unknown) => e)
    expect(isRiggingError(err, 'LEASE_LOST')).toBe(true)
    expect((err as Error).message).toMatch(/lost by alice: it is now held by bob/)
    expect(a.lost.aborted).toBe(true)
  })

  test('memory:// leases are renewed on this thread (the storage lives in it)', async () => {
    const s = await memStore()
    const a = await Lease.acquire(s, 'l', { ttlMs: 60_000, owner: 'alice' })
    const renewed = new Promise<void>(
      (resolve) => void a.keepAliveOffThread({ intervalMs: 10, onRenewed: () => resolve() }),
    )
    await renewed
    await a.fence()
    await a.release()
    expect(await s.exists('l')).toBe(false)
  })
})
