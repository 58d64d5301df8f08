import { createHash, randomBytes } from 'node:crypto'
import { createReadStream, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { open } from 'node:fs/promises'
import { join } from 'node:path'
import { Writable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { afterEach, describe, expect, test, vi } from 'vitest'
import { IntegrityError } from './errors.js'
import { blobPath } from './layout.js'
import { BACKENDS, newStore, tempDir, type TestStore } from './test-support/stores.js'

const sink = () => new Writable({ write: (_c, _e, cb) => cb() })

describe.each(BACKENDS)('blobs on %s', (backend) => {
  let t: TestStore
  let cleanups: (() => void)[] = []
  afterEach(() => {
    t?.cleanup()
    for (const c of cleanups) c()
    cleanups = []
  })

  test('a streamed put hashes while writing; get and streaming get return the same bytes', async () => {
    t = await newStore(backend)
    const data = randomBytes(3 * 1024 * 1024 + 17)
    const src = tempDir()
    cleanups.push(src.cleanup)
    const file = join(src.dir, 'in.bin')
    writeFileSync(file, data)
    const info = await t.store.putBlob({ file })
    expect(info).toEqual({ hash: createHash('sha256').update(data).digest('hex'), size: data.length })
    expect(Buffer.from(await t.store.getBlob(info.hash)).equals(data)).toBe(true)
    const chunks: Buffer[] = []
    for await (const c of await t.store.blobs.readStream(info.hash)) chunks.push(c as Buffer)
    expect(Buffer.concat(chunks).equals(data)).toBe(true)
    expect((await t.store.putBlob(createReadStream(file))).hash).toBe(info.hash)
  })

  test('a version file copied out is verified and complete', async () => {
    t = await newStore(backend)
    const data = randomBytes(1024 * 1024)
    await t.store.commit('datasets/copy', async (txn) => void (await txn.put('d.bin', data)))
    const out = tempDir()
    cleanups.push(out.cleanup)
    const view = await t.store.open('datasets/copy')
    await view.copyTo('d.bin', join(out.dir, 'sub', 'd.bin'))
    expect(readFileSync(join(out.dir, 'sub', 'd.bin')).equals(data)).toBe(true)
    await view.verify()
  })

  test('copyTo of damaged bytes raises IntegrityError and leaves no file behind', async () => {
    t = await newStore(backend)
    const data = randomBytes(1024 * 1024 + 5)
    const c = await t.store.commit('datasets/copyrot', async (txn) => void (await txn.put('d.bin', data)))
    const hash = c.manifest.files['d.bin']!.blob
    data[700_000] = data[700_000]! ^ 1
    await t.store.storage.write(blobPath(hash), data)
    const out = tempDir()
    cleanups.push(out.cleanup)
    const err = await (await t.store.open('datasets/copyrot'))
      .copyTo('d.bin', join(out.dir, 'd.bin'))
      .catch((e: unknown) => e)
    expect(err).toBeInstanceOf(IntegrityError)
    expect(err).toMatchObject({ code: 'INTEGRITY', blob: hash, artifact: 'datasets/copyrot@1' })
    expect(readdirSync(out.dir)).toEqual([])
  })

  test('bytes that no longer match their hash raise IntegrityError naming the blob and the artifact', async () => {
    t = await newStore(backend)
    const { store } = t
    const c = await store.commit('datasets/rot', async (txn) => void (await txn.put('part-0', 'the original bytes')))
    const hash = c.manifest.files['part-0']!.blob
    // Same length, one byte changed: what bit rot looks like.
    await store.storage.write(blobPath(hash), 'the original bytez')
    const view = await store.open('datasets/rot@1')
    const err = await view.read('part-0').catch((e: unknown) => e)
    expect(err).toBeInstanceOf(IntegrityError)
    expect(err).toMatchObject({ code: 'INTEGRITY', blob: hash, artifact: 'datasets/rot@1' })
    expect((err as Error).message).toMatch(new RegExp(`blob ${hash} \\(file "part-0" of datasets/rot@1\\) is corrupt`))
    // Streaming readers learn it at the end of the stream, before they could accept the bytes.
    await expect(pipeline(await view.readStream('part-0'), sink())).rejects.toBeInstanceOf(IntegrityError)
    await expect(view.verify()).rejects.toBeInstanceOf(IntegrityError)
    await expect(store.getBlob(hash)).rejects.toMatchObject({ code: 'INTEGRITY', blob: hash })
  })

  test('a missing blob of a version is an IntegrityError too', async () => {
    t = await newStore(backend)
    const c = await t.store.commit('datasets/lost', async (txn) => void (await txn.put('f', 'gone soon')))
    await t.store.storage.delete(blobPath(c.manifest.files.f!.blob))
    await expect((await t.store.open('datasets/lost')).read('f')).rejects.toThrow(
      /file "f" of datasets\/lost@1\) is missing from the store/,
    )
  })

  test('a put that fails midway leaves no blob and no temp upload', async () => {
    t = await newStore(backend)
    const failing = (async function* () {
      yield Buffer.from('partial')
      throw new Error('source broke')
    })()
    await expect(t.store.putBlob(failing)).rejects.toThrow(/source broke/)
    for (const prefix of ['blobs/', 'tmp/']) {
      const left: string[] = []
      for await (const o of t.store.storage.list(prefix)) left.push(o.path)
      expect(left).toEqual([])
    }
  })
})

test('a scratch store without fsync stores and verifies the same way', async () => {
  const t = await newStore('file', { fsync: false })
  try {
    const data = randomBytes(2 * 1024 * 1024)
    const c = await t.store.commit(
      'scratch/x',
      async (txn) =>
        void (await txn.put(
          'd',
          (async function* () {
            yield data.subarray(0, 1000)
            yield data.subarray(1000)
          })(),
        )),
    )
    expect(c.manifest.files.d).toEqual({ blob: createHash('sha256').update(data).digest('hex'), size: data.length })
    expect(Buffer.from(await (await t.store.open(c.ref)).read('d')).equals(data)).toBe(true)
  } finally {
    t.cleanup()
  }
})

test('a durable store fsyncs uploads and commits; a scratch store never waits for the disk', async () => {
  const src = tempDir()
  const file = join(src.dir, 'in.bin')
  writeFileSync(file, randomBytes(1024 * 1024))
  const probe = await open(file, 'r')
  const proto = Object.getPrototypeOf(probe) as { sync: () => Promise<void>; datasync: () => Promise<void> }
  await probe.close()
  const sync = vi.spyOn(proto, 'sync')
  const datasync = vi.spyOn(proto, 'datasync')
  try {
    for (const fsync of [true, false]) {
      const t = await newStore('file', { fsync })
      try {
        sync.mockClear()
        datasync.mockClear()
        const c = await t.store.commit('scratch/sync', async (txn) => void (await txn.put('d', { file })))
        await t.store.tag(c.ref, 'best')
        await (await t.store.open('scratch/sync@best')).verify()
        if (fsync) expect(sync.mock.calls.length).toBeGreaterThan(4)
        else expect(sync.mock.calls.length + datasync.mock.calls.length).toBe(0)
      } finally {
        t.cleanup()
      }
    }
  } finally {
    sync.mockRestore()
    datasync.mockRestore()
    src.cleanup()
  }
})
