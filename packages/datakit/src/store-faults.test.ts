/**
 * A writer killed mid-commit on an `s3://` prefix (s3rver on loopback): an ingest in a process of its own is
 * killed with SIGKILL as its first shard reaches the store. No version of the dataset looks done (no manifest, no
 * HEAD; opening it says it does not exist), and the next ingest commits the whole dataset, equal to the same
 * ingest on a local folder prefix.
 */
import { spawn } from 'node:child_process'
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { storeUrl } from '@marin/finestore'
import { openStorage } from '@marin/rigging'
import { startLoopbackS3 } from '@marin/rigging/hosts-cluster'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { ingest } from './dataset/ingest.js'
import { openDataset } from './dataset/open-dataset.js'

const TSX = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href
const CHILD = resolve(import.meta.dirname, 'test-support', 'ingest-child.ts')
const PREFIX = `s3://marin-test/datakit-faults-${process.pid}`
const FILES = 12

const root = mkdtempSync(join(tmpdir(), 'datakit-store-faults-'))
const saved = { ...process.env }
let closeS3: (() => void) | undefined
afterAll(() => {
  closeS3?.()
  for (const k of Object.keys(process.env)) if (!(k in saved)) delete process.env[k]
  Object.assign(process.env, saved)
  rmSync(root, { recursive: true, force: true })
})

// Twelve source files (one shard each), so that the commit uploads twelve blobs before its manifest.
const src = join(root, 'src')
mkdirSync(src)
for (let f = 0; f < FILES; f++) {
  const lines = Array.from({ length: 200 }, (_, i) => {
    const words = Array.from({ length: 60 }, (_, k) => `w${(f * 7919 + i * 104_729 + k * 15_485_863) % 999_983}`)
    return JSON.stringify({ text: `file ${f} document ${i}: ${words.join(' ')}` })
  })
  writeFileSync(join(src, `${String(f).padStart(2, '0')}.jsonl`), `${lines.join('\n')}\n`)
}
const SOURCE = join(src, '*.jsonl')

beforeAll(async () => {
  const s3 = await startLoopbackS3(join(root, 's3'))
  closeS3 = s3.close
  // This process and the child share the prefix's local folder (under TMPDIR), as two runs on one machine do.
  Object.assign(process.env, { ...s3.env, TMPDIR: join(root, 'tmp') })
  mkdirSync(join(root, 'tmp'))
}, 30_000)

/** Objects of the store under the bucket's folder on disk whose key matches `re`. */
const inBucket = (re: RegExp): string[] =>
  (readdirSync(join(root, 's3'), { recursive: true }) as string[]).filter((f) => re.test(f))

describe('a writer killed mid-commit on an object store prefix', () => {
  test('leaves no version that looks done; the next ingest commits the whole dataset', async () => {
    const child = spawn(
      process.execPath,
      ['--import', TSX, CHILD, JSON.stringify({ name: 'killed', source: SOURCE, prefix: PREFIX })],
      {
        env: process.env,
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    )
    let out = ''
    let err = ''
    child.stdout.on('data', (d) => (out += d))
    child.stderr.on('data', (d) => (err += d))
    const exited = new Promise<void>((r) => child.on('exit', () => r()))
    const started = Date.now()
    while (inBucket(/store\/blobs\//).length === 0) {
      if (child.exitCode !== null) throw new Error(`the ingest ended before committing: ${out} ${err.slice(-1500)}`)
      if (Date.now() - started > 90_000) throw new Error(`no blob reached the store in 90 s: ${err.slice(-1500)}`)
      await new Promise((r) => setTimeout(r, 10))
    }
    child.kill('SIGKILL')
    await exited
    expect(out, 'the ingest finished before it was killed').not.toContain('"step":"done"')

    // Some blobs are there, but no manifest and no HEAD: nothing says the dataset exists.
    const store = await openStorage(storeUrl(PREFIX))
    const keys: string[] = []
    for await (const o of store.list('', { recursive: true })) keys.push(o.path)
    expect(keys.some((k) => k.startsWith('blobs/'))).toBe(true)
    expect(keys.filter((k) => k.startsWith('artifacts/datasets/killed/'))).toEqual([])
    await expect(openDataset('killed', { prefix: PREFIX })).rejects.toMatchObject({ code: 'DATASET_NOT_FOUND' })

    const again = await ingest({ name: 'killed', source: SOURCE, format: 'jsonl', prefix: PREFIX })
    const local = await ingest({ name: 'killed', source: SOURCE, format: 'jsonl', prefix: join(root, 'local') })
    expect(again).toMatchObject({ version: 1, records: FILES * 200, reused: false, datasetHash: local.datasetHash })
    const v = await openDataset('killed', { prefix: PREFIX })
    expect(v.shards).toHaveLength(FILES)
  }, 180_000)
})
