import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, expect, test } from 'vitest'
import { ConflictError } from './errors.js'
import { fixture, runNode } from './test-support/child.js'
import { newStore, type TestStore } from './test-support/stores.js'

let t: TestStore | undefined
afterEach(() => {
  t?.cleanup()
  t = undefined
})

const range = (n: number): number[] => Array.from({ length: n }, (_, i) => i + 1)

test('50 concurrent commits to one artifact with the default retries all land, each as its own version', async () => {
  t = await newStore('file')
  const { store } = t
  const results = await Promise.allSettled(
    Array.from({ length: 50 }, (_, i) =>
      store.commit('datasets/hot', async (txn) => {
        txn.setMetadata({ i })
        await txn.put('w', `writer ${i}`)
      }),
    ),
  )
  const failed = results.filter((r) => r.status === 'rejected').map((r) => String((r as PromiseRejectedResult).reason))
  expect(failed, failed.slice(0, 3).join('\n')).toEqual([])
  const versions = results.map((r) => (r as PromiseFulfilledResult<{ version: number }>).value.version)
  expect(versions.sort((a, b) => a - b)).toEqual(range(50))
  expect(await store.head('datasets/hot')).toBe(50)
  const writers = new Set<unknown>()
  for (const v of range(50)) writers.add((await store.manifest('datasets/hot', v)).metadata.i)
  expect(writers.size).toBe(50)
}, 180_000)

test('4 processes × 12 concurrent commits to one artifact, default retries: all 48 land', async () => {
  t = await newStore('file')
  const { store, url } = t
  const go = join(t.dir, 'go')
  const children = ['A', 'B', 'C', 'D'].map((id) =>
    runNode([fixture('committer.ts'), url, 'burst', 'datasets/hot', '12', id, go]),
  )
  // Start them together, once every process has loaded and opened the store.
  await Promise.all(children.map((c) => c.waitFor((l) => l.includes('"ready"'))))
  writeFileSync(go, '')
  const exits = await Promise.all(children.map((c) => c.exited))
  const reported = children.flatMap((c) =>
    c.lines.filter((l) => !l.includes('"ready"')).map((l) => JSON.parse(l) as { version?: number; error?: string }),
  )
  expect(reported.filter((r) => r.error !== undefined)).toEqual([])
  for (const e of exits) expect(e.code, e.stderr).toBe(0)
  expect(reported.map((r) => r.version!).sort((a, b) => a - b)).toEqual(range(48))
  expect(await store.versions('datasets/hot')).toEqual(range(48))
  expect(await store.head('datasets/hot')).toBe(48)
}, 240_000)

test('a commit that keeps losing gives up with ConflictError once its retry budget is spent', async () => {
  t = await newStore('memory')
  const { store } = t
  let attempts = 0
  const err = await store
    .commit(
      'datasets/contested',
      async (txn) => {
        attempts++
        // Another writer lands first on every attempt.
        await store.commit('datasets/contested', async (other) => void (await other.put('f', `rival ${attempts}`)))
        await txn.put('f', 'mine')
      },
      { retryBudgetMs: 300 },
    )
    .catch((e: unknown) => e)
  expect(err).toBeInstanceOf(ConflictError)
  expect((err as Error).message).toMatch(/gave up after \d+ attempts in [\d.]+ s \(retryBudgetMs 300\)/)
  expect(await store.head('datasets/contested')).toBe(attempts)
})
