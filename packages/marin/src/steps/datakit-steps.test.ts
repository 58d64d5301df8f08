import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, expect, test } from 'vitest'
import { configureLogging } from '@marin/rigging'
import { Executor } from '../executor/executor.js'
import { Experiment } from '../executor/experiment.js'
import { dedupStep, ingestStep, tokenizeStep } from './datakit-steps.js'

let root: string
beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'marin-steps-'))
  configureLogging({ destination: { write: () => {} }, pretty: false })
})
afterAll(() => rmSync(root, { recursive: true, force: true }))

test('ingest -> dedup -> tokenize as executor steps; each hands its ' +
  'version on as a typed artifact reference', async () => {
  const src = join(root, 'corpus.txt')
  const paras = [
    'The committee met on Tuesday to discuss the harbor budget and the new ferry schedule.',
    'A quiet garden behind the library grows tomatoes, beans and a stubborn fig tree.',
    'Engineers measured the bridge cables twice before the winter storms arrived from the north.',
  ]
  writeFileSync(src, [paras[0], paras[1], paras[0], paras[2], paras[1]].join('\n\n'))
  const prefix = join(root, 'prefix')
  const ing = ingestStep({ name: 'toy', source: src, format: 'text', textUnit: 'paragraph' })
  const dd = dedupStep(ing, { name: 'toy-dedup' })
  const tok = tokenizeStep(dd, { name: 'toy-tokens', vocabSize: 300 })
  const exp = new Experiment({ name: 'data', steps: [tok] })
  const rec = await new Executor({ prefix, leaseTtlMs: 2000 }).run(exp)
  expect(
    rec.steps.map((s) => `${s.name}:${s.status}`),
    JSON.stringify(rec.steps.map((s) => s.error)),
  ).toEqual(['toy:SUCCESS', 'toy-dedup:SUCCESS', 'toy-tokens:SUCCESS'])
  const art = (i: number) => JSON.parse(readFileSync(join(prefix, rec.steps[i]!.nameHash, 'artifacts.json'), 'utf8'))
  expect(art(0)).toMatchObject({ artifacts: [{ kind: 'artifact', name: 'datasets/toy', version: 1 }], records: 5 })
  expect(art(1)).toMatchObject({
    artifacts: [{ kind: 'artifact', name: 'datasets/toy-dedup', version: 1 }],
    report: { documentsIn: 5, kept: 3 },
  })
  expect(art(2).artifacts[0]).toEqual({ kind: 'artifact', name: 'token-caches/toy-tokens', version: 1 })
  expect(art(2).documents).toBe(3)
  expect(art(2).tokens).toBeGreaterThan(3)
  expect(existsSync(join(prefix, 'store'))).toBe(true)
  const again = await new Executor({ prefix }).run(exp)
  expect(again.steps.map((s) => s.status)).toEqual(['SKIPPED', 'SKIPPED', 'SKIPPED'])
}, 60_000)

test('dedupStep with paragraphs: true removes a paragraph two documents share and reports it', async () => {
  const dir = join(root, 'para')
  mkdirSync(dir, { recursive: true })
  writeFileSync(join(dir, 'a.txt'), 'Harbor news from the north.\n\nAll rights reserved by the gazette.')
  writeFileSync(join(dir, 'b.txt'), 'A recipe for fig jam with lemon.\n\nAll rights reserved by the gazette.')
  const prefix = join(root, 'prefix-para')
  const ing = ingestStep({ name: 'pages', source: join(dir, '*.txt'), format: 'text', textUnit: 'file' })
  const dd = dedupStep(ing, { name: 'pages-dedup', paragraphs: true })
  const rec = await new Executor({ prefix, leaseTtlMs: 2000 }).run(new Experiment({ name: 'para', steps: [dd] }))
  expect(
    rec.steps.map((s) => s.status),
    JSON.stringify(rec.steps.map((s) => s.error)),
  ).toEqual(['SUCCESS', 'SUCCESS'])
  const art = JSON.parse(readFileSync(join(prefix, rec.steps[1]!.nameHash, 'artifacts.json'), 'utf8'))
  expect(art.report.kept).toBe(2)
  expect(art.report.levels.find((l: { level: string }) => l.level === 'paragraph')).toMatchObject({ of: 4, removed: 1 })
}, 60_000)
