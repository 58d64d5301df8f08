import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, expect, test } from 'vitest'
import { runCli } from './cli.js'
import { blobPath, manifestPath } from './layout.js'
import { Progress } from './progress.js'
import { finestoreBin } from './test-support/child.js'
import { newStore, tempDir, type TestStore } from './test-support/stores.js'

let t: TestStore | undefined
let cleanups: (() => void)[] = []
afterEach(() => {
  t?.cleanup()
  t = undefined
  for (const c of cleanups) c()
  cleanups = []
})

/** Runs the real `finestore` bin in a child process. */
const finestore = finestoreBin

const PART = '{"text":"a document"}\n'.repeat(300)
const README = 'what this dataset is\n'

test('verify rehashes every blob: exit 1 naming damaged blobs and the ' +
  'versions they break; repairs from a good copy; exit 0 when all is well', async () => {
  t = await newStore('file')
  const { store, dir } = t
  await store.commit('datasets/web', async (txn) => {
    await txn.put('part-0.jsonl', PART)
    await txn.put('README', README)
  })
  await store.commit('datasets/web', async (txn) => void (await txn.put('part-0.jsonl', PART)), { inherit: true })
  await store.commit('raw/web', async (txn) => void (await txn.put('dump.txt', 'fine bytes')))
  const v1 = await store.manifest('datasets/web', 1)
  const part = v1.files['part-0.jsonl']!.blob
  const readme = v1.files.README!.blob
  const file = store.storage.localPath(blobPath(part))!
  const bytes = readFileSync(file)
  bytes[7] = bytes[7]! ^ 0x20
  writeFileSync(file, bytes)
  await store.storage.delete(blobPath(readme))

  const bad = await finestore(['--prefix', dir, 'verify'])
  expect(bad.code, bad.err).toBe(1)
  expect(bad.err).toMatch(/verifying 2 blobs/) // progress, as lines: stderr is not a terminal
  expect(bad.out).toContain(`${part}  corrupt`)
  expect(bad.out).toContain(`${readme}  missing`)
  expect(bad.out).toMatch(
    new RegExp(`${part}  corrupt.*\\n    datasets/web@1  part-0\\.jsonl\\n    datasets/web@2  part-0\\.jsonl`),
  )
  expect(bad.out).toMatch(new RegExp(`${readme}  missing.*\\n    datasets/web@1  README\\n    datasets/web@2  README`))
  expect(bad.out).toMatch(/2 damaged blobs break 2 versions/)

  const io = { out: [] as string[], err: [] as string[] }
  const run = (args: string[]) =>
    runCli(args, { out: (s) => void io.out.push(s), err: (s) => void io.err.push(s), env: { MARIN_PREFIX: dir } })
  expect(await run(['verify', '--json'])).toBe(1)
  const report = JSON.parse(io.out.join('')) as {
    blobsChecked: number
    intact: number
    damaged: { hash: string; problem: string; usedBy: unknown[] }[]
  }
  expect(report).toMatchObject({ blobsChecked: 2, intact: 1 })
  expect(report.damaged.find((d) => d.hash === part)).toMatchObject({
    problem: 'corrupt',
    usedBy: [
      { artifact: 'datasets/web', version: 1, file: 'part-0.jsonl' },
      { artifact: 'datasets/web', version: 2, file: 'part-0.jsonl' },
    ],
  })

  // A later put of the right bytes repairs the corrupt blob; the missing one is still missing.
  await store.putBlob(PART)
  io.out.length = 0
  expect(await run(['verify'])).toBe(1)
  expect(io.out.join('')).not.toContain(part)
  expect(io.out.join('')).toContain(`${readme}  missing`)

  // An operator's backup: files under any names; only the one whose hash matches is used.
  const backup = tempDir()
  cleanups.push(backup.cleanup)
  mkdirSync(join(backup.dir, 'nested', 'deeper'), { recursive: true })
  writeFileSync(join(backup.dir, 'nested', 'deeper', 'readme-copy.txt'), README)
  writeFileSync(join(backup.dir, 'unrelated.txt'), 'something else entirely')
  io.out.length = 0
  expect(await run(['verify', '--repair-from', backup.dir])).toBe(0)
  expect(io.out.join('')).toContain(
    `repaired ${readme} from ${join(backup.dir, 'nested', 'deeper', 'readme-copy.txt')}`,
  )
  expect(await store.blobs.exists(readme)).toBe(true)

  const good = await finestore(['--prefix', dir, 'verify'])
  expect(good.code, good.err + good.out).toBe(0)
  expect(good.out).toMatch(/all 3 blobs intact/)
  await (await store.open('datasets/web@1')).verify()
}, 180_000)

test(
  'verify --repair-from a folder that does not exist is bad usage; ' +
    'a repair source without the bytes leaves exit 1',
  async () => {
    t = await newStore('file')
    const { store, dir } = t
    const c = await store.commit('datasets/x', async (txn) => void (await txn.put('f', 'only copy')))
    await store.storage.delete(blobPath(c.manifest.files.f!.blob))
    const io = { out: [] as string[], err: [] as string[] }
    const run = (args: string[]) =>
      runCli(args, { out: (s) => void io.out.push(s), err: (s) => void io.err.push(s), env: { MARIN_PREFIX: dir } })
    expect(await run(['verify', '--repair-from', join(dir, 'no-such-backup')])).toBe(2)
    expect(io.err.join('')).toMatch(/--repair-from .*no-such-backup is not a folder/)
    const empty = tempDir()
    cleanups.push(empty.cleanup)
    expect(await run(['verify', '--repair-from', empty.dir])).toBe(1)
    expect(io.out.join('')).toMatch(/not repaired: no file under .* has the right bytes/)
    // Every blob intact but a manifest unreadable: still not well.
    await store.putBlob('only copy')
    await store.storage.write(manifestPath('datasets/x', 2), '{oops')
    io.out.length = 0
    expect(await run(['verify'])).toBe(1)
    expect(io.out.join('')).toMatch(/unreadable manifest: .*artifacts\/datasets\/x\/versions\/2\.json/)
  },
)

test('progress: a redrawn bar on a terminal, periodic lines otherwise', () => {
  const out: string[] = []
  let now = 0
  const lines = new Progress('verify', 'blobs', 4, 4096, {
    write: (s) => void out.push(s),
    tty: false,
    everyMs: 5000,
    now: () => now,
  })
  lines.update(1, 1024)
  now = 6000
  lines.update(2, 2048)
  lines.update(3, 3072) // too soon after the last line
  lines.finish()
  expect(out).toEqual(['verify: 0/4 blobs (0 B of 4.0 KiB)\n', 'verify: 2/4 blobs (2.0 KiB of 4.0 KiB)\n'])
  out.length = 0
  const bar = new Progress('verify', 'blobs', 4, 4096, {
    write: (s) => void out.push(s),
    tty: true,
    everyMs: 0,
    now: () => now,
  })
  bar.update(2, 2048)
  bar.finish()
  expect(out.join('')).toMatch(
    /^\rverify \[░{30}\] 0\/4 blobs.*\rverify \[█{15}░{15}\] 2\/4 blobs \(2\.0 KiB of 4\.0 KiB\)/,
  )
  expect(out.at(-1)).toBe('\n')
})
