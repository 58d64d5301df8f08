/**
 * Paragraph- and line-level dedup on a small corpus in a real store: what each level removes,
 * counted per level, and documents left empty dropped.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { ZephyrContext } from '@marin/zephyr'
import { afterAll, describe, expect, test } from 'vitest'
import { Dataset } from '../dataset/from-datakit.js'
import { ingest } from '../dataset/ingest.js'
import { dedup } from './dedup.js'

const root = mkdtempSync(join(tmpdir(), 'datakit-dedup-'))
const prefix = join(root, 'marin')
const context = new ZephyrContext({ inProcess: true, progress: 'off' })
afterAll(async () => {
  await context.close()
  rmSync(root, { recursive: true, force: true })
})

const docs = [
  'Rivers carve valleys over millions of years.\n\nShared boilerplate paragraph about cookies.\n\nSilt settles.',
  'The orchestra tuned before the overture began.\n\nshared   BOILERPLATE paragraph about cookies.\n\nApplause.',
  'Shared boilerplate paragraph about cookies.',
  'A line of its own\nSubscribe to our newsletter\nAnother line here',
  'Subscribe to our newsletter\nThe last line',
]

async function texts(name: string): Promise<string[]> {
  return (await context.execute(Dataset.fromDatakit(name, { prefix }))).results.map((r) => r.text)
}

describe('paragraph and line dedup', () => {
  mkdirSync(join(root, 'src'), { recursive: true })
  writeFileSync(join(root, 'src', 'pages.jsonl'), `${docs.map((text) => JSON.stringify({ text })).join('\n')}\n`)

  test('a paragraph seen earlier is removed; a document left empty is dropped; counts per level', async () => {
    await ingest({ name: 'pages', source: join(root, 'src', 'pages.jsonl'), format: 'jsonl', prefix })
    const { report } = await dedup('pages', { prefix, context, paragraphs: true, output: 'pages-para' })
    expect(await texts('pages-para')).toEqual([
      docs[0],
      'The orchestra tuned before the overture began.\n\nApplause.',
      docs[3],
      docs[4],
    ])
    expect(report.kept).toBe(4)
    expect(report.levels).toEqual([
      { level: 'exact', unit: 'documents', of: 5, removed: 0, bytesRemoved: 0, documentsEmptied: 0 },
      { level: 'fuzzy', unit: 'documents', of: 5, removed: 0, bytesRemoved: 0, documentsEmptied: 0 },
      { level: 'paragraph', unit: 'paragraphs', of: 9, removed: 2, bytesRemoved: 88, documentsEmptied: 1 },
    ])
  })

  test('line dedup removes a line seen earlier, after the paragraph level', async () => {
    const { report } = await dedup('pages', {
      prefix,
      context,
      exact: false,
      fuzzy: false,
      paragraphs: true,
      lines: true,
      output: 'pages-lines',
    })
    expect(await texts('pages-lines')).toEqual([
      docs[0],
      'The orchestra tuned before the overture began.\n\nApplause.',
      docs[3],
      'The last line',
    ])
    expect(report.levels.map((l) => [l.level, l.of, l.removed, l.bytesRemoved, l.documentsEmptied])).toEqual([
      ['paragraph', 9, 2, 88, 1],
      ['line', 10, 1, 27, 0],
    ])
  })

  test('every level off is a bad argument', async () => {
    await expect(dedup('pages', { prefix, context, exact: false, fuzzy: false })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: expect.stringContaining('paragraphs'),
    })
  })
})
