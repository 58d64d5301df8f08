/**
 * Training runs that the webgpu tests repeat on another backend: `tsx backend-train.ts <spec-json>`
 * (with `LEVANTER_BACKEND` set) prints `{"losses": [...]}` as its last line. The models are the
 * quickstart's tiny GPT-2 (its vocabulary, width and depth; a shorter context and batch, so that
 * SwiftShader runs them in seconds) and a Llama of the same size.
 */
import { Dataset } from '../data/dataset.js'
import { createModel } from '../models/lm.js'
import type { ModelConfigInput } from '../models/config.js'
import { Pipeline } from '../pipeline.js'
import { MemoryTracker } from '../trackers.js'
import { Trainer } from '../trainer.js'

export const TINY_MODELS: Record<'gpt2' | 'llama', ModelConfigInput> = {
  gpt2: { type: 'gpt2', vocabSize: 384, seqLen: 16, dModel: 32, nLayers: 1, nHeads: 2 },
  llama: { type: 'llama', vocabSize: 384, seqLen: 16, dModel: 32, nLayers: 1, nHeads: 2 },
}

/** What one run trains: which model, how many steps (the schedule's length), where checkpoints go (every 5 steps;
 * resumed from when present), and the step after which the run stops early. */
export type TrainSpec = {
  readonly model: 'gpt2' | 'llama'
  readonly maxSteps: number
  readonly store?: string
  readonly stopAfter?: number
}

class Stop extends Error {}

// A learnable stream over the whole vocabulary: a repeating pattern with a little noise.
const TOKENS = Array.from({ length: 20_000 }, (_, i) => ((i * 37) % 383) + (i % 89 === 0 ? 1 : 0))

/** Train per `spec` on the current backend; the losses of the steps this run took. */
export async function trainSpec(spec: TrainSpec): Promise<number[]> {
  const losses: number[] = []
  const hook = {
    every: 1,
    run: ({ step, loss }: { step: number; loss: number }) => {
      losses.push(loss)
      if (step === spec.stopAfter) throw new Stop()
    },
  }
  const trainer = new Trainer(
    {
      learningRate: 3e-3,
      batchSize: 2,
      seed: 3,
      schedule: { warmupSteps: 2 },
      runName: `tiny-${spec.model}`,
      ...(spec.store ? { checkpointStore: spec.store, checkpointEvery: 5 } : {}),
    },
    { trackers: [new MemoryTracker()], hooks: [hook] },
  )
  const model = createModel(TINY_MODELS[spec.model], 1)
  try {
    await new Pipeline({
      dataset: Dataset.fromTokens(TOKENS, { evalFraction: 0 }),
      model,
      trainer,
      maxSteps: spec.maxSteps,
    }).run()
  } catch (err) {
    if (!(err instanceof Stop)) throw err
  } finally {
    model.dispose()
  }
  return losses
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const specs = JSON.parse(process.argv[2]!) as TrainSpec[]
  const out: number[][] = []
  for (const s of specs) out.push(await trainSpec(s))
  process.stdout.write(`${JSON.stringify({ losses: out })}\n`)
}
