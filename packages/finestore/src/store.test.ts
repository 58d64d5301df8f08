import { afterEach, describe, expect, test } from 'vitest'
import { z } from 'zod'
import { ConflictError, FinestoreError } from './errors.js'
import { headPath, manifestPath } from './layout.js'
import { BACKENDS, newStore, type TestStore } from './test-support/stores.js'

describe.each(BACKENDS)('store on %s', (backend) => {
  let t: TestStore
  afterEach(() => t?.cleanup())

  test('commits versions 1, 2, … with files, metadata, config and lineage', async () => {
    t = await newStore(backend)
    const { store } = t
    const raw = await store.commit('raw/brown', async (txn) => {
      await txn.put('a.txt', 'alpha')
    })
    expect(raw.version).toBe(1)
    const txn = await store.begin('datasets/brown', {
      metadata: { docs: 2 },
      config: { seed: 1 },
      lineage: ['raw/brown'],
    })
    await txn.put('x/one.txt', 'one')
    await txn.put('two.bin', new Uint8Array([1, 2, 3]))
    await txn.put(
      'stream.txt',
      (async function* () {
        yield Buffer.from('str')
        yield Buffer.from('eam')
      })(),
    )
    const c = await txn.commit()
    expect(c).toMatchObject({ artifact: 'datasets/brown', version: 1, ref: 'datasets/brown@1' })
    expect(c.manifest.lineage).toEqual([{ artifact: 'raw/brown', version: 1 }])
    expect(c.manifest.kind).toBe('datasets')
    const v = await store.open('datasets/brown')
    expect(v.files()).toEqual(['stream.txt', 'two.bin', 'x/one.txt'])
    expect(await v.readText('x/one.txt')).toBe('one')
    expect(await v.readText('stream.txt')).toBe('stream')
    expect([...(await v.read('two.bin'))]).toEqual([1, 2, 3])
    expect(v.metadata).toEqual({ docs: 2 })
    expect(v.config).toEqual({ seed: 1 })

    const c2 = await store.commit('datasets/brown', async (t2) => {
      await t2.put('x/one.txt', 'ONE')
    })
    expect(c2.version).toBe(2)
    expect(c2.manifest.parent).toBe(1)
    expect(await store.head('datasets/brown')).toBe(2)
    expect(await store.versions('datasets/brown')).toEqual([1, 2])
    expect(await store.artifacts()).toEqual(['datasets/brown', 'raw/brown'])
  })

  test('a read view stays on its version while new versions land', async () => {
    t = await newStore(backend)
    const { store } = t
    await store.commit('ckpt/tiny', async (txn) => void (await txn.put('w', 'v1')))
    const pinned = await store.open('ckpt/tiny')
    await store.commit('ckpt/tiny', async (txn) => void (await txn.put('w', 'v2')))
    expect(await pinned.readText('w')).toBe('v1')
    expect(pinned.version).toBe(1)
    expect(await (await store.open('ckpt/tiny')).readText('w')).toBe('v2')
    expect(await (await store.open('ckpt/tiny@1')).readText('w')).toBe('v1')
  })

  test('identical content is stored once', async () => {
    t = await newStore(backend)
    const { store } = t
    const a = await store.putBlob('same bytes')
    const b = await store.putBlob(Buffer.from('same bytes'))
    const c = await store.putBlob(
      (async function* () {
        yield Buffer.from('same ')
        yield Buffer.from('bytes')
      })(),
    )
    expect(new Set([a.hash, b.hash, c.hash]).size).toBe(1)
    const blobs: string[] = []
    for await (const o of store.storage.list('blobs/')) blobs.push(o.path)
    expect(blobs).toEqual([`blobs/sha256/${a.hash.slice(0, 2)}/${a.hash}`])
    const tmps: string[] = []
    for await (const o of store.storage.list('tmp/')) tmps.push(o.path)
    expect(tmps).toEqual([])
  })

  test('two transactions on the same HEAD: one commits, the other gets a retryable ConflictError', async () => {
    t = await newStore(backend)
    const { store } = t
    const a = await store.begin('datasets/x')
    const b = await store.begin('datasets/x')
    await a.put('f', 'from a')
    await b.put('f', 'from b')
    const results = await Promise.allSettled([a.commit(), b.commit()])
    const won = results.filter((r) => r.status === 'fulfilled')
    const lost = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected')
    expect(won).toHaveLength(1)
    expect(lost).toHaveLength(1)
    expect(lost[0]!.reason).toBeInstanceOf(ConflictError)
    expect(lost[0]!.reason.retryable).toBe(true)
    expect(lost[0]!.reason.message).toMatch(/datasets\/x: version 1 was committed by another writer.*rebase\(\)/)
    const loser = results[0]!.status === 'rejected' ? a : b
    await loser.rebase()
    const again = await loser.commit()
    expect(again.version).toBe(2)
    expect(await store.head('datasets/x')).toBe(2)
    expect(await store.versions('datasets/x')).toEqual([1, 2])
  })

  test('an aborted transaction leaves no version and no pins', async () => {
    t = await newStore(backend)
    const { store } = t
    const txn = await store.begin('datasets/gone')
    await txn.put('f', 'bytes')
    await txn.abort()
    expect(await store.head('datasets/gone')).toBeUndefined()
    await expect(store.open('datasets/gone')).rejects.toThrow(/artifact datasets\/gone has no versions/)
    const pins: string[] = []
    for await (const o of store.storage.list('txns/')) pins.push(o.path)
    expect(pins).toEqual([])
    await expect(txn.commit()).rejects.toMatchObject({ code: 'TXN_CLOSED' })
  })

  test('putBlob stages a stored blob under a new path; an unknown one is NOT_FOUND', async () => {
    t = await newStore(backend)
    const { store } = t
    const a = await store.commit('datasets/src', async (txn) => void (await txn.put('x', 'reuse me')))
    const txn = await store.begin('datasets/dst', { lineage: [a.ref] })
    await txn.putBlob('renamed', { hash: a.manifest.files.x!.blob, size: 8 })
    await expect(txn.putBlob('nope', { hash: 'f'.repeat(64), size: 1 })).rejects.toMatchObject({ code: 'NOT_FOUND' })
    const c = await txn.commit()
    expect(c.manifest.files).toEqual({ renamed: a.manifest.files.x })
    expect(await (await store.open(c.ref)).readText('renamed')).toBe('reuse me')
  })

  test('inherit starts from HEAD files; remove drops one', async () => {
    t = await newStore(backend)
    const { store } = t
    await store.commit('datasets/inc', async (txn) => {
      await txn.put('a', 'A')
      await txn.put('b', 'B')
    })
    const txn = await store.begin('datasets/inc', { inherit: true })
    txn.remove('a')
    await txn.put('c', 'C')
    await txn.commit()
    const v = await store.open('datasets/inc')
    expect(v.files()).toEqual(['b', 'c'])
    expect(await v.readText('b')).toBe('B')
  })

  test('metadata is validated against the schema registered for its kind', async () => {
    t = await newStore(backend)
    const { store } = t
    store.registerSchema('datasets', z.strictObject({ docs: z.number().int(), tokenizer: z.string().default('gpt2') }))
    const ok = await store.commit('datasets/m', async () => {}, { metadata: { docs: 3 } })
    expect(ok.manifest.metadata).toEqual({ docs: 3, tokenizer: 'gpt2' })
    const txn = await store.begin('datasets/m', { metadata: { docs: 'many' } })
    await expect(txn.commit()).rejects.toThrow(/metadata of datasets\/m \(kind "datasets"\): field "docs"/)
    // Nothing became visible and the transaction is still usable.
    expect(await store.head('datasets/m')).toBe(1)
    txn.setMetadata({ docs: 4 })
    expect((await txn.commit()).version).toBe(2)
    // Other kinds are free-form.
    await store.commit('reports/m', async () => {}, { metadata: { anything: [1, 'two'] } })
  })

  test('tags move by compare-and-swap; latest means HEAD', async () => {
    t = await newStore(backend)
    const { store } = t
    await store.commit('models/m', async (txn) => void (await txn.put('w', '1')))
    await store.commit('models/m', async (txn) => void (await txn.put('w', '2')))
    await store.tag('models/m@1', 'best', { expect: null })
    expect(await store.tags('models/m')).toEqual({ best: 1 })
    expect((await store.resolve('models/m@best')).version).toBe(1)
    expect((await store.resolve('models/m@latest')).version).toBe(2)
    await expect(store.tag('models/m@2', 'best', { expect: null })).rejects.toBeInstanceOf(ConflictError)
    await store.tag('models/m@2', 'best', { expect: 1 })
    expect((await store.open('models/m@best')).version).toBe(2)
    const racers = await Promise.allSettled([
      store.tag('models/m@1', 'best', { expect: 2 }),
      store.tag('models/m@1', 'best', { expect: 2 }),
    ])
    expect(racers.filter((r) => r.status === 'fulfilled')).toHaveLength(1)
    await store.untag('models/m', 'best')
    await expect(store.resolve('models/m@best')).rejects.toThrow(/has no tag "best"/)
  })

  test('bad names, refs, paths and lineage are typed errors that say what to do', async () => {
    t = await newStore(backend)
    const { store } = t
    await expect(store.begin('../etc')).rejects.toMatchObject({ code: 'INVALID_NAME' })
    await expect(store.begin('a/versions')).rejects.toThrow(/not HEAD, versions or tags/)
    await expect(store.open('datasets/x@-1')).rejects.toMatchObject({ code: 'INVALID_REF' })
    const txn = await store.begin('datasets/x', { lineage: ['raw/none@4'] })
    await expect(txn.put('../up', 'x')).rejects.toMatchObject({ code: 'INVALID_PATH' })
    await expect(txn.commit()).rejects.toThrow(/raw\/none@4 does not exist; artifact raw\/none has no versions/)
    await store.commit('datasets/x', async () => {})
    await expect(store.open('datasets/x@7')).rejects.toThrow(/datasets\/x@7 does not exist; versions are 1…1/)
    await expect((await store.open('datasets/x')).read('nope')).rejects.toThrow(/datasets\/x@1 has no file "nope"/)
  })

  test('a lagging HEAD (writer died after its manifest) is rolled forward by readers', async () => {
    t = await newStore(backend)
    const { store } = t
    const c = await store.commit('datasets/lag', async (txn) => void (await txn.put('f', '1')))
    // Simulate the crash window: version 2's manifest exists, HEAD still says 1.
    const m2 = { ...c.manifest, version: 2, parent: 1 }
    await store.storage.write(manifestPath('datasets/lag', 2), JSON.stringify(m2), { condition: { ifAbsent: true } })
    expect(JSON.parse(await store.storage.readText(headPath('datasets/lag')))).toEqual({ version: 1 })
    expect(await store.head('datasets/lag')).toBe(2)
    expect(JSON.parse(await store.storage.readText(headPath('datasets/lag')))).toEqual({ version: 2 })
    const next = await store.commit('datasets/lag', async () => {})
    expect(next.version).toBe(3)
  })

  test('an unparsable manifest is a clear error and other versions stay readable', async () => {
    t = await newStore(backend)
    const { store } = t
    for (const s of ['1', '2', '3']) await store.commit('datasets/bad', async (txn) => void (await txn.put('f', s)))
    await store.storage.write(manifestPath('datasets/bad', 2), '{"format": 1, "artifact": ')
    await expect(store.open('datasets/bad@2')).rejects.toThrow(
      /manifest artifacts\/datasets\/bad\/versions\/2\.json is not valid JSON .*other versions are not affected/,
    )
    await store.storage.write(manifestPath('datasets/bad', 2), '{"format": 1}')
    await expect(store.open('datasets/bad@2')).rejects.toMatchObject({
      code: 'MANIFEST_INVALID',
      message: expect.stringMatching(/field "artifact"/),
    })
    expect(await (await store.open('datasets/bad@1')).readText('f')).toBe('1')
    expect(await (await store.open('datasets/bad')).readText('f')).toBe('3')
    const report = await store.rebuildCatalog()
    expect(report.versions).toBe(2)
    expect(report.unreadable.map((u) => u.path)).toEqual(['artifacts/datasets/bad/versions/2.json'])
    await expect(store.gc()).rejects.toThrow(
      'gc stopped before removing anything: it cannot tell which blobs ' +
        'artifacts/datasets/bad/versions/2.json references',
    )
  })

  test('errors are FinestoreError with stable codes', async () => {
    t = await newStore(backend)
    await expect(t.store.getBlob('0'.repeat(64))).rejects.toBeInstanceOf(FinestoreError)
    await expect(t.store.getBlob('0'.repeat(64))).rejects.toMatchObject({ code: 'NOT_FOUND' })
    await expect(t.store.getBlob('xyz')).rejects.toMatchObject({ code: 'INVALID_HASH' })
  })
})
