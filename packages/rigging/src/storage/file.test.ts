import { spawn } from 'node:child_process'
import { mkdtempSync, readdirSync, writeFileSync } from 'node:fs'
import { rm } from 'node:fs/promises'
import { hostname, tmpdir } from 'node:os'
import { join } from 'node:path'
import { open as openFile } from 'node:fs/promises'
import { afterAll, describe, expect, test, vi } from 'vitest'
import { isRiggingError } from '../errors.js'
import { FileStorage } from './file.js'
import { lockPathFor } from './file-lock.js'
import { exited, printed, spawnFixture } from './fixtures/spawn.js'

const dirs: string[] = []
afterAll(async () => {
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })))
})
const tempDir = () => {
  const d = mkdtempSync(join(tmpdir(), 'rigging-file-'))
  dirs.push(d)
  return d
}

/** The pid of a process that has already exited: a lock naming it is stale. */
async function deadPid(): Promise<number> {
  const child = spawn(process.execPath, ['-e', ''], { stdio: 'ignore' })
  await new Promise((r) => child.on('exit', r))
  return child.pid!
}

describe('file:// across processes', () => {
  test('two processes incrementing one counter by compare-and-swap never lose an update', async () => {
    const d = tempDir()
    const n = 100
    const s = new FileStorage(d)
    const runs = [0, 1].map(() => spawnFixture('cas-counter.ts', [`file://${d}`, 'counter', String(n)]))
    const results = Promise.all(runs.map(exited))
    await Promise.all(runs.map((c) => printed(c, 'ready')))
    await s.write('go', '')
    const outputs = await results
    expect(await s.readText('counter')).toBe(String(2 * n))
    // The race is real: at least one attempt of one process lost and retried.
    const conflicts = outputs.map(
      (r) => (JSON.parse(r.stdout.trim().split('\n').at(-1)!) as { conflicts: number }).conflicts,
    )
    expect(conflicts.reduce((a, b) => a + b, 0)).toBeGreaterThan(0)
    expect(readdirSync(d).sort()).toEqual(['counter', 'go'])
  })
})

describe('file:// object locks', () => {
  test('a lock left by a dead process is broken and the write goes through', async () => {
    const d = tempDir()
    const s = new FileStorage(d)
    const g = (await s.write('HEAD', 'v1')).generation
    writeFileSync(
      lockPathFor(join(d, 'HEAD')),
      JSON.stringify({ pid: await deadPid(), host: hostname(), token: 'x', at: Date.now() }),
    )
    await s.write('HEAD', 'v2', { condition: { ifGeneration: g } })
    expect(await s.readText('HEAD')).toBe('v2')
    expect(readdirSync(d)).toEqual(['HEAD'])
  })

  test('an old lock from another host is broken after staleMs', async () => {
    const d = tempDir()
    const s = new FileStorage(d, { lock: { staleMs: 1000 } })
    writeFileSync(
      lockPathFor(join(d, 'x')),
      JSON.stringify({ pid: 1, host: 'elsewhere', token: 'x', at: Date.now() - 5000 }),
    )
    await s.write('x', 'ok')
    expect(await s.readText('x')).toBe('ok')
  })

  test('a live holder makes writers wait, then time out with what to do', async () => {
    const d = tempDir()
    const s = new FileStorage(d, { lock: { timeoutMs: 300 } })
    await s.write('x', 'old')
    const lock = lockPathFor(join(d, 'x'))
    writeFileSync(lock, JSON.stringify({ pid: process.pid, host: hostname(), token: 'held', at: Date.now() }))
    const err = await s.write('x', 'new').catch((e: unknown) => e)
    expect(isRiggingError(err, 'STORAGE_IO')).toBe(true)
    expect((err as Error).message).toMatch(/still held after 300 ms .*delete the lock file/)
    expect(await s.readText('x')).toBe('old')
    // The failed write cleaned up its temp file; the planted lock is untouched.
    expect(readdirSync(d).sort()).toEqual(['.x.rigging-lock', 'x'])
    await rm(lock)
    await s.write('x', 'new')
    expect(await s.readText('x')).toBe('new')
  })
})

describe('file:// durability knob', () => {
  test('durable writes fsync the file and its folder; durable: false skips both', async () => {
    const s = new FileStorage(tempDir())
    const probe = await openFile(join(s.root, '.probe'), 'w')
    const proto = Object.getPrototypeOf(probe) as { sync: () => Promise<void> }
    await probe.close()
    const sync = vi.spyOn(proto, 'sync')
    try {
      await s.write('a', 'x')
      expect(sync.mock.calls.length).toBe(2) // the temp file, then the folder
      sync.mockClear()
      await s.write('b', 'x', { durable: false })
      await s.copy('a', 'c', { durable: false })
      await s.rename('c', 'd', { durable: false })
      await s.delete('d', { durable: false })
      expect(sync.mock.calls.length).toBe(0)
      await s.rename('b', 'e')
      expect(sync.mock.calls.length).toBe(1) // the folder
    } finally {
      sync.mockRestore()
    }
  })
})
