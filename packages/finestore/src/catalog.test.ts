import { existsSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, test } from 'vitest'
import { manifestPath } from './layout.js'
import { openStore, type Store } from './store.js'
import { BACKENDS, newStore, type TestStore } from './test-support/stores.js'

/** raw/web@1 → datasets/web@1 → tokens/web@1 → models/tiny@1 ← datasets/books@1 (a small DAG). */
async function buildLineage(store: Store): Promise<void> {
  await store.commit('raw/web', async (t) => void (await t.put('dump', 'raw')), {
    metadata: { source: 'cc', docs: 1000 },
  })
  await store.commit('datasets/web', async (t) => void (await t.put('p0', 'clean')), {
    metadata: { docs: 900, dedup: true, stats: { lang: 'en' } },
    lineage: ['raw/web'],
  })
  await store.commit('datasets/books', async (t) => void (await t.put('p0', 'books')), {
    metadata: { docs: 50, dedup: false, stats: { lang: 'fr' } },
  })
  await store.commit('tokens/web', async (t) => void (await t.put('ids', 'tok')), {
    metadata: { tokenizer: 'gpt2' },
    lineage: ['datasets/web@1'],
  })
  await store.commit('models/tiny', async (t) => void (await t.put('w', 'model')), {
    metadata: { loss: 2.5 },
    config: { lr: 0.001 },
    lineage: ['tokens/web', { artifact: 'datasets/books', version: 1 }],
  })
  await store.commit('datasets/web', async (t) => void (await t.put('p0', 'cleaner')), {
    metadata: { docs: 950, dedup: true, stats: { lang: 'en' } },
    lineage: ['raw/web@1'],
  })
  await store.tag('datasets/web@1', 'stable')
}

const snapshot = (store: Store) => ({
  list: store.list(),
  versions: store.catalog.versions('datasets/web').map(({ createdAt: _c, ...v }) => v),
  tags: store.catalog.tags('datasets/web'),
  anc: store.catalog.ancestors('models/tiny', 1),
  desc: store.catalog.descendants('raw/web', 1),
  search: store
    .search({ metadata: { dedup: true } })
    .map((v) => `${v.artifact}@${v.version}`)
    .sort(),
})

describe.each(BACKENDS)('catalog on %s', (backend) => {
  let t: TestStore
  afterEach(() => t?.cleanup())

  test('lists artifacts and versions, searches metadata, walks lineage both ways', async () => {
    t = await newStore(backend)
    const { store } = t
    await buildLineage(store)
    expect(store.list().map((a) => [a.name, a.head, a.versions])).toEqual([
      ['datasets/books', 1, 1],
      ['datasets/web', 2, 2],
      ['models/tiny', 1, 1],
      ['raw/web', 1, 1],
      ['tokens/web', 1, 1],
    ])
    expect(store.list('datasets/').map((a) => a.name)).toEqual(['datasets/books', 'datasets/web'])
    const refs = (rows: { artifact: string; version: number }[]) => rows.map((r) => `${r.artifact}@${r.version}`).sort()
    expect(refs(store.search({ metadata: { dedup: true } }))).toEqual(['datasets/web@1', 'datasets/web@2'])
    expect(refs(store.search({ metadata: { dedup: true }, latestOnly: true }))).toEqual(['datasets/web@2'])
    expect(refs(store.search({ metadata: { 'stats.lang': 'fr' } }))).toEqual(['datasets/books@1'])
    expect(refs(store.search({ kind: 'datasets', metadata: { docs: { gte: 100, lt: 940 } } }))).toEqual([
      'datasets/web@1',
    ])
    expect(refs(store.search({ prefix: 'models/', metadata: { loss: { lt: 3 } } }))).toEqual(['models/tiny@1'])
    expect(store.search({ metadata: { tokenizer: 'gpt2' } })[0]).toMatchObject({
      artifact: 'tokens/web',
      metadata: { tokenizer: 'gpt2' },
      fileCount: 1,
      totalBytes: 3,
    })
    expect(() => store.search({ metadata: { "x') OR 1=1 --": 1 } })).toThrow(/metadata key .* is invalid/)

    expect(await store.ancestors('models/tiny')).toEqual([
      { artifact: 'datasets/books', version: 1, depth: 1 },
      { artifact: 'tokens/web', version: 1, depth: 1 },
      { artifact: 'datasets/web', version: 1, depth: 2 },
      { artifact: 'raw/web', version: 1, depth: 3 },
    ])
    expect(await store.descendants('raw/web@1')).toEqual([
      { artifact: 'datasets/web', version: 1, depth: 1 },
      { artifact: 'datasets/web', version: 2, depth: 1 },
      { artifact: 'tokens/web', version: 1, depth: 2 },
      { artifact: 'models/tiny', version: 1, depth: 3 },
    ])
    expect(store.catalog.tags('datasets/web')).toEqual({ stable: 1 })
    const dump = (await store.manifest('raw/web', 1)).files.dump!.blob
    expect(store.catalog.blobUsers(dump)).toEqual([{ artifact: 'raw/web', version: 1, path: 'dump' }])
  })

  test('rebuildCatalog recreates the same index from storage alone', async () => {
    t = await newStore(backend)
    const { store } = t
    await buildLineage(store)
    const before = snapshot(store)
    store.catalog.replaceAll([], [])
    expect(store.list()).toEqual([])
    const report = await store.rebuildCatalog()
    expect(report).toEqual({ artifacts: 5, versions: 6, tags: 1, unreadable: [] })
    expect(snapshot(store)).toEqual(before)
  })

  test('a second store with its own catalog fills it from storage; syncCatalog picks up later commits', async () => {
    t = await newStore(backend)
    await buildLineage(t.store)
    const other = await openStore({ storage: t.store.storage, catalog: ':memory:' })
    try {
      expect(snapshot(other)).toEqual(snapshot(t.store))
      await t.store.commit('raw/web', async (txn) => void (await txn.put('dump', 'raw2')))
      expect(other.catalog.versions('raw/web')).toHaveLength(1)
      expect(await other.syncCatalog()).toEqual({ added: 1, unreadable: [] })
      expect(other.catalog.versions('raw/web')).toHaveLength(2)
    } finally {
      other.close()
    }
  })
})

test(
  'on file:// the catalog is catalog.sqlite in the store root, in ' + 'WAL mode, and can be deleted and rebuilt',
  async () => {
    const t = await newStore('file')
    try {
      await buildLineage(t.store)
      const before = snapshot(t.store)
      const file = join(t.dir, 'store', 'catalog.sqlite')
      expect(existsSync(file)).toBe(true)
      expect(t.store.catalog.db.pragma('journal_mode', { simple: true })).toBe('wal')
      t.store.close()
      for (const f of [file, `${file}-wal`, `${file}-shm`]) rmSync(f, { force: true })
      // A broken manifest is reported and left out; the rest is indexed.
      await t.store.storage.write(manifestPath('raw/web', 9), 'not json')
      const reopened = await openStore({ url: t.url })
      t.store = reopened
      expect(snapshot(reopened)).toEqual(before)
      expect((await reopened.rebuildCatalog()).unreadable).toEqual([
        { path: manifestPath('raw/web', 9), error: expect.stringMatching(/not valid JSON/) },
      ])
    } finally {
      t.cleanup()
    }
  },
)
