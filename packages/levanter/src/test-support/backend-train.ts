/**
 * Training runs that the webgpu tests repeat on another backend: `tsx backend-train.ts <spec-json>`
 * (with `LEVANTER_BACKEND` set) prints `{"losses": [...]}` as its last line. The models are a GPT-2
 * and a Llama (and for generation a Qwen3 and a Mixtral) with every matrix dimension 16: vocabulary,
 * context, width, head, MLP. On a software adapter compiling the matrix-product shaders is most of a
 * test's time, and with one size everywhere (a batch of one sequence) a process compiles three
 * products (plain, and with either side transposed) instead of a dozen, in seconds.
 */
import { Dataset } from '../data/dataset.js'
import { createModel } from '../models/lm.js'
import type { ModelConfigInput } from '../models/config.js'
import { Pipeline } from '../pipeline.js'
import { MemoryTracker } from '../trackers.js'
import { Trainer } from '../trainer.js'

const DIMS = { vocabSize: 16, seqLen: 16, dModel: 16, nLayers: 1, nHeads: 1 } as const

export const TINY_MODELS: Record<'gpt2' | 'llama' | 'qwen3' | 'mixtral', ModelConfigInput> = {
  gpt2: { type: 'gpt2', ...DIMS, mlpRatio: 1 },
  llama: { type: 'llama', ...DIMS, intermediateSize: 16 },
  qwen3: { type: 'qwen3', ...DIMS, intermediateSize: 16 },
  mixtral: { type: 'mixtral', ...DIMS, intermediateSize: 16, nExperts: 4, topK: 2 },
}

/** The batch the tiny models train on: one sequence of their full context. */
export const TINY_BATCH = { batchSize: 1, seqLen: DIMS.seqLen } as const

/** A learnable stream over the tiny models' vocabulary: a repeating pattern with a little noise. */
export const TINY_TOKENS = Array.from({ length: 4000 }, (_, i) => ((i * 7) % 15) + (i % 89 === 0 ? 1 : 0))

/** What one run trains: which model, how many steps (the schedule's length), where checkpoints go (every 5 steps;
 * resumed from when present), and the step after which the run stops early. */
export type TrainSpec = {
  readonly model: 'gpt2' | 'llama'
  readonly maxSteps: number
  readonly store?: string
  readonly stopAfter?: number
}

class Stop extends Error {}

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
      batchSize: TINY_BATCH.batchSize,
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
      dataset: Dataset.fromTokens(TINY_TOKENS, { evalFraction: 0 }),
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
