import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { openStore, storeUrl } from '@marin/finestore'
import { configureLogging } from '@marin/rigging'
import { Executor } from '../executor/executor.js'
import { Experiment } from '../executor/experiment.js'
import { topoSort } from '../executor/graph.js'
import type { Step } from '../executor/step.js'
import { computeVersions } from '../executor/version.js'
import { ingestStep, tokenizeStep } from './datakit-steps.js'
import { trainStep, type TrainMixtureInput, type TrainSummary } from './train-step.js'

let root: string
let prefix: string
let web: Step
let wiki: Step
let wikiOwnBpe: Step
const model = { type: 'gpt2', vocabSize: 300, seqLen: 16, dModel: 16, nLayers: 1, nHeads: 2 } as const
// blockSize = batchSize: each batch's composition is the systematic sample of its stage's weights, exactly
const trainer = { batchSize: 4, evalEvery: 4, evalBatches: 1, logEvery: 2, checkpointEvery: 0 }

function corpus(file: string, words: readonly string[]): string {
  const path = join(root, file)
  const paragraphs = Array.from(
    { length: 40 },
    (_, i) => Array.from({ length: 14 }, (_, j) => words[(i * 7 + j * 3) % words.length]).join(' ') + ` ${i}.`,
  )
  writeFileSync(path, paragraphs.join('\n\n'))
  return path
}

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'marin-train-mixture-'))
  prefix = join(root, 'prefix')
  configureLogging({ destination: { write: () => {} }, pretty: false })
  const cook = ['the', 'onion', 'simmers', 'in', 'butter', 'with', 'garlic', 'salt', 'pepper', 'and', 'thyme', 'slowly']
  const river = ['a', 'river', 'flows', 'past', 'the', 'mill', 'under', 'stone', 'bridges', 'toward', 'delta', 'sea']
  const webText = ingestStep({ name: 'web', source: corpus('web.txt', cook), format: 'text', textUnit: 'paragraph' })
  const wikiText = ingestStep({
    name: 'wiki',
    source: corpus('wiki.txt', river),
    format: 'text',
    textUnit: 'paragraph',
  })
  web = tokenizeStep(webText, { name: 'web-tokens', vocabSize: 300 })
  wiki = tokenizeStep(wikiText, { name: 'wiki-tokens', tokenizer: web })
  wikiOwnBpe = tokenizeStep(wikiText, { name: 'wiki-own-tokens', vocabSize: 300 })
})
afterAll(() => rmSync(root, { recursive: true, force: true }))

const mixture = (weights: TrainMixtureInput['weights'], sources = { web, wiki }): TrainMixtureInput => ({
  mixture: sources,
  weights,
  blockSize: 4,
})
const stages = [{ untilStep: 2, weights: { web: 1, wiki: 3 } }, { weights: { web: 2, wiki: 2 } }]

async function run(train: Step) {
  const rec = await new Executor({ prefix, leaseTtlMs: 2000 }).run(new Experiment({ name: 'mix', steps: [train] }))
  return { rec, last: rec.steps.at(-1)! }
}

describe('trainStep on a mixture of token caches', () => {
  test('trains with the stage weights; tokens and eval loss per source are in its outputs and metrics', async () => {
    const train = trainStep(mixture(stages), { name: 'mix-lm', model, trainer, maxSteps: 4, evalFraction: 0.2 })
    const { rec, last } = await run(train)
    expect(
      rec.steps.map((s) => `${s.name}:${s.status}`),
      JSON.stringify(rec.steps.map((s) => s.error)),
    ).toEqual(['web:SUCCESS', 'web-tokens:SUCCESS', 'wiki:SUCCESS', 'wiki-tokens:SUCCESS', 'mix-lm:SUCCESS'])
    const out = join(prefix, last.nameHash)
    const arts = JSON.parse(readFileSync(join(out, 'artifacts.json'), 'utf8')) as TrainSummary & {
      artifacts: { name: string; version: number }[]
    }
    const m = arts.mixture!
    expect(Object.keys(m.sources)).toEqual(['web', 'wiki'])
    expect(m.sources.web).toMatch(/^token-caches\/web-tokens@\d+$/)
    expect(m.sources.wiki).toMatch(/^token-caches\/wiki-tokens@\d+$/)
    expect(m.stages).toEqual([
      { untilStep: 2, weights: { web: 0.25, wiki: 0.75 } },
      { untilStep: null, weights: { web: 0.5, wiki: 0.5 } },
    ])
    // 4 rows a step: steps 0-1 take 1 web row and 3 wiki rows, steps 2-3 take 2 and 2; 16 tokens a row
    expect(m.tokensPerSource).toEqual({ web: (2 * 1 + 2 * 2) * 16, wiki: (2 * 3 + 2 * 2) * 16 })
    expect(m.tokensPerSource.web! + m.tokensPerSource.wiki!).toBe(arts.tokensTrained)
    for (const n of ['web', 'wiki']) {
      expect(m.evalLossPerSource[n]).toBeGreaterThan(0)
      expect(m.evalBpbPerSource[n]).toBeGreaterThan(0)
    }
    // the two sources are different text: their losses differ
    expect(m.evalLossPerSource.web).not.toBe(m.evalLossPerSource.wiki)
    // metrics.jsonl has the same per-source figures, step by step
    const rows = readFileSync(join(out, 'metrics.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, number>)
    const at = (key: string) => rows.findLast((r) => r[key] !== undefined)?.[key]
    expect(at('data/web/tokens')).toBe(m.tokensPerSource.web)
    expect(at('data/wiki/tokens')).toBe(m.tokensPerSource.wiki)
    expect(at('eval/web/loss')).toBe(m.evalLossPerSource.web)
    // the model artifact lists both caches as its lineage and carries their shared tokenizer
    const store = await openStore({ url: storeUrl(prefix) })
    try {
      const view = await store.open(`${arts.artifacts[0]!.name}@${arts.artifacts[0]!.version}`)
      expect(view.manifest.lineage.map((l) => `${l.artifact}@${l.version}`)).toEqual([m.sources.web, m.sources.wiki])
      expect(view.manifest.metadata.mixture).toEqual(m)
      const webCache = await store.open(m.sources.web!)
      const wikiCache = await store.open(m.sources.wiki!)
      expect(view.entry('tokenizer.json').blob).toBe(webCache.entry('tokenizer.json').blob)
      expect(wikiCache.entry('tokenizer.json').blob).toBe(webCache.entry('tokenizer.json').blob)
    } finally {
      store.close()
    }
  }, 60_000)

  test('the mixture is part of the version: a changed weight or source is a new version, named by its field', () => {
    const version = (data: TrainMixtureInput | Step) => {
      const s = trainStep(data, { name: 'mix-lm', model, trainer, maxSteps: 4 })
      return computeVersions(topoSort([s])).get(s)!
    }
    const a = version(mixture(stages))
    const again = version(mixture(stages))
    const reweighted = version(mixture([stages[0]!, { weights: { web: 3, wiki: 1 } }]))
    const resourced = version(mixture(stages, { web, wiki: wikiOwnBpe }))
    expect(again.nameHash).toBe(a.nameHash)
    expect(reweighted.nameHash).not.toBe(a.nameHash)
    expect(resourced.nameHash).not.toBe(a.nameHash)
    const changed = Object.keys(a.fields).filter((k) => a.fields[k] !== reweighted.fields[k])
    expect(changed).toEqual(['mixture.weights'])
    expect(Object.keys(resourced.fields).filter((k) => a.fields[k] !== resourced.fields[k])).toEqual([
      'mixture.sources.wiki',
    ])
    // a plain single-cache step has no mixture field (its version is what it was)
    expect(Object.keys(version(web).fields).some((k) => k.startsWith('mixture'))).toBe(false)
  })

  test('bad mixtures are refused when the step is defined, each naming the field', () => {
    const define = (data: TrainMixtureInput) => () => trainStep(data, { name: 'bad', model, trainer, maxSteps: 4 })
    expect(define(mixture({ web: 1, wikii: 1 }))).toThrow(/data\.weights names "wikii", which is not a source/)
    expect(define(mixture({ web: -1, wiki: 1 }))).toThrow(/data\.weights\.web is -1; a weight is a finite number/)
    expect(define(mixture({ web: 0, wiki: 0 }))).toThrow(/data\.weights gives every source weight 0/)
    expect(
      define(
        mixture([
          { untilStep: 5, weights: { web: 1 } },
          { untilStep: 3, weights: { wiki: 1 } },
          { weights: { web: 1 } },
        ]),
      ),
    ).toThrow(/data\.weights\[1\]\.untilStep is 3; it must be an integer above 5/)
    expect(define(mixture([]))).toThrow(/data\.weights is an empty list/)
    expect(define({ mixture: {}, weights: {} })).toThrow(/data\.mixture has no sources/)
    expect(define({ mixture: { web, wiki }, weights: { web: 1 }, repeat: { wik: true } })).toThrow(
      /data\.repeat names "wik"/,
    )
    expect(define({ weights: { web: 1 } } as unknown as TrainMixtureInput)).toThrow(/its data is neither a step/)
    expect(() => tokenizeStep(web, { name: 'x' })).toThrow(/give vocabSize .* or tokenizer .*, not neither/)
  })

  test('sources tokenized with different tokenizers are refused, naming both caches', async () => {
    const train = trainStep(mixture({ web: 1, wiki: 1 }, { web, wiki: wikiOwnBpe }), {
      name: 'mix-bad-vocab',
      model,
      trainer,
      maxSteps: 2,
    })
    const { last } = await run(train)
    expect(last.status).toBe('FAILED')
    expect(last.error).toMatch(
      /data\.mixture\.wiki \(token-caches\/wiki-own-tokens@\d+\) was tokenized with another tokenizer than data\./,
    )
  }, 60_000)

  test('a source that runs out is an error unless the mixture says it may repeat', async () => {
    const opts = { model, trainer: { ...trainer, evalEvery: 0 }, maxSteps: 40, evalFraction: 0.2 }
    const { last } = await run(trainStep(mixture({ web: 1, wiki: 9 }), { name: 'mix-out', ...opts }))
    expect(last.status).toBe('FAILED')
    expect(last.error).toMatch(/source "wiki" ran out at step \d+/)
    const again = await run(
      trainStep({ ...mixture({ web: 1, wiki: 9 }), repeat: { wiki: true } }, { name: 'mix-repeat', ...opts }),
    )
    expect(again.last.status, again.last.error).toBe('SUCCESS')
  }, 60_000)
})
