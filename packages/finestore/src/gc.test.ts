import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { randomBytes } from 'node:crypto'
import { openStorage } from '@marin/rigging'
import { afterEach, describe, expect, test } from 'vitest'
import { blobPath } from './layout.js'
import { openStore, type Store } from './store.js'
import { GatedStorage } from './test-support/gated-storage.js'
import { BACKENDS, newStore, tempDir, type TestStore } from './test-support/stores.js'

async function listed(store: Store, prefix: string): Promise<string[]> {
  const out: string[] = []
  for await (const o of store.storage.list(prefix)) out.push(o.path)
  return out
}

describe.each(BACKENDS)('gc on %s', (backend) => {
  let t: TestStore
  let cleanups: (() => void)[] = []
  afterEach(() => {
    t?.cleanup()
    for (const c of cleanups) c()
    cleanups = []
  })

  test('removes unreferenced blobs past the grace period, keeps referenced and young ones', async () => {
    t = await newStore(backend)
    const { store } = t
    const kept = await store.commit('datasets/a', async (txn) => void (await txn.put('f', 'referenced')))
    const loose = await store.putBlob('loose bytes')
    const dry = await store.gc({ dryRun: true, graceMs: 0 })
    expect(dry.deleted.map((d) => d.hash)).toEqual([loose.hash])
    expect(await store.blobs.exists(loose.hash)).toBe(true)
    const young = await store.gc({ graceMs: 3_600_000 })
    expect(young).toMatchObject({ young: 1, deleted: [] })
    const report = await store.gc({ graceMs: 0 })
    expect(report).toMatchObject({
      blobsScanned: 2,
      referenced: 1,
      deleted: [{ hash: loose.hash, size: 11 }],
      bytesDeleted: 11,
    })
    expect(await store.blobs.exists(loose.hash)).toBe(false)
    expect(await (await store.open('datasets/a')).readText('f')).toBe('referenced')
    expect(kept.version).toBe(1)
  })

  test('a blob staged by an open transaction is not collected, even with no grace period', async () => {
    t = await newStore(backend)
    const { store } = t
    const txn = await store.begin('datasets/b')
    const e = await txn.put('f', 'being committed')
    const report = await store.gc({ graceMs: 0 })
    expect(report.pinned).toBe(1)
    expect(report.deleted).toEqual([])
    expect(await store.blobs.exists(e.blob)).toBe(true)
    await txn.commit()
    expect(await (await store.open('datasets/b')).readText('f')).toBe('being committed')
    expect(await listed(store, 'txns/')).toEqual([])
  })

  test('an aborted transaction leaves orphans that gc reclaims', async () => {
    t = await newStore(backend)
    const { store } = t
    const txn = await store.begin('datasets/c')
    const e = await txn.put(
      'f',
      (async function* () {
        yield randomBytes(1000)
      })(),
    )
    await txn.abort()
    const report = await store.gc({ graceMs: 0 })
    expect(report.deleted.map((d) => d.hash)).toEqual([e.blob])
    expect(await listed(store, 'blobs/')).toEqual([])
    expect(await listed(store, 'tmp/')).toEqual([])
  })

  test.each(['bytes', 'stream'] as const)(
    'a commit that dedups (%s) against an orphan while gc removes it still lands complete',
    async (source) => {
      // A store whose gc pauses after reading pins and before reading manifests:
      // exactly the window in which a transaction can find a blob that gc is about to remove.
      const { dir, cleanup } = tempDir()
      cleanups.push(cleanup)
      const url =
        backend === 'file'
          ? pathToFileURL(join(dir, 'store')).href
          : `memory://gc-race-${randomBytes(4).toString('hex')}`
      const gated = new GatedStorage(await openStorage(url))
      const store = await openStore({ storage: gated, catalog: ':memory:' })
      cleanups.push(() => store.close())

      const orphan = await store.putBlob('shared content')
      const txn = await store.begin('datasets/race')
      const gate = gated.gate('artifacts/')
      const gc = store.gc({ graceMs: 0 })
      await gate.reached
      // gc has listed the orphan and read the (empty) pins; now the transaction finds it by dedup.
      const staged = await txn.put(
        'f',
        source === 'bytes'
          ? 'shared content'
          : (async function* () {
              yield Buffer.from('shared ')
              yield Buffer.from('content')
            })(),
      )
      expect(staged.blob).toBe(orphan.hash)
      let committed = false
      const commit = txn.commit().then((r) => {
        committed = true
        return r
      })
      await new Promise((r) => setTimeout(r, 100))
      expect(committed).toBe(false) // the commit waits for the running gc
      gate.open()
      const report = await gc
      expect(report.deleted.map((d) => d.hash)).toEqual([orphan.hash]) // gc did remove it…
      const c = await commit
      expect(await store.blobs.exists(orphan.hash)).toBe(true) // …and the commit put it back
      expect(await (await store.open(c.ref)).readText('f')).toBe('shared content')
      expect((await store.gc({ graceMs: 0 })).deleted).toEqual([])
    },
  )

  test('a second gc while one runs gets GC_RUNNING; the epoch is even after', async () => {
    t = await newStore(backend)
    const gated = new GatedStorage(t.store.storage)
    const store = await openStore({ storage: gated, catalog: ':memory:' })
    const gate = gated.gate('blobs/sha256/')
    const first = store.gc({ graceMs: 0 })
    await gate.reached
    await expect(store.gc()).rejects.toMatchObject({ code: 'GC_RUNNING', retryable: true })
    gate.open()
    await first
    expect(JSON.parse(await store.storage.readText('gc/state.json')).epoch).toBe(2)
    store.close()
  })

  test('pins of a live transaction protect its blobs; pins of a dead one expire and are removed', async () => {
    t = await newStore(backend)
    const { store } = t
    const blob = await store.putBlob('staged by a process that died')
    const record = (heartbeatAt: number) =>
      JSON.stringify({
        id: 'dead',
        artifact: 'datasets/dead',
        host: 'h',
        pid: 1,
        startedAt: heartbeatAt,
        heartbeatAt,
        blobs: [blob.hash],
        tmps: [],
      })
    await store.storage.write('txns/dead.json', record(Date.now()))
    expect((await store.gc({ graceMs: 0, txnTtlMs: 60_000 })).deleted).toEqual([])
    await store.storage.write('txns/dead.json', record(Date.now() - 120_000))
    const report = await store.gc({ graceMs: 0, txnTtlMs: 60_000 })
    expect(report.txnsExpired).toBe(1)
    expect(report.deleted.map((d) => d.hash)).toEqual([blob.hash])
    expect(await listed(store, 'txns/')).toEqual([])
  })
})

test('blob path layout is blobs/sha256/<first two hex>/<hash>', () => {
  const h = 'ab'.padEnd(64, '0')
  expect(blobPath(h)).toBe(`blobs/sha256/ab/${h}`)
})
