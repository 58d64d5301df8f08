/**
 * A training process for the resume test: trains a tiny GPT-2 with a checkpoint every step,
 * appends `{step, loss}` lines to argv[3], and with argv[4] = k stops at step k and waits to be killed.
 */
import fs from 'node:fs'
import { Dataset } from '../data/dataset.js'
import { Gpt2LM } from '../models/lm.js'
import { Pipeline } from '../pipeline.js'
import { MemoryTracker } from '../trackers.js'
import { Trainer } from '../trainer.js'

export const CHILD_MODEL = { vocabSize: 11, seqLen: 8, dModel: 16, nLayers: 1, nHeads: 2 }
export const CHILD_TOKENS = Array.from({ length: 1000 }, (_, i) => ((i * 7) % 10) + (i % 31 === 0 ? 1 : 0))
export const childTrainer = (
  store: string | undefined,
  extra: { hooks?: { every: number; run: (i: { step: number; loss: number }) => void | Promise<void> }[] } = {},
) =>
  new Trainer(
    {
      learningRate: 1e-2,
      batchSize: 2,
      seed: 5,
      schedule: { warmupSteps: 2 },
      ...(store ? { checkpointStore: store, checkpointEvery: 1, keepLatest: 2, keepEvery: 3 } : {}),
      runName: 'resume',
    },
    { trackers: [new MemoryTracker()], hooks: extra.hooks ?? [] },
  )

async function main(): Promise<void> {
  const [store, out, stopAt] = process.argv.slice(2) as [string, string, string | undefined]
  const trainer = childTrainer(store, {
    hooks: [
      {
        every: 1,
        run: async ({ step, loss }) => {
          fs.appendFileSync(out, JSON.stringify({ step, loss }) + '\n')
          if (stopAt && step === Number(stopAt)) {
            fs.appendFileSync(out, JSON.stringify({ waiting: step }) + '\n')
            await new Promise(() => setInterval(() => {}, 1000)) // hold here until killed
          }
        },
      },
    ],
  })
  await new Pipeline({
    dataset: Dataset.fromTokens(CHILD_TOKENS, { evalFraction: 0 }),
    model: new Gpt2LM(CHILD_MODEL, 1),
    trainer,
    maxSteps: 8,
  }).run()
}

if (import.meta.url === `file://${process.argv[1]}`) await main()
