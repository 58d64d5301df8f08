import { hostname } from 'node:os'
import { statSync } from 'node:fs'
import { afterEach, expect, test } from 'vitest'
import { runCli } from './cli.js'
import { finestoreBin, fixture, runNode } from './test-support/child.js'
import { listedPaths, newStore, type TestStore } from './test-support/stores.js'

let t: TestStore | undefined
afterEach(() => {
  t?.cleanup()
  t = undefined
})

const listed = (prefix: string) => listedPaths(t!.store, prefix)

/** Runs the real `finestore` bin in a child process. */
const finestore = finestoreBin

test('an upload killed with SIGKILL: gc says what it holds and why, ' +
  'and --expire-pins frees the temp file and the pin', async () => {
  t = await newStore('file')
  const { store, url, dir } = t
  await store.commit('datasets/crash', async (txn) => void (await txn.put('keep', 'version one')))
  // The writer keeps the default pin ttl (1 h) and has written 2 MiB of its second file when it dies.
  const child = runNode([fixture('committer.ts'), url, 'stall', 'datasets/crash', '3600000', '2048'])
  await child.waitFor((l) => l.includes('"uploading"'))
  const pid = child.proc.pid!
  child.proc.kill('SIGKILL')
  expect((await child.exited).signal).toBe('SIGKILL')
  const [tmp] = await listed('tmp/')
  const [pin] = await listed('txns/')
  expect(tmp).toBeDefined()
  expect(pin).toBeDefined()
  const tmpSize = statSync(store.storage.localPath(tmp!)!).size

  // Plain gc keeps both, and says why: the pin (whose, since when, until when) holds the temp upload.
  const held = await finestore(['--prefix', dir, 'gc', '--grace', '0', '--json'])
  expect(held.code, held.err).toBe(0)
  const r1 = JSON.parse(held.out) as Record<string, unknown>
  expect(r1).toMatchObject({
    pinsHeld: [{ artifact: 'datasets/crash', pid, host: hostname(), writerGone: true, blobs: 1, tmps: 1 }],
    pinsExpired: [],
    tmpsKept: [{ path: tmp, size: tmpSize, reason: expect.stringMatching(/pinned by transaction/) }],
    tmpsRemoved: [],
  })
  const p1 = (r1.pinsHeld as { startedAt: string; heartbeatAt: string; expiresAt: string }[])[0]!
  expect(Date.parse(p1.expiresAt) - Date.parse(p1.heartbeatAt)).toBe(3_600_000)
  expect(Date.parse(p1.startedAt)).toBeLessThanOrEqual(Date.parse(p1.heartbeatAt))
  expect(await listed('tmp/')).toEqual([tmp])

  const human = await finestore(['--prefix', dir, 'gc', '--grace', '0'])
  expect(human.code, human.err).toBe(0)
  expect(human.out).toMatch(
    new RegExp(`pins held \\(1\\):\\n  .*datasets/crash.*pid ${pid} on ${hostname()} \\(gone\\).*since .*until `),
  )
  expect(human.out).toMatch(
    new RegExp(
      String.raw`temp uploads kept \(1\):\n {2}tmp/\S+\s+[\d.]+ (KiB|MiB)\s+` +
        String.raw`pinned by transaction \S+ \(datasets/crash, pid \d+ on \S+\) until `,
    ),
  )
  expect(human.out).toMatch(/--expire-pins/) // it says how to free them

  const helpText: string[] = []
  expect(await runCli(['gc', '--help'], { out: (s) => void helpText.push(s), err: (s) => void helpText.push(s) })).toBe(
    0,
  )
  expect(helpText.join('')).toMatch(/--expire-pins\s+expire the pins of writers whose process is gone/)

  // --expire-pins: the writer process is gone, so its pin expires now and its temp upload goes with it,
  // whatever its age (nobody else knows its name).
  const freed = await finestore(['--prefix', dir, 'gc', '--expire-pins', '--json'])
  expect(freed.code, freed.err).toBe(0)
  const r2 = JSON.parse(freed.out) as {
    bytesFreed: number
    deleted: unknown[]
    young: number
    pinsHeld: unknown[]
    pinsExpired: { pid: number; reason: string }[]
    tmpsRemoved: { path: string; size: number }[]
  }
  expect(r2.pinsExpired).toMatchObject([{ pid, reason: expect.stringMatching(/process .* is gone/) }])
  expect(r2.pinsHeld).toEqual([])
  expect(r2.tmpsRemoved).toEqual([{ path: tmp, size: tmpSize }])
  expect(r2.bytesFreed).toBe(tmpSize)
  expect(await listed('tmp/')).toEqual([])
  expect(await listed('txns/')).toEqual([])
  // The blob it had staged is an ordinary orphan now: kept for the grace period, like any loose blob.
  expect(r2).toMatchObject({ deleted: [], young: 1 })
  const orphan = await finestore(['--prefix', dir, 'gc', '--grace', '0', '--json'])
  expect(orphan.code, orphan.err).toBe(0)
  expect(JSON.parse(orphan.out)).toMatchObject({ deleted: [{ size: 256 * 1024 }], bytesFreed: 256 * 1024 })
  await (await store.open('datasets/crash')).verify()
}, 180_000)

test(
  'gc --expire-pins keeps the pin of a live writer; --older-than ' + 'expires pins by age; bad values exit 2',
  async () => {
    t = await newStore('file')
    const { store, dir } = t
    const txn = await store.begin('datasets/live')
    await txn.put('f', 'staged by a live writer')
    const io = { out: [] as string[], err: [] as string[] }
    const run = (args: string[]) =>
      runCli(args, { out: (s) => void io.out.push(s), err: (s) => void io.err.push(s), env: { MARIN_PREFIX: dir } })
    expect(await run(['gc', '--expire-pins', '--grace', '0', '--json'])).toBe(0)
    expect(JSON.parse(io.out.join(''))).toMatchObject({
      pinsHeld: [{ artifact: 'datasets/live', pid: process.pid, writerGone: false }],
      pinsExpired: [],
      deleted: [],
    })
    // A pin whose heartbeat stopped 20 minutes ago, of a process that still runs (this one):
    // --expire-pins alone keeps it, --older-than 10m expires it.
    const beat = Date.now() - 20 * 60_000
    await store.storage.write(
      'txns/stuck.json',
      JSON.stringify({
        id: 'stuck',
        artifact: 'datasets/stuck',
        host: hostname(),
        pid: process.pid,
        startedAt: beat,
        heartbeatAt: beat,
        blobs: [],
        tmps: [],
      }),
    )
    io.out.length = 0
    expect(await run(['gc', '--expire-pins', '--json'])).toBe(0)
    expect(JSON.parse(io.out.join('')).pinsHeld).toHaveLength(2)
    io.out.length = 0
    expect(await run(['gc', '--expire-pins', '--older-than', '10m', '--json'])).toBe(0)
    const r = JSON.parse(io.out.join('')) as {
      pinsHeld: { id: string }[]
      pinsExpired: { id: string; reason: string }[]
    }
    expect(r.pinsHeld.map((p) => p.id)).not.toContain('stuck')
    expect(r.pinsExpired).toMatchObject([{ id: 'stuck', reason: expect.stringMatching(/no heartbeat for 20 min/) }])
    expect(await listed('txns/')).toHaveLength(1)
    expect(await run(['gc', '--older-than', '10m'])).toBe(2)
    expect(io.err.join('')).toMatch(/--older-than needs --expire-pins/)
    expect(await run(['gc', '--expire-pins', '--older-than', '30s'])).toBe(2)
    expect(io.err.join('')).toMatch(/--older-than "30s" is too short/)
    expect(await run(['gc', '--expire-pins', '--older-than', 'soon'])).toBe(2)
    await txn.commit()
  },
)
