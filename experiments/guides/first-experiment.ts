/**
 * @module The first-experiment guide (docs/guides/first-experiment.md): Brown text → a dataset → BPE tokens →
 * a small GPT-2, four executor steps. `GUIDE_SCALE=tiny` makes it small enough for a test.
 */
import { mkdir, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { readBrown } from '@marin/datakit'
import { Experiment, ingestStep, runIfMain, step, tokenizeStep, trainStep, versioned } from '@marin/marin'

const tiny = process.env.GUIDE_SCALE === 'tiny'

// 1. A step of your own: its function writes files into `outputPath`; `versioned` fields make its version.
export const text = step({
  name: 'guide-text',
  description: 'Brown corpus files as JSONL, one document per line',
  config: { documents: versioned(tiny ? 8 : 200) },
  fn: async (c, { outputPath, log }) => {
    const docs = readBrown({ part: 'train', files: c.documents })
    await mkdir(outputPath, { recursive: true })
    const lines = docs.map((d) => JSON.stringify({ id: d.id, text: d.text }))
    await writeFile(join(outputPath, 'docs.jsonl'), `${lines.join('\n')}\n`)
    log.info({ documents: docs.length }, 'wrote the documents')
  },
})

// 2. Steps for the usual work, each taking the one before: `datasets/guide`, then a tokenizer and token cache.
export const dataset = ingestStep({ name: 'guide', source: text.output('docs.jsonl'), format: 'jsonl' })
export const tokens = tokenizeStep(dataset, { name: 'guide-bpe', vocabSize: 320 })

// 3. Training: the model is committed to the store as `models/guide-gpt@<version>`.
export const train = trainStep(tokens, {
  name: 'guide-gpt',
  model: { type: 'gpt2', vocabSize: 320, seqLen: 64, dModel: tiny ? 16 : 64, nLayers: 1, nHeads: 2 },
  trainer: { batchSize: 4, learningRate: 1e-2, logEvery: 5, evalEvery: 0, checkpointEvery: 0 },
  maxSteps: tiny ? 6 : 300,
})

const experiment = new Experiment({ name: 'first-experiment', steps: [train] })
export default experiment

// Run as a program (`node --import tsx experiments/guides/first-experiment.ts`), it takes `marin run`'s flags.
await runIfMain(import.meta.url, experiment)
