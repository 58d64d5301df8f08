import { createHash, randomBytes } from 'node:crypto'
import { readFileSync, writeFileSync } from 'node:fs'
import { type FileHandle, open } from 'node:fs/promises'
import { join } from 'node:path'
import { afterEach, expect, test } from 'vitest'
import { tempDir } from '../test-support/stores.js'
import { copyHashing, readHashing, writeHashing } from './copy-hashing.js'

const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex')
const cleanups: (() => void)[] = []
afterEach(() => {
  for (const c of cleanups.splice(0)) c()
})
const dir = () => {
  const d = tempDir()
  cleanups.push(d.cleanup)
  return d.dir
}

async function copyFile(data: Uint8Array, fsync: boolean, flushEvery?: number) {
  const d = dir()
  writeFileSync(join(d, 'in'), data)
  const from = await open(join(d, 'in'), 'r')
  const out = await open(join(d, 'out'), 'wx')
  try {
    const got = await copyHashing(from, out, { fsync, ...(flushEvery ? { flushEvery } : {}) })
    return { got, written: readFileSync(join(d, 'out')) }
  } finally {
    await from.close()
    await out.close()
  }
}

test('copies a file of many chunks and a remainder, hashing exactly what it wrote', async () => {
  // More chunks than ring slots, so every slot is reused; flushes while writing.
  const data = randomBytes(5 * 512 * 1024 + 333)
  for (const [fsync, flushEvery] of [
    [false, undefined],
    [true, 700 * 1024],
  ] as const) {
    const { got, written } = await copyFile(data, fsync, flushEvery)
    expect(got).toEqual({ hash: sha(data), size: data.length })
    expect(written.equals(data)).toBe(true)
  }
})

test('an empty file copies to an empty file with the hash of no bytes', async () => {
  const { got, written } = await copyFile(new Uint8Array(0), true)
  expect(got).toEqual({ hash: sha(new Uint8Array(0)), size: 0 })
  expect(written.length).toBe(0)
})

test('a stream source that reuses its buffer is written and hashed chunk by chunk, uncorrupted', async () => {
  const d = dir()
  const expected = createHash('sha256')
  const all: Buffer[] = []
  async function* reusing() {
    const buf = Buffer.alloc(300 * 1024)
    for (let i = 0; i < 7; i++) {
      buf.fill(i)
      all.push(Buffer.from(buf))
      expected.update(buf)
      yield buf
    }
    yield 'and a text tail'
    all.push(Buffer.from('and a text tail'))
    expected.update('and a text tail')
  }
  const out = await open(join(d, 'out'), 'wx')
  const got = await writeHashing(reusing(), out, { fsync: true, flushEvery: 1 << 20 }).finally(() => out.close())
  expect(got).toEqual({ hash: expected.digest('hex'), size: Buffer.concat(all).length })
  expect(readFileSync(join(d, 'out')).equals(Buffer.concat(all))).toBe(true)
})

test('a failing write rejects the copy (and leaves no unhandled rejection behind)', async () => {
  const d = dir()
  writeFileSync(join(d, 'in'), randomBytes(3 * 512 * 1024))
  writeFileSync(join(d, 'ro'), '')
  const from = await open(join(d, 'in'), 'r')
  const readOnly = await open(join(d, 'ro'), 'r')
  try {
    await expect(copyHashing(from, readOnly, { fsync: false })).rejects.toMatchObject({ code: 'EBADF' })
    await expect(
      writeHashing(
        (async function* () {
          yield Buffer.from('x')
        })(),
        readOnly,
        { fsync: false },
      ),
    ).rejects.toMatchObject({ code: 'EBADF' })
  } finally {
    await from.close()
    await readOnly.close()
  }
})

test('reads a whole file into memory hashing it chunk by chunk, empty or not', async () => {
  const d = dir()
  for (const data of [randomBytes(3 * 512 * 1024 + 9), Buffer.alloc(0)]) {
    writeFileSync(join(d, 'f'), data)
    const fh = await open(join(d, 'f'), 'r')
    const got = await readHashing(fh).finally(() => fh.close())
    expect(got.hash).toBe(sha(data))
    expect(got.bytes.equals(data)).toBe(true)
  }
})

test('a file that grew after its size was taken is still read to its end', async () => {
  const d = dir()
  const data = randomBytes(700 * 1024)
  writeFileSync(join(d, 'f'), data)
  const fh = await open(join(d, 'f'), 'r')
  // Reports the size from before the growth.
  const stale = { stat: async () => ({ size: 10 }), read: fh.read.bind(fh) } as unknown as FileHandle
  const got = await readHashing(stale).finally(() => fh.close())
  expect(got.hash).toBe(sha(data))
  expect(got.bytes.equals(data)).toBe(true)
})
