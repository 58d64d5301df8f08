import { randomBytes } from 'node:crypto'
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, expect, test } from 'vitest'
import { BlobCache } from './cache.js'
import { IntegrityError } from './errors.js'
import { blobPath } from './layout.js'
import { openStore, type Store } from './store.js'
import { tempDir } from './test-support/stores.js'

let cleanups: (() => void)[] = []
afterEach(() => {
  for (const c of cleanups.reverse()) c()
  cleanups = []
})

async function remoteWithCache(maxBytes: number): Promise<{ store: Store; dir: string }> {
  const { dir, cleanup } = tempDir()
  cleanups.push(cleanup)
  // memory:// stands in for a remote object store: nothing local but the cache.
  const store = await openStore({ url: `memory://cache-${randomBytes(4).toString('hex')}`, cache: { dir, maxBytes } })
  cleanups.push(() => store.close())
  return { store, dir }
}

test('reads go through a verified local copy: first a miss, then hits', async () => {
  const { store, dir } = await remoteWithCache(1 << 20)
  const c = await store.commit('ckpt/a', async (txn) => void (await txn.put('w', 'weights')))
  const hash = c.manifest.files.w!.blob
  const view = await store.open('ckpt/a')
  expect(await view.readText('w')).toBe('weights')
  expect(await view.readText('w')).toBe('weights')
  expect(store.cache!.stats()).toMatchObject({ entries: 1, bytes: 7, hits: 1, misses: 1 })
  expect(existsSync(join(dir, hash.slice(0, 2), hash))).toBe(true)
  // The catalog of a remote store lives beside the cache.
  expect(existsSync(join(dir, 'catalog.sqlite'))).toBe(true)
})

test('streaming reads are served from the verified local copy too', async () => {
  const { store } = await remoteWithCache(1 << 20)
  const data = Buffer.alloc(300_000, 7)
  const c = await store.commit('ckpt/s', async (txn) => void (await txn.put('w', data)))
  const view = await store.open(c.ref)
  for (let i = 0; i < 2; i++) {
    const chunks: Buffer[] = []
    for await (const chunk of await view.readStream('w')) chunks.push(chunk as Buffer)
    expect(Buffer.concat(chunks).equals(data)).toBe(true)
  }
  expect(store.cache!.stats()).toMatchObject({ entries: 1, hits: 1, misses: 1 })
})

test('the cache stays under maxBytes by evicting the least recently used blob', async () => {
  const { store } = await remoteWithCache(250)
  const c = await store.commit('ckpt/b', async (txn) => {
    for (const n of ['a', 'b', 'c']) await txn.put(n, n.repeat(100))
  })
  const view = await store.open(c.ref)
  const h = (n: string) => c.manifest.files[n]!.blob
  await view.read('a')
  await view.read('b')
  await view.read('a') // a is now more recent than b
  await view.read('c') // 300 bytes > 250: b goes
  expect(store.cache!.has(h('a'))).toBe(true)
  expect(store.cache!.has(h('b'))).toBe(false)
  expect(store.cache!.has(h('c'))).toBe(true)
  expect(store.cache!.stats().bytes).toBeLessThanOrEqual(250)
})

test('a cached copy damaged on local disk is dropped and fetched again', async () => {
  const { store, dir } = await remoteWithCache(1 << 20)
  const c = await store.commit('ckpt/c', async (txn) => void (await txn.put('w', 'good bytes')))
  const hash = c.manifest.files.w!.blob
  const view = await store.open(c.ref)
  await view.read('w')
  writeFileSync(join(dir, hash.slice(0, 2), hash), 'evil bytes')
  expect(await view.readText('w')).toBe('good bytes')
  expect(store.cache!.stats().misses).toBe(2)
  // copyTo copies out of the cache, and drops a damaged copy the same way.
  writeFileSync(join(dir, hash.slice(0, 2), hash), 'evil bytes')
  const out = join(dir, 'out', 'w')
  await view.copyTo('w', out)
  expect(readFileSync(out, 'utf8')).toBe('good bytes')
  expect(store.cache!.stats().misses).toBe(3)
})

test('copyTo from a store with a cache fills the cache once, then copies from it', async () => {
  const { store, dir } = await remoteWithCache(8 << 20)
  const data = randomBytes(3 << 20)
  const c = await store.commit('ckpt/big', async (txn) => void (await txn.put('w', data)))
  const view = await store.open(c.ref)
  for (const name of ['a', 'b']) {
    await view.copyTo('w', join(dir, 'out', name))
    expect(readFileSync(join(dir, 'out', name)).equals(data)).toBe(true)
  }
  expect(store.cache!.stats()).toMatchObject({ entries: 1, hits: 1, misses: 1 })
})

test('damaged remote bytes are never cached', async () => {
  const { store, dir } = await remoteWithCache(1 << 20)
  const c = await store.commit('ckpt/d', async (txn) => void (await txn.put('w', 'remote bytes')))
  const hash = c.manifest.files.w!.blob
  await store.storage.write(blobPath(hash), 'remote bytez')
  await expect((await store.open(c.ref)).read('w')).rejects.toBeInstanceOf(IntegrityError)
  expect(store.cache!.has(hash)).toBe(false)
  expect(readdirSync(join(dir, '.tmp'))).toEqual([])
})

test('a blob larger than the whole cache is read directly', async () => {
  const { store } = await remoteWithCache(10)
  const c = await store.commit('ckpt/e', async (txn) => void (await txn.put('w', 'more than ten bytes')))
  expect(await (await store.open(c.ref)).readText('w')).toBe('more than ten bytes')
  expect(store.cache!.stats().entries).toBe(0)
})

test('the LRU order survives reopening the cache directory', async () => {
  const { dir, cleanup } = tempDir()
  cleanups.push(cleanup)
  const cache = await BlobCache.open({ dir, maxBytes: 1000 })
  const hashes: string[] = []
  for (const n of ['x', 'y']) {
    const data = Buffer.from(n.repeat(400))
    const { createHash } = await import('node:crypto')
    const hash = createHash('sha256').update(data).digest('hex')
    hashes.push(hash)
    const { Readable } = await import('node:stream')
    await cache.get(
      hash,
      data.length,
      async () => Readable.from([data]),
      () => new Error('mismatch'),
    )
    await new Promise((r) => setTimeout(r, 20))
  }
  const reopened = await BlobCache.open({ dir, maxBytes: 500 })
  // Over budget after reopening with a smaller bound: the older entry (x) goes.
  expect(reopened.has(hashes[0]!)).toBe(false)
  expect(reopened.has(hashes[1]!)).toBe(true)
  await expect(BlobCache.open({ dir, maxBytes: 0 })).rejects.toMatchObject({ code: 'INVALID_INPUT' })
})
