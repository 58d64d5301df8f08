/**
 * datakit's store on a prefix that is a storage URL (`memory://` here, standing in for an object store: nothing of
 * the store is on local disk) against the same calls on a local prefix: the same shards, byte for byte, and the
 * local layout of a folder prefix unchanged.
 */
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { openStore, storeUrl } from '@marin/finestore'
import { localMarinPrefix, openStorage } from '@marin/rigging'
import { afterAll, describe, expect, test } from 'vitest'
import { dedup } from './dedup/dedup.js'
import { fromDatakit } from './dataset/from-datakit.js'
import { ingest } from './dataset/ingest.js'
import { openDataset } from './dataset/open-dataset.js'
import { DatakitError } from './errors.js'
import { isLocalPrefix, prefixLocalDir, prefixLocation, resolvePrefix, workDir } from './store.js'

const root = mkdtempSync(join(tmpdir(), 'datakit-store-'))
const local = join(root, 'marin')
const remote = `memory://datakit-store-${process.pid}-${Date.now()}`
afterAll(() => {
  rmSync(root, { recursive: true, force: true })
  rmSync(prefixLocalDir(remote), { recursive: true, force: true })
})

/** Twelve documents of their own (distinct words, so no two are near copies) and one exact copy. */
const words = (i: number): string =>
  Array.from({ length: 40 }, (_, k) => `w${((i * 7919 + k * 104729) % 100_003).toString(36)}`).join(' ')
const docs = [
  ...Array.from({ length: 12 }, (_, i) => `document ${i}: ${words(i)}`),
  'a copy of this text appears twice in the corpus',
  'a copy of this text appears twice in the corpus',
]
const source = join(root, 'docs.jsonl')
writeFileSync(source, docs.map((text) => JSON.stringify({ text })).join('\n') + '\n')

/** Each file of a version with its blob hash: equal hashes are equal bytes. */
async function filesOf(prefix: string, artifact: string, version: number): Promise<Record<string, string>> {
  const store = await openStore({ url: storeUrl(prefixLocation(prefix)) })
  try {
    const view = await store.open(`${artifact}@${version}`)
    return Object.fromEntries(view.files().map((f) => [f, view.entry(f).blob]))
  } finally {
    store.close()
  }
}

describe('the store under a storage URL prefix', () => {
  test('ingest and dedup on memory:// make the shards a local folder gets; the store is all in storage', async () => {
    const onDisk = await ingest({ name: 'docs', source, format: 'jsonl', prefix: local })
    const inStorage = await ingest({ name: 'docs', source, format: 'jsonl', prefix: remote })
    expect(inStorage).toMatchObject({ version: onDisk.version, records: 14, datasetHash: onDisk.datasetHash })
    expect(await filesOf(remote, 'datasets/docs', inStorage.version)).toEqual(
      await filesOf(local, 'datasets/docs', onDisk.version),
    )
    const d1 = await dedup('docs', { prefix: local, output: 'docs-dedup' })
    const d2 = await dedup('docs', { prefix: remote, output: 'docs-dedup' })
    expect(d2.report.kept).toBe(13)
    expect(d2.report).toEqual(d1.report)
    expect(await filesOf(remote, 'datasets/docs-dedup', d2.version)).toEqual(
      await filesOf(local, 'datasets/docs-dedup', d1.version),
    )
    // The manifests and blobs are in the prefix's storage, none on this machine's disk.
    const storage = await openStorage(storeUrl(remote))
    const keys: string[] = []
    for await (const o of storage.list('', { recursive: true })) keys.push(o.path)
    expect(keys).toContain(`artifacts/datasets/docs-dedup/versions/${d2.version}.json`)
    expect(keys.some((k) => k.startsWith('blobs/sha256/'))).toBe(true)
    expect(existsSync(join(prefixLocalDir(prefixLocation(remote)), 'store'))).toBe(false)
    // A second call finds the same build in storage and reuses it.
    expect((await ingest({ name: 'docs', source, format: 'jsonl', prefix: remote })).reused).toBe(true)

    // Reading: shards are copied to this machine's folder of the prefix, checked against their hashes.
    const v = await openDataset('docs-dedup', { prefix: remote })
    expect(v.shards.length).toBeGreaterThan(0)
    for (const s of v.shards) expect(s.startsWith(`file://${resolvePrefix(remote)}/datakit-cache/`)).toBe(true)
  }, 120_000)

  test('a local prefix keeps its folder for everything', () => {
    expect(resolvePrefix(local)).toBe(localMarinPrefix({ prefix: local }))
    expect(resolvePrefix(`file://${local}`)).toBe(local)
    expect(isLocalPrefix(local)).toBe(true)
    expect(isLocalPrefix(remote)).toBe(false)
    expect(isLocalPrefix('s3://bucket/marin')).toBe(false)
    expect(workDir({ prefix: local }, 'ingest', 'docs', 'abc')).toBe(
      join(local, 'datakit-work', 'ingest', 'docs', 'abc'),
    )
    expect(readdirSync(local).sort()).toEqual(['datakit-cache', 'datakit-work', 'store'])
  })

  test("an object store's local folder is one per prefix, on this machine", () => {
    expect(resolvePrefix('s3://bucket/a')).toBe(prefixLocalDir('s3://bucket/a'))
    expect(resolvePrefix('s3://bucket/a/')).toBe(resolvePrefix('s3://bucket/a'))
    expect(resolvePrefix('s3://bucket/a')).not.toBe(resolvePrefix('s3://bucket/b'))
    expect(resolvePrefix('s3://bucket/a').startsWith(tmpdir())).toBe(true)
  })

  test('work folders stay inside the prefix', () => {
    for (const bad of [['ingest', '../../../etc'], ['/abs'], ['..']])
      expect(() => workDir({ prefix: local }, ...bad)).toThrow(/leaves .*datakit-work; name datasets without/)
    expect(() => workDir({ prefix: local }, '..')).toThrow(DatakitError)
  })

  test('fromDatakit on an object store prefix says why it cannot, and what to use', () => {
    expect(() => fromDatakit('docs', { prefix: 's3://bucket/marin' })).toThrow(
      'datasets/docs: the prefix s3://bucket/marin is not a local folder, and fromDatakit and sample read the ' +
        'manifest synchronously from one; use openDataset, or a local prefix',
    )
  })
})
