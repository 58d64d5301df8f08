import { mkdtempSync } from 'node:fs'
import { rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { buffer, text } from 'node:stream/consumers'
import { pipeline } from 'node:stream/promises'
import { Readable } from 'node:stream'
import { afterAll, describe, expect, test } from 'vitest'
import { isRiggingError } from '../errors.js'
import { MemoryStorage } from './memory.js'
import { openStorage } from './open-storage.js'
import type { Storage } from './types.js'

const dirs: string[] = []
afterAll(async () => {
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })))
})

let memCount = 0
const backends: Record<string, () => Promise<Storage>> = {
  file: async () => {
    const d = mkdtempSync(join(tmpdir(), 'rigging-storage-'))
    dirs.push(d)
    return openStorage(`file://${d}`)
  },
  memory: async () => openStorage(`memory://contract-${process.pid}-${memCount++}`),
}

const paths = async (s: Storage, prefix?: string, recursive?: boolean) => {
  const out: string[] = []
  for await (const o of s.list(prefix, recursive === undefined ? {} : { recursive })) out.push(o.path)
  return out
}

describe.each(Object.keys(backends))('%s storage', (kind) => {
  const open = backends[kind]!

  test('write then read bytes and text; missing objects are STORAGE_NOT_FOUND', async () => {
    const s = await open()
    const info = await s.write('a/b/c.bin', new Uint8Array([1, 2, 3]))
    expect(info).toMatchObject({ path: 'a/b/c.bin', size: 3 })
    expect([...(await s.read('a/b/c.bin'))]).toEqual([1, 2, 3])
    await s.write('t.txt', 'héllo')
    expect(await s.readText('t.txt')).toBe('héllo')
    await expect(s.read('nope.txt')).rejects.toThrow(/nope\.txt does not exist/)
    await expect(s.read('nope.txt')).rejects.toSatisfy((e) => isRiggingError(e, 'STORAGE_NOT_FOUND'))
  })

  test.each(['../x', '/etc/passwd', 'a/../../b', '', 'dir/', 'a\\b'])(
    'path %j is STORAGE_INVALID_PATH naming it',
    async (p) => {
      const s = await open()
      const err = await s.write(p, 'x').catch((e: unknown) => e)
      expect(isRiggingError(err, 'STORAGE_INVALID_PATH')).toBe(true)
      expect((err as Error).message).toContain(JSON.stringify(p))
      await expect(s.read(p)).rejects.toSatisfy((e) => isRiggingError(e, 'STORAGE_INVALID_PATH'))
    },
  )

  test('stat, exists and delete (deleting a missing object is fine)', async () => {
    const s = await open()
    expect(await s.stat('x.json')).toBeUndefined()
    expect(await s.exists('x.json')).toBe(false)
    const w = await s.write('x.json', '{}')
    const st = await s.stat('x.json')
    expect(st).toEqual(w)
    expect(st?.mtimeMs).toBeGreaterThan(Date.now() - 60_000)
    expect(await s.exists('x.json')).toBe(true)
    await s.delete('x.json')
    expect(await s.exists('x.json')).toBe(false)
    await s.delete('x.json')
    await s.delete('no/such/dir/x.json')
  })

  test('list: prefix, recursive or not, in path order', async () => {
    const s = await open()
    for (const p of ['a/1', 'a/2', 'a/sub/3', 'a-b', 'b/4', 'ab']) await s.write(p, p)
    expect(await paths(s)).toEqual(['a-b', 'a/1', 'a/2', 'a/sub/3', 'ab', 'b/4'])
    expect(await paths(s, 'a/')).toEqual(['a/1', 'a/2', 'a/sub/3'])
    expect(await paths(s, 'a/', false)).toEqual(['a/1', 'a/2'])
    expect(await paths(s, 'a')).toEqual(['a-b', 'a/1', 'a/2', 'a/sub/3', 'ab'])
    expect(await paths(s, '', false)).toEqual(['a-b', 'ab'])
    expect(await paths(s, 'zzz/')).toEqual([])
    const infos = []
    for await (const o of s.list('b/')) infos.push(o)
    expect(infos).toEqual([await s.stat('b/4')])
  })

  test('generation changes on every write, even with the same bytes', async () => {
    const s = await open()
    const seen = new Set<string>()
    for (let i = 0; i < 50; i++) seen.add((await s.write('same', 'same bytes')).generation)
    expect(seen.size).toBe(50)
    expect((await s.stat('same'))?.generation).toBe([...seen].at(-1))
  })

  test('ifAbsent creates once; a second create fails and changes nothing', async () => {
    const s = await open()
    await s.write('HEAD', 'v1', { condition: { ifAbsent: true } })
    const err = await s.write('HEAD', 'v2', { condition: { ifAbsent: true } }).catch((e: unknown) => e)
    expect(isRiggingError(err, 'STORAGE_CONDITION_FAILED')).toBe(true)
    expect((err as Error).message).toMatch(/HEAD already exists/)
    expect(await s.readText('HEAD')).toBe('v1')
  })

  test('ifGeneration replaces only the generation it names', async () => {
    const s = await open()
    const g1 = (await s.write('HEAD', 'v1')).generation
    const g2 = (await s.write('HEAD', 'v2', { condition: { ifGeneration: g1 } })).generation
    expect(g2).not.toBe(g1)
    const err = await s.write('HEAD', 'v3', { condition: { ifGeneration: g1 } }).catch((e: unknown) => e)
    expect(isRiggingError(err, 'STORAGE_CONDITION_FAILED')).toBe(true)
    expect((err as Error).message).toContain(g1)
    expect(await s.readText('HEAD')).toBe('v2')
    await expect(s.write('absent', 'x', { condition: { ifGeneration: g2 } })).rejects.toSatisfy((e) =>
      isRiggingError(e, 'STORAGE_CONDITION_FAILED'),
    )
    expect(await s.exists('absent')).toBe(false)
  })

  test('conditional delete', async () => {
    const s = await open()
    const g1 = (await s.write('k', '1')).generation
    await s.write('k', '2')
    await expect(s.delete('k', { ifGeneration: g1 })).rejects.toSatisfy((e) =>
      isRiggingError(e, 'STORAGE_CONDITION_FAILED'),
    )
    expect(await s.readText('k')).toBe('2')
    await s.delete('k', { ifGeneration: (await s.stat('k'))!.generation })
    expect(await s.exists('k')).toBe(false)
    await expect(s.delete('k', { ifGeneration: g1 })).rejects.toSatisfy((e) =>
      isRiggingError(e, 'STORAGE_CONDITION_FAILED'),
    )
  })

  test('concurrent compare-and-swap increments never lose an update', async () => {
    const s = await open()
    const inc = async () => {
      for (;;) {
        const st = await s.stat('n')
        const cur = st ? Number(await s.readText('n')) : 0
        const condition = st ? { ifGeneration: st.generation } : ({ ifAbsent: true } as const)
        try {
          return await s.write('n', String(cur + 1), { condition })
        } catch (err) {
          if (!isRiggingError(err, 'STORAGE_CONDITION_FAILED')) throw err
        }
      }
    }
    await Promise.all(Array.from({ length: 20 }, inc))
    expect(await s.readText('n')).toBe('20')
  })

  test('readStream reads the whole object or a byte range [start, end)', async () => {
    const s = await open()
    await s.write('r', '0123456789')
    expect(await text(await s.readStream('r'))).toBe('0123456789')
    expect(await text(await s.readStream('r', { start: 2, end: 5 }))).toBe('234')
    expect(await text(await s.readStream('r', { start: 7 }))).toBe('789')
    expect(await text(await s.readStream('r', { end: 3 }))).toBe('012')
    expect(await text(await s.readStream('r', { start: 4, end: 4 }))).toBe('')
    await expect(s.readStream('missing')).rejects.toSatisfy((e) => isRiggingError(e, 'STORAGE_NOT_FOUND'))
  })

  test('writeStream appears only when finished', async () => {
    const s = await open()
    await s.write('big', 'old')
    const w = await s.writeStream('big')
    const chunk = Buffer.alloc(256 * 1024, 'y')
    w.write(chunk)
    w.write(chunk)
    await new Promise((r) => setTimeout(r, 20))
    expect(await s.readText('big')).toBe('old')
    await new Promise<void>((res, rej) => w.end((err?: Error | null) => (err ? rej(err) : res())))
    expect(Buffer.from(await s.read('big')).equals(Buffer.concat([chunk, chunk]))).toBe(true)
    await pipeline(Readable.from([Buffer.from('a'), Buffer.from('b')]), await s.writeStream('piped'))
    expect(await s.readText('piped')).toBe('ab')
    expect((await buffer(await s.readStream('big'))).byteLength).toBe(512 * 1024)
  })

  test('a destroyed or errored writeStream leaves nothing behind', async () => {
    const s = await open()
    await s.write('keep', 'old')
    const w = await s.writeStream('keep')
    w.write('new partial data')
    const closed = new Promise((res) => w.on('close', res))
    w.destroy()
    await closed
    const w2 = await s.writeStream('fresh')
    w2.write('partial')
    const errored = new Promise((res) => w2.on('error', res))
    const closed2 = new Promise((res) => w2.on('close', res))
    w2.destroy(new Error('upstream failed'))
    expect(((await errored) as Error).message).toBe('upstream failed')
    await closed2
    expect(await s.readText('keep')).toBe('old')
    expect(await s.exists('fresh')).toBe(false)
    expect(await paths(s)).toEqual(['keep'])
  })

  test('a conditional writeStream fails at finish and leaves the object alone', async () => {
    const s = await open()
    await s.write('c', 'one')
    const w = await s.writeStream('c', { condition: { ifAbsent: true } })
    const done = new Promise((res) => w.on('error', res))
    w.end('two')
    expect(isRiggingError(await done, 'STORAGE_CONDITION_FAILED')).toBe(true)
    expect(await s.readText('c')).toBe('one')
    expect(await paths(s)).toEqual(['c'])
  })

  test('copy makes an independent object with its own generation; conditions apply to the target', async () => {
    const s = await open()
    const a = await s.write('src/a.bin', 'alpha')
    const c = await s.copy!('src/a.bin', 'dst/deep/c.bin')
    expect(c).toMatchObject({ path: 'dst/deep/c.bin', size: 5 })
    expect(c.generation).not.toBe(a.generation)
    expect(await s.readText('dst/deep/c.bin')).toBe('alpha')
    // Rewriting the source leaves the copy alone.
    await s.write('src/a.bin', 'beta')
    expect(await s.readText('dst/deep/c.bin')).toBe('alpha')
    await expect(s.copy!('src/a.bin', 'dst/deep/c.bin', { condition: { ifAbsent: true } })).rejects.toSatisfy((e) =>
      isRiggingError(e, 'STORAGE_CONDITION_FAILED'),
    )
    await expect(
      s.copy!('src/a.bin', 'dst/deep/c.bin', { condition: { ifGeneration: a.generation } }),
    ).rejects.toSatisfy((e) => isRiggingError(e, 'STORAGE_CONDITION_FAILED'))
    expect(await s.readText('dst/deep/c.bin')).toBe('alpha')
    const c2 = await s.copy!('src/a.bin', 'dst/deep/c.bin', {
      condition: { ifGeneration: c.generation },
      durable: false,
    })
    expect(c2.generation).not.toBe(c.generation)
    expect(await s.readText('dst/deep/c.bin')).toBe('beta')
    await expect(s.copy!('nope', 'x')).rejects.toSatisfy((e) => isRiggingError(e, 'STORAGE_NOT_FOUND'))
    expect(await s.exists('x')).toBe(false)
    expect(await paths(s)).toEqual(['dst/deep/c.bin', 'src/a.bin'])
  })

  test('rename moves an object; a failed condition changes nothing', async () => {
    const s = await open()
    await s.write('tmp/up', 'payload')
    const old = await s.write('named/x', 'older')
    await expect(s.rename!('tmp/up', 'named/x', { condition: { ifAbsent: true } })).rejects.toSatisfy((e) =>
      isRiggingError(e, 'STORAGE_CONDITION_FAILED'),
    )
    expect(await s.readText('tmp/up')).toBe('payload')
    expect(await s.readText('named/x')).toBe('older')
    const moved = await s.rename!('tmp/up', 'named/x', { condition: { ifGeneration: old.generation } })
    expect(moved).toMatchObject({ path: 'named/x', size: 7 })
    expect(moved.generation).not.toBe(old.generation)
    expect((await s.stat('named/x'))?.generation).toBe(moved.generation)
    expect(await s.readText('named/x')).toBe('payload')
    expect(await s.exists('tmp/up')).toBe(false)
    await s.write('tmp/up2', 'second')
    await s.rename!('tmp/up2', 'fresh/dir/y', { condition: { ifAbsent: true }, durable: false })
    expect(await s.readText('fresh/dir/y')).toBe('second')
    await expect(s.rename!('tmp/up2', 'z')).rejects.toSatisfy((e) => isRiggingError(e, 'STORAGE_NOT_FOUND'))
    expect(await paths(s)).toEqual(['fresh/dir/y', 'named/x'])
  })

  test('durable: false writes, streams and deletes keep their atomicity and conditions', async () => {
    const s = await open()
    const a = await s.write('scratch/a', 'one', { durable: false })
    await expect(s.write('scratch/a', 'two', { condition: { ifAbsent: true }, durable: false })).rejects.toSatisfy(
      (e) => isRiggingError(e, 'STORAGE_CONDITION_FAILED'),
    )
    await s.write('scratch/a', 'two', { condition: { ifGeneration: a.generation }, durable: false })
    await pipeline(
      Readable.from([Buffer.from('stre'), Buffer.from('amed')]),
      await s.writeStream('scratch/b', { durable: false }),
    )
    expect(await s.readText('scratch/a')).toBe('two')
    expect(await s.readText('scratch/b')).toBe('streamed')
    await s.delete('scratch/a', { durable: false })
    expect(await paths(s, 'scratch/')).toEqual(['scratch/b'])
  })
})

describe('openStorage', () => {
  test('memory:// names one process-wide store', async () => {
    const name = `shared-${process.pid}`
    const a = await openStorage(`memory://${name}`)
    const b = await openStorage(`memory://${name}`)
    await a.write('x', '1')
    expect(await b.readText('x')).toBe('1')
    expect(a.url).toBe(`memory://${name}`)
    expect(a.localPath('x')).toBeUndefined()
    MemoryStorage.clear(name)
    expect(await b.exists('x')).toBe(false)
  })

  test('file URLs and plain paths open the same directory', async () => {
    const d = mkdtempSync(join(tmpdir(), 'rigging-open-'))
    dirs.push(d)
    const a = await openStorage(`file://${d}`)
    const b = await openStorage(d)
    await a.write('p/q', 'z')
    expect(await b.readText('p/q')).toBe('z')
    expect(a.localPath('p/q')).toBe(join(d, 'p', 'q'))
    expect(b.url).toBe(a.url)
  })

  test('an unknown scheme is STORAGE_UNKNOWN_SCHEME listing the supported ones', async () => {
    const err = await openStorage('ftp://host/x').catch((e: unknown) => e)
    expect(isRiggingError(err, 'STORAGE_UNKNOWN_SCHEME')).toBe(true)
    expect((err as Error).message).toMatch(
      /unknown scheme "ftp:\/\/"; supported: file:\/\/, memory:\/\/, s3:\/\/, gs:\/\/ \(or a plain local path\)/,
    )
  })

  test('a file URL with a host or an empty URL is rejected with what to write instead', async () => {
    await expect(openStorage('file://server/share')).rejects.toThrow(/use file:\/\/\/absolute\/path/)
    await expect(openStorage('')).rejects.toSatisfy((e) => isRiggingError(e, 'STORAGE_INVALID_PATH'))
  })
})
