import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Dataset } from '@marin/zephyr'
import { afterAll, expect, test } from 'vitest'
import { ingest } from './ingest.js'
import type { DatakitRecord } from './record.js'
import { sample, split } from './sample.js'
import { defaultContext } from '../zephyr-context.js'

const root = mkdtempSync(join(tmpdir(), 'datakit-sample-'))
const prefix = join(root, 'marin')
afterAll(() => rmSync(root, { recursive: true, force: true }))

async function ids(ds: Dataset<DatakitRecord>): Promise<string[]> {
  const { results } = await defaultContext().execute(ds.map((r) => r.id))
  return results
}

async function corpus(name: string, n: number): Promise<void> {
  mkdirSync(join(root, name), { recursive: true })
  for (let f = 0; f < 2; f++) {
    const lines = Array.from({ length: n / 2 }, (_, i) => JSON.stringify({ text: `document ${f * (n / 2) + i}` }))
    writeFileSync(join(root, name, `p${f}.jsonl`), `${lines.join('\n')}\n`)
  }
  await ingest({ name, source: join(root, name, '*.jsonl'), format: 'jsonl', prefix })
}

test('sample(n) keeps exactly n, the same ones for the same seed', async () => {
  await corpus('s', 400)
  const a = await ids(sample('s', { n: 50, seed: 1, prefix }))
  expect(a).toHaveLength(50)
  expect(new Set(a).size).toBe(50)
  expect(await ids(sample('s', { n: 50, seed: 1, prefix }))).toEqual(a)
  expect(await ids(sample('s', { n: 50, seed: 2, prefix }))).not.toEqual(a)
  expect(await ids(sample('s', { n: 1000, seed: 1, prefix }))).toHaveLength(400)
  const f = await ids(sample('s', { fraction: 0.25, seed: 1, prefix }))
  expect(f.length).toBeGreaterThan(60)
  expect(f.length).toBeLessThan(140)
  expect(() => sample('s', { prefix })).toThrow(/exactly one of n .* or fraction/)
})

test('a document never moves between splits when the dataset grows', async () => {
  await corpus('g', 200)
  const small = split('g', { validationFraction: 0.2, seed: 3, prefix })
  const [tr, va] = [await ids(small.train), await ids(small.validation)]
  expect(tr.length + va.length).toBe(200)
  expect(va.filter((x) => tr.includes(x))).toEqual([])
  await corpus('g', 400) // a new version of g with 200 more documents
  const big = split('g', { validationFraction: 0.2, seed: 3, prefix })
  const [tr2, va2] = [new Set(await ids(big.train)), new Set(await ids(big.validation))]
  expect(tr2.size + va2.size).toBe(400)
  expect(tr.every((x) => tr2.has(x))).toBe(true)
  expect(va.every((x) => va2.has(x))).toBe(true)
  expect(() => split('g', { validationFraction: 1, prefix })).toThrow(/validationFraction must be in \(0, 1\)/)
})
