import { mkdtempSync, statSync } from 'node:fs'
import { rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, test } from 'vitest'
import { isRiggingError } from '../errors.js'
import { REDACTED } from '../redaction.js'
import { specSource } from '../secret-sources.js'
import { SecretStore } from '../secrets.js'
import { FileStorage } from './file.js'
import { openStorage } from './open-storage.js'
import { scrubbingStorage } from './scrubbing.js'

const dirs: string[] = []
afterAll(async () => {
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })))
})
const tempDir = () => {
  const d = mkdtempSync(join(tmpdir(), 'rigging-private-'))
  dirs.push(d)
  return d
}
const groupOrOther = (p: string) => statSync(p).mode & 0o077

describe('private file storage', () => {
  test('objects are created 0600 and the folders it creates 0700, by write, writeStream and copy', async () => {
    const d = tempDir()
    const s = await openStorage(d, { private: true })
    await s.write('a/b/status', 'RUNNING\n')
    const w = await s.writeStream('a/c/log')
    await new Promise<void>((r, j) => w.end('line\n', (err?: Error | null) => (err ? j(err) : r())))
    await new FileStorage(d).write('shared/open.txt', 'public\n')
    await s.copy!('shared/open.txt', 'a/copied.txt')
    await s.write('a/b/status', 'SUCCESS\n', { condition: { ifGeneration: (await s.stat('a/b/status'))!.generation } })
    for (const f of ['a/b/status', 'a/c/log', 'a/copied.txt']) expect(statSync(join(d, f)).mode & 0o777, f).toBe(0o600)
    for (const f of ['a', 'a/b', 'a/c']) expect(statSync(join(d, f)).mode & 0o777, f).toBe(0o700)
    expect(await s.readText('a/b/status')).toBe('SUCCESS\n')
  })

  test('file:// URLs take the option too', async () => {
    const d = tempDir()
    const s = await openStorage(`file://${d}`, { private: true })
    await s.write('x/y.json', '{}')
    expect(groupOrOther(join(d, 'x'))).toBe(0)
    expect(groupOrOther(join(d, 'x', 'y.json'))).toBe(0)
  })
})

describe('scrubbingStorage', () => {
  const key = new SecretStore({
    sources: [specSource({ k: 'env:SCRUB_STORAGE_KEY' }, { SCRUB_STORAGE_KEY: 'sk-storage-0123456789' })],
  }).get('k')

  test('text written through it never holds a value a SecretStore handed out', async () => {
    const d = tempDir()
    const s = scrubbingStorage(new FileStorage(d))
    await s.write('info.json', `${JSON.stringify({ error: `Error: bad key ${key}\n    at x (y.ts:1:1)` }, null, 2)}\n`)
    expect(JSON.parse(await s.readText('info.json'))).toEqual({
      error: `Error: bad key ${REDACTED}\n    at x (y.ts:1:1)`,
    })
    // Bytes are written as they are: they may be anything, such as a checkpoint.
    await s.write('blob.bin', new TextEncoder().encode(key))
    expect(await s.readText('blob.bin')).toBe(key)
  })

  test('everything else is the storage underneath: conditions, URL, local paths, class', async () => {
    const d = tempDir()
    const inner = new FileStorage(d)
    const s = scrubbingStorage(inner)
    expect(s).toBeInstanceOf(FileStorage)
    expect(s.url).toBe(inner.url)
    expect(s.localPath('a')).toBe(join(d, 'a'))
    const first = await s.write('lock', `owner ${key}`, { condition: { ifAbsent: true } })
    const again = await s.write('lock', 'other', { condition: { ifAbsent: true } }).catch((err: unknown) => err)
    expect(isRiggingError(again, 'STORAGE_CONDITION_FAILED')).toBe(true)
    expect((await s.stat('lock'))!.generation).toBe(first.generation)
    expect(await inner.readText('lock')).toBe(`owner ${REDACTED}`)
    const mem = scrubbingStorage(await openStorage('memory://scrubbing-test'))
    await mem.write('x', `k=${key}`)
    expect(await mem.readText('x')).toBe(`k=${REDACTED}`)
  })
})
