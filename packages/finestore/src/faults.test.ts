import { createHash } from 'node:crypto'
import { readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { afterEach, expect, test } from 'vitest'
import { IntegrityError } from './errors.js'
import { blobPath, headPath } from './layout.js'
import { openStore } from './store.js'
import { fixture, runNode } from './test-support/child.js'
import { listedPaths, newStore, type TestStore } from './test-support/stores.js'

let t: TestStore | undefined
afterEach(() => {
  t?.cleanup()
  t = undefined
})

const listed = (prefix: string) => listedPaths(t!.store, prefix)

test(
  'a process killed in the middle of a commit leaves the store ' + 'consistent, and gc reclaims its orphans',
  async () => {
    t = await newStore('file')
    const { store } = t
    const v1 = await store.commit('datasets/crash', async (txn) => void (await txn.put('keep', 'version one')))
    const child = runNode([fixture('committer.ts'), t.url, 'stall', 'datasets/crash', '200'])
    await child.waitFor((l) => l.includes('"uploading"'))
    child.proc.kill('SIGKILL')
    expect((await child.exited).signal).toBe('SIGKILL')

    // Nothing of the dead transaction is visible.
    expect(await store.head('datasets/crash')).toBe(1)
    expect(await store.versions('datasets/crash')).toEqual([1])
    await (await store.open('datasets/crash')).verify()
    expect(await listed('tmp/')).toHaveLength(1) // b.bin's upload, cut off
    expect(await listed('txns/')).toHaveLength(1) // its pin, now without a heartbeat
    expect((await listed('blobs/')).length).toBe(2) // v1's blob and the staged a.bin

    // While the pin is fresh it protects the staged blob; once expired, gc takes everything.
    expect((await store.gc({ graceMs: 0, txnTtlMs: 3_600_000 })).deleted).toEqual([])
    await new Promise((r) => setTimeout(r, 300))
    const report = await store.gc({ graceMs: 0, txnTtlMs: 200 })
    expect(report.txnsExpired).toBe(1)
    expect(report.deleted).toHaveLength(1)
    expect(await listed('blobs/')).toEqual([blobPath(v1.manifest.files.keep!.blob)])
    expect(await listed('txns/')).toEqual([])
    expect(await listed('tmp/')).toEqual([])
    // Nothing hidden is left behind either.
    expect(readdirSync(store.storage.localPath('tmp/x')!.replace(/\/x$/, ''))).toEqual([])
    const v2 = await store.commit('datasets/crash', async (txn) => void (await txn.put('keep', 'version two')))
    expect(v2.version).toBe(2)
  },
)

test(
  'a process killed after its manifest but before HEAD moved: the ' + 'version is complete and HEAD catches up',
  async () => {
    t = await newStore('file')
    const { store } = t
    await store.commit('datasets/half', async (txn) => void (await txn.put('f', 'one')))
    const child = runNode([fixture('committer.ts'), t.url, 'die-before-head', 'datasets/half'])
    expect((await child.exited).signal).toBe('SIGKILL')
    expect(JSON.parse(await store.storage.readText(headPath('datasets/half')))).toEqual({ version: 1 })
    const view = await store.open('datasets/half')
    expect(view.version).toBe(2)
    expect(await view.readText('f')).toBe('written just before the crash')
    expect(JSON.parse(await store.storage.readText(headPath('datasets/half')))).toEqual({ version: 2 })
    await new Promise((r) => setTimeout(r, 50))
    const report = await store.gc({ graceMs: 0, txnTtlMs: 10 })
    expect(report.deleted).toEqual([])
    await view.verify()
  },
)

test('two processes committing 100 times each to one artifact: no lost version, no torn HEAD', async () => {
  t = await newStore('file')
  const { store } = t
  const url = t.url
  const a = runNode([fixture('committer.ts'), url, 'loop', 'datasets/busy', '100', 'A'])
  const b = runNode([fixture('committer.ts'), url, 'loop', 'datasets/busy', '100', 'B'])
  // Meanwhile HEAD must always parse, name an existing version, and only move forward.
  let last = 0
  let observations = 0
  let done = false
  const watcher = (async () => {
    while (!done) {
      const text = await store.storage.readText(headPath('datasets/busy')).catch(() => undefined)
      if (text !== undefined) {
        const v = (JSON.parse(text) as { version: number }).version
        expect(v).toBeGreaterThanOrEqual(last)
        expect(await store.storage.exists(`artifacts/datasets/busy/versions/${v}.json`)).toBe(true)
        last = v
        observations++
      }
      await new Promise((r) => setTimeout(r, 5))
    }
  })()
  const [ea, eb] = await Promise.all([a.exited, b.exited])
  done = true
  await watcher
  expect(ea.code, ea.stderr).toBe(0)
  expect(eb.code, eb.stderr).toBe(0)
  expect(observations).toBeGreaterThan(0)

  const reported = [...a.lines, ...b.lines].map((l) => JSON.parse(l) as { version: number; writer: string; i: number })
  expect(reported).toHaveLength(200)
  expect(reported.map((r) => r.version).sort((x, y) => x - y)).toEqual(Array.from({ length: 200 }, (_, i) => i + 1))
  expect(await store.versions('datasets/busy')).toEqual(Array.from({ length: 200 }, (_, i) => i + 1))
  expect(await store.head('datasets/busy')).toBe(200)
  expect(JSON.parse(await store.storage.readText(headPath('datasets/busy')))).toEqual({ version: 200 })
  for (const r of reported) {
    const m = await store.manifest('datasets/busy', r.version)
    expect(m.metadata).toEqual({ writer: r.writer, i: r.i })
    expect(m.parent).toBe(r.version === 1 ? null : r.version - 1)
  }
  expect(await (await store.open('datasets/busy@137')).readText('w')).toMatch(/^[AB]-\d+$/)
  // Both processes indexed into the shared catalog file.
  const fresh = await openStore({ url })
  expect(fresh.catalog.versions('datasets/busy')).toHaveLength(200)
  fresh.close()
}, 180_000)

test('bit rot on disk under a file:// store is an IntegrityError naming the blob and the artifact', async () => {
  t = await newStore('file')
  const { store } = t
  const c = await store.commit('datasets/disk', async (txn) => void (await txn.put('part', 'x'.repeat(4096))))
  const hash = c.manifest.files.part!.blob
  const file = store.storage.localPath(blobPath(hash))!
  const bytes = readFileSync(file)
  bytes[100] = bytes[100]! ^ 0xff
  writeFileSync(file, bytes)
  const err = await (await store.open('datasets/disk')).read('part').catch((e: unknown) => e)
  expect(err).toBeInstanceOf(IntegrityError)
  expect((err as Error).message).toContain(hash)
  expect((err as Error).message).toContain('datasets/disk@1')
})

test('a process that streams a put exits on its own when it is done', async () => {
  t = await newStore('file')
  const child = runNode([fixture('committer.ts'), t.url, 'stream', 'datasets/streamed'])
  const e = await child.exited
  expect(e.code, e.stderr).toBe(0)
  const expected = createHash('sha256')
  for (let i = 0; i < 8; i++) expected.update(Buffer.alloc(256 * 1024, i))
  expect(JSON.parse(child.lines[0]!)).toEqual({ blob: expected.digest('hex') })
  await (await t.store.open('datasets/streamed')).verify()
})
