/**
 * @module A tiny experiment for report tests: real executor steps that commit a finestore
 * dataset, write levanter JSONL metrics through `JsonlTracker`, commit a checkpoint artifact,
 * and write eval results and sample generations, the files a report reads.
 */
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { openStore, storeUrl } from '@marin/finestore'
import { JsonlTracker } from '@marin/levanter'
import { Experiment } from '../executor/experiment.js'
import { step, type Step } from '../executor/step.js'
import { versioned } from '../executor/versioned.js'

const LONG_DOC = `a long story begins here ${'and goes on '.repeat(40)}until the very end`

const DOCS = [
  'the cat sat on the mat',
  'the dog sat on the log',
  'the cat sat on the mat',
  'a bird flew over the house',
  LONG_DOC,
]

async function commit(
  prefix: string,
  name: string,
  files: Record<string, string>,
  metadata: Record<string, number | string | number[]>,
  lineage: string[] = [],
) {
  const store = await openStore({ url: storeUrl(prefix), fsync: false })
  try {
    const txn = await store.begin(name, { metadata, lineage })
    for (const [p, text] of Object.entries(files)) await txn.put(p, text)
    return (await txn.commit()).version
  } finally {
    store.close()
  }
}

/** The experiment `name`: ingest → dedup → train → eval, `trainSteps` logged training steps. */
/** With `failAfter`, training throws after logging that many steps (its dependents become DEP_FAILED). */
export function reportFixture(prefix: string, name = 'tiny-report', trainSteps = 20, failAfter?: number): Experiment {
  const ingest = step({
    name: 'ingest',
    config: { corpus: versioned('four-sentences') },
    fn: async (_c, ctx) => {
      const v = await commit(
        prefix,
        'datasets/raw',
        { 'part-0.jsonl': DOCS.map((text, id) => JSON.stringify({ id, text })).join('\n') },
        { documents: DOCS.length },
      )
      writeFileSync(join(ctx.outputPath, 'artifacts.json'), JSON.stringify([`datasets/raw@${v}`]))
      ctx.log.info({ documents: DOCS.length }, 'ingested')
    },
  })
  const dedup = step({
    name: 'dedup',
    config: { input: ingest.output(), mode: versioned('exact') },
    fn: async (_c, ctx) => {
      const kept = [...new Set(DOCS)]
      const v = await commit(
        prefix,
        'datasets/dedup',
        { 'part-0.jsonl': kept.join('\n') },
        {
          documentsIn: DOCS.length,
          documentsOut: kept.length,
          duplicatesRemoved: DOCS.length - kept.length,
          tokens: kept.join(' ').split(' ').length,
        },
        ['datasets/raw@1'],
      )
      writeFileSync(
        join(ctx.outputPath, 'artifacts.json'),
        JSON.stringify({ artifacts: [{ artifact: 'datasets/dedup', version: v }] }),
      )
      ctx.log.info({ kept: kept.length }, 'deduplicated')
    },
  })
  const train = step({
    name: 'train',
    config: {
      data: dedup.output(),
      lr: versioned(3e-3),
      steps: versioned(trainSteps),
      model: versioned({ seqLen: 16 }),
      trainer: versioned({ batchSize: 4 }),
    },
    fn: async (c, ctx) => {
      const tracker = new JsonlTracker(join(ctx.outputPath, 'run', 'metrics.jsonl'))
      for (let s = 1; s <= c.steps; s++) {
        const lr = c.lr * Math.min(1, s / 5)
        tracker.log(s, {
          'train/loss': 5.5 * Math.exp(-s / 8) + 1.2,
          'train/lr': lr,
          'throughput/tokens_per_sec': 1000 + 20 * s,
        })
        if (s % 5 === 0)
          tracker.log(s, { 'eval/loss': 5.5 * Math.exp(-s / 9) + 1.4, 'eval/bpb': 2 + 3 * Math.exp(-s / 9) })
        if (s === failAfter) throw new Error(`loss diverged at step ${s}`)
      }
      const v = await commit(
        prefix,
        'checkpoints/tiny',
        { [`step-${c.steps}/manifest.json`]: JSON.stringify({ step: c.steps }) },
        { steps: [c.steps] },
        ['datasets/dedup@1'],
      )
      // What trainStep records besides the references: the tensor backend levanter chose.
      writeFileSync(
        join(ctx.outputPath, 'artifacts.json'),
        JSON.stringify({
          artifacts: [{ artifact: 'checkpoints/tiny', version: v }],
          backend: { name: 'wasm', threads: 1, simd: true, gemm: 'native', native: { isa: 'avx512', threads: 2 } },
        }),
      )
      ctx.log.info({ steps: c.steps }, 'trained')
    },
  })
  const evaluate = step({
    name: 'eval',
    config: { model: train.output() },
    fn: async (_c, ctx) => {
      // The lm-eval-harness shape and marin's eval summary (results.json + an eval artifact with per-sample records).
      writeFileSync(
        join(ctx.outputPath, 'eval_results.json'),
        JSON.stringify({ results: { 'cloze<brown>': { accuracy: 0.25, logprob: -3.5 } } }),
      )
      writeFileSync(
        join(ctx.outputPath, 'samples.jsonl'),
        `${JSON.stringify({ prompt: 'the cat', completion: ' sat on the <mat>' })}\n`,
      )
      const records = [
        'the dog sat',
        'a bird flew',
        'the cat sat',
        'on the mat',
        'over the',
        'the log',
        'the house',
      ].map((context, index) => ({
        index,
        context,
        answer: 'on',
        generated: ' on the',
        prediction: 'on the',
        exactMatch: 0,
      }))
      const tasks = {
        'next-word': {
          kind: 'generation',
          samples: records.length,
          metrics: { exact_match: { value: 0.5, stderr: 0.1 } },
        },
        'held-out-text': {
          kind: 'perplexity',
          samples: 3,
          metrics: { bits_per_byte: { value: 3.125, stderr: 0.05 }, byte_perplexity: { value: 8.724, stderr: 0.3 } },
        },
      }
      const v = await commit(
        prefix,
        'eval/tiny',
        {
          'summary.json': JSON.stringify({ tasks }),
          'samples/next-word.jsonl': records.map((r) => JSON.stringify(r)).join('\n'),
        },
        { model: 'checkpoints/tiny@1' },
        ['checkpoints/tiny@1'],
      )
      writeFileSync(join(ctx.outputPath, 'results.json'), JSON.stringify({ ref: `eval/tiny@${v}`, tasks }))
      writeFileSync(join(ctx.outputPath, 'artifacts.json'), JSON.stringify({ artifacts: [`eval/tiny@${v}`] }))
      ctx.log.info('evaluated')
    },
  })
  return new Experiment({ name, steps: [evaluate] })
}

/** The experiment `name`: a chain of `n` trivial steps with long names (the widest step graph). */
export function chainFixture(n: number, name = 'long-chain'): Experiment {
  let prev: Step | undefined
  const steps: Step[] = []
  for (let i = 1; i <= n; i++) {
    const s: Step = step({
      name: `stage-${String(i).padStart(2, '0')}-with-a-rather-long-name`,
      config: { index: versioned(i), ...(prev ? { input: prev.output() } : {}) },
      fn: async (c, ctx) => ctx.log.info({ index: c.index }, 'done'),
    })
    steps.push(s)
    prev = s
  }
  return new Experiment({ name, steps })
}
