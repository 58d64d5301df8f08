/**
 * Faults on `file://`: a writer killed mid-write, and writes into directories
 * that cannot be written.
 */
import { execFileSync, spawn } from 'node:child_process'
import { chmodSync, mkdtempSync, readdirSync, statSync, writeFileSync } from 'node:fs'
import { rm } from 'node:fs/promises'
import { hostname, tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, test } from 'vitest'
import { isRiggingError } from '../errors.js'
import { FileStorage } from './file.js'
import { lockPathFor } from './file-lock.js'
import { exited, printed, spawnFixture } from './fixtures/spawn.js'
import { openStorage } from './open-storage.js'

const cleanups: (() => Promise<void> | void)[] = []
afterAll(async () => {
  for (const c of cleanups.reverse()) await c()
})
const tempDir = () => {
  const d = mkdtempSync(join(tmpdir(), 'rigging-faults-'))
  cleanups.push(() => rm(d, { recursive: true, force: true }))
  return d
}

describe('a crash in the middle of an atomic write', () => {
  test('SIGKILL during a large streaming write leaves the old file intact and no partial target', async () => {
    const d = tempDir()
    const s = new FileStorage(d)
    const { generation } = await s.write('big.bin', 'old content')
    const child = spawnFixture('slow-writer.ts', [`file://${d}`, 'big.bin'])
    const done = exited(child)
    let temps: string[]
    try {
      await printed(child, 'midway')
      // The write is really under way: its temp file already holds megabytes.
      temps = readdirSync(d).filter((n) => n.includes('.rigging-tmp-'))
      expect(temps).toHaveLength(1)
      expect(statSync(join(d, temps[0]!)).size).toBeGreaterThanOrEqual(8 << 20)
    } finally {
      child.kill('SIGKILL')
    }
    expect((await done).signal).toBe('SIGKILL')

    expect(await s.readText('big.bin')).toBe('old content')
    expect((await s.stat('big.bin'))?.generation).toBe(generation)
    const listed = []
    for await (const o of s.list()) listed.push(o.path)
    expect(listed).toEqual(['big.bin'])
    // No lock was held while data streamed, so the next writer goes straight through.
    await s.write('big.bin', 'new content', { condition: { ifGeneration: generation } })
    expect(await s.readText('big.bin')).toBe('new content')
    // The dead writer's temp file is still there, hidden; removeOrphans takes it away.
    expect(readdirSync(d).sort()).toEqual([temps[0], 'big.bin'])
    expect(await s.removeOrphans()).toEqual([temps[0]])
    expect(readdirSync(d)).toEqual(['big.bin'])
  })

  test('removeOrphans keeps the files of live writers and removes locks of dead ones', async () => {
    const d = tempDir()
    const s = new FileStorage(d)
    const live = await s.writeStream('sub/live.bin')
    live.write('in flight')
    const dead = spawn(process.execPath, ['-e', ''], { stdio: 'ignore' })
    await new Promise((r) => dead.on('exit', r))
    writeFileSync(
      lockPathFor(join(d, 'sub', 'x')),
      JSON.stringify({ pid: dead.pid, host: hostname(), token: 't', at: Date.now() }),
    )
    expect(await s.removeOrphans()).toEqual(['sub/.x.rigging-lock'])
    expect(readdirSync(join(d, 'sub')).filter((n) => n.startsWith('.live.bin.rigging-tmp-'))).toHaveLength(1)
    await new Promise<void>((res, rej) => live.end((err?: Error | null) => (err ? rej(err) : res())))
    expect(await s.readText('sub/live.bin')).toBe('in flight')
    expect(readdirSync(join(d, 'sub'))).toEqual(['live.bin'])
  })
})

/**
 * A directory this process cannot write. Tests run as root, and root ignores
 * mode bits, so `chmod 555` only works for other users. As root we mount a
 * read-only tmpfs (writes fail with EROFS, as on a read-only volume); if
 * mounting is not allowed, we fall back to /sys, where even root cannot create
 * files (EACCES/EPERM).
 */
function readOnlyDir(): { dir: string; kind: string } {
  const d = tempDir()
  if (process.getuid?.() !== 0) {
    chmodSync(d, 0o555)
    cleanups.push(() => chmodSync(d, 0o755))
    return { dir: d, kind: 'chmod 555' }
  }
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'ro,size=64k', 'tmpfs', d], { stdio: 'ignore' })
    cleanups.push(() => {
      execFileSync('umount', [d])
    })
    return { dir: d, kind: 'read-only tmpfs' }
  } catch {
    return { dir: '/sys/kernel', kind: '/sys' }
  }
}

describe('writes that the filesystem refuses', () => {
  test.each([
    ['a read-only directory', () => readOnlyDir().dir],
    // sysfs refuses new files and folders even to root, on any Linux machine.
    ['/sys (no new files, even for root)', () => '/sys/kernel'],
  ])('%s: STORAGE_PERMISSION naming the object and what to do', async (_name, dir) => {
    const s = await openStorage(`file://${dir()}`)
    for (const p of ['marin-probe.txt', 'sub/marin-probe.txt']) {
      const err = await s.write(p, 'x').catch((e: unknown) => e)
      expect(isRiggingError(err, 'STORAGE_PERMISSION')).toBe(true)
      expect((err as Error).message).toContain(`cannot write ${p}`)
      expect((err as Error).message).toMatch(/point the storage URL .* at a writable directory/)
      const stream = await s.writeStream(p).catch((e: unknown) => e)
      expect(isRiggingError(stream, 'STORAGE_PERMISSION')).toBe(true)
      expect(await s.exists(p)).toBe(false)
    }
  })

  test('a file where a folder is expected is STORAGE_IO saying the two collide', async () => {
    const s = new FileStorage(tempDir())
    await s.write('a', 'file')
    const err = await s.write('a/b', 'x').catch((e: unknown) => e)
    expect(isRiggingError(err, 'STORAGE_IO')).toBe(true)
    expect((err as Error).message).toMatch(/cannot write a\/b: a file and a folder collide/)
  })
})
