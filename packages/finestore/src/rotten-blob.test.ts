import { readFileSync, writeFileSync } from 'node:fs'
import { configureLogging } from '@marin/rigging'
import { afterEach, describe, expect, test } from 'vitest'
import { blobPath } from './layout.js'
import type { Store } from './store.js'
import { BACKENDS, newStore, type TestStore } from './test-support/stores.js'

/** Flips one byte of a stored blob, as a failing disk or a bad copy would. */
async function rot(store: Store, hash: string): Promise<void> {
  const local = store.storage.localPath(blobPath(hash))
  if (local !== undefined) {
    const bytes = readFileSync(local)
    bytes[10] = bytes[10]! ^ 0xff
    writeFileSync(local, bytes)
    return
  }
  const bytes = Buffer.from(await store.storage.read(blobPath(hash)))
  bytes[10] = bytes[10]! ^ 0xff
  await store.storage.write(blobPath(hash), bytes)
}

const CONTENT = 'the same bytes, committed twice\n'.repeat(200)

describe.each(BACKENDS)('a rotten blob on %s', (backend) => {
  let t: TestStore | undefined
  const lines: string[] = []
  afterEach(() => {
    t?.cleanup()
    t = undefined
    lines.length = 0
    configureLogging({})
  })

  test.each(['bytes', 'stream'] as const)(
    'a commit (%s) whose content dedups onto a rotten blob replaces it with the verified upload and warns',
    async (source) => {
      configureLogging({ destination: { write: (l: string) => void lines.push(l) }, pretty: false, level: 'info' })
      t = await newStore(backend)
      const { store } = t
      const v1 = await store.commit('datasets/rot', async (txn) => void (await txn.put('part-0', CONTENT)))
      const hash = v1.manifest.files['part-0']!.blob
      await rot(store, hash)
      await expect((await store.open('datasets/rot@1')).readText('part-0')).rejects.toMatchObject({ code: 'INTEGRITY' })

      const v2 = await store.commit('datasets/rot', async (txn) => {
        await txn.put(
          'part-0',
          source === 'bytes'
            ? CONTENT
            : (async function* () {
                yield Buffer.from(CONTENT.slice(0, 1000))
                yield Buffer.from(CONTENT.slice(1000))
              })(),
        )
      })
      expect(v2.manifest.files['part-0']!.blob).toBe(hash)
      // The new version reads back intact, and so does the old one: they share the repaired blob.
      expect(await (await store.open('datasets/rot@2')).readText('part-0')).toBe(CONTENT)
      expect(await (await store.open('datasets/rot@1')).readText('part-0')).toBe(CONTENT)
      await (await store.open('datasets/rot@1')).verify()
      const warning = lines
        .map((l) => JSON.parse(l) as { level: number; blob?: string; msg: string })
        .find((l) => l.blob === hash)
      expect(warning, lines.join('')).toMatchObject({
        level: 40,
        msg: expect.stringMatching(/damaged blob .* replaced/),
      })
      // Nothing of the upload is left behind.
      const tmps: string[] = []
      for await (const o of store.storage.list('tmp/')) tmps.push(o.path)
      expect(tmps).toEqual([])
    },
  )

  test('putBlob with the right bytes repairs a damaged blob; a missing one is put back', async () => {
    t = await newStore(backend)
    const { store } = t
    const c = await store.commit('datasets/rot', async (txn) => {
      await txn.put('a', CONTENT)
      await txn.put('b', 'another file')
    })
    const a = c.manifest.files.a!.blob
    const b = c.manifest.files.b!.blob
    await rot(store, a)
    await store.storage.delete(blobPath(b))
    expect(await store.putBlob(CONTENT)).toEqual({ hash: a, size: CONTENT.length })
    expect(await store.putBlob('another file')).toMatchObject({ hash: b })
    await (await store.open('datasets/rot@1')).verify()
  })
})
