import { execFile } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { afterAll, beforeAll, expect, test } from 'vitest'
import pkg from '../package.json' with { type: 'json' }
import { runCli } from './cli.js'
import { ingest } from './dataset/ingest.js'

const root = mkdtempSync(join(tmpdir(), 'datakit-cli-'))
const prefix = join(root, 'marin')
afterAll(() => rmSync(root, { recursive: true, force: true }))
beforeAll(async () => {
  writeFileSync(join(root, 'a.jsonl'), '{"text":"one"}\n{"text":"two"}\n')
  await ingest({ name: 'tiny', source: join(root, 'a.jsonl'), format: 'jsonl', prefix })
})

async function run(...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = ''
  let err = ''
  const code = await runCli(['--prefix', prefix, ...argv], { out: (s) => (out += s), err: (s) => (err += s) })
  return { code, out, err }
}

test('ls prints an aligned table with human sizes, naming datasets as finestore does', async () => {
  writeFileSync(join(root, 'big.jsonl'), `${JSON.stringify({ text: 'x'.repeat(5000) })}\n`)
  await ingest({ name: 'a-much-longer-name', source: join(root, 'big.jsonl'), format: 'jsonl', prefix })
  const { code, out } = await run('ls')
  expect(code).toBe(0)
  expect(out).toBe(
    [
      'DATASET                      HEAD  VERSIONS  RECORDS  SIZE',
      'datasets/a-much-longer-name  1     1         1        4.9 KiB',
      'datasets/tiny                1     1         2        6 B',
      '',
    ].join('\n'),
  )
})

test('show takes the name finestore uses (datasets/NAME) or the bare name', async () => {
  const show = await run('show', 'datasets/tiny@1', '--json')
  expect(show.code, show.err).toBe(0)
  expect(JSON.parse(show.out)).toMatchObject({
    name: 'datasets/tiny',
    version: 1,
    metadata: { records: 2, shards: 1 },
    files: ['part-00000-of-00001.parquet'],
  })
  expect((await run('show', 'tiny')).out).toMatch(/^datasets\/tiny@1 /)
  expect((await run('show', 'datasets/tiny')).out).toMatch(/^datasets\/tiny@1 /)
})

test('unknown names and versions list what exists; bad usage exits 2', async () => {
  expect(await run('show', 'nope')).toMatchObject({
    code: 1,
    err: expect.stringMatching(/no dataset "datasets\/nope"; existing: datasets\/a-much-longer-name, datasets\/tiny/),
  })
  expect(await run('show', 'datasets/tiny@5')).toMatchObject({
    code: 1,
    err: expect.stringContaining('dataset "datasets/tiny" has no version 5; existing versions: 1'),
  })
  expect((await run('show', 'tiny@x')).code).toBe(2)
  expect((await run('frobnicate')).code).toBe(2)
  expect((await run('show')).code).toBe(2)
})

test('no arguments print help and exit 2; --version prints the package version', async () => {
  let out = ''
  let err = ''
  const io = { out: (s: string) => (out += s), err: (s: string) => (err += s) }
  expect(await runCli([], io)).toBe(2)
  expect(err).toMatch(/Usage: datakit/)
  expect(await runCli(['--version'], io)).toBe(0)
  expect(out).toBe(`${pkg.version}\n`)
})

test('the bin runs through tsx', async () => {
  const bin = new URL('../bin/datakit.js', import.meta.url).pathname
  const { stdout } = await promisify(execFile)(process.execPath, [bin, '--prefix', prefix, 'ls', '--json'])
  expect(JSON.parse(stdout)).toContainEqual({ name: 'datasets/tiny', latest: 1, versions: 1, records: 2, bytes: 6 })
}, 60_000)
