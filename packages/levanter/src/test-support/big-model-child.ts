/**
 * A process for the big-model test: builds `BIG_MODEL` in this one process (its weights alone fit),
 * evaluates its loss on the first training batch (a forward pass fits too), then trains it here (no
 * mesh) for one step, and prints one JSON line: `{ initialLoss, ok: true, loss }`, or
 * `{ initialLoss, ok: false, code, message }` with the error the run failed with.
 */
import { Dataset } from '../data/dataset.js'
import { evalLossOf } from '../engine.js'
import { initBackend } from '../backend.js'
import { isLevanterError } from '../errors.js'
import type { Gpt2ConfigInput } from '../models/config.js'
import { Gpt2LM } from '../models/lm.js'
import { Pipeline } from '../pipeline.js'
import { MemoryTracker } from '../trackers.js'
import { Trainer } from '../trainer.js'

/** The heap limit the big-model test holds its processes to (test-support/held-heap.ts), in MiB. */
export const BIG_MODEL_HEAP_MIB = 64

/**
 * 10.7 M parameters: its parameters and their gradients alone (8 bytes a parameter, 81 MiB)
 * overflow a process whose wasm heap is held to {@link BIG_MODEL_HEAP_MIB} MiB, whatever the batch,
 * as a model of 554 M parameters overflows the whole 4 GiB heap; its weights alone (41 MiB) fit, and
 * so does a forward pass. A small vocabulary and context keep a step's compute small.
 */
export const BIG_MODEL: Gpt2ConfigInput = {
  type: 'gpt2',
  vocabSize: 64,
  seqLen: 8,
  dModel: 384,
  nLayers: 6,
  nHeads: 16,
}
export const BIG_TOKENS = Array.from({ length: 400 }, (_, i) => (i * 7 + (i >> 3)) % 64)

/** The batch of step `s` both the one-process attempt and the sharded runs train on. */
export const bigBatch = (dataset: Dataset, s: number) => dataset.trainBatch(s, 2, BIG_MODEL.seqLen!, 1)

async function main(): Promise<void> {
  await initBackend()
  const dataset = Dataset.fromTokens(BIG_TOKENS, { evalFraction: 0 })
  const model = new Gpt2LM(BIG_MODEL, 0)
  const initialLoss = await evalLossOf(model, await bigBatch(dataset, 0))
  const trainer = new Trainer(
    { learningRate: 1e-4, batchSize: 2, seed: 1, schedule: { decay: 'constant' } },
    { trackers: [new MemoryTracker()] },
  )
  const line = (o: object) => process.stdout.write(JSON.stringify({ initialLoss, ...o }) + '\n')
  try {
    const r = await new Pipeline({ dataset, model, trainer, maxSteps: 1 }).run()
    line({ ok: true, loss: r.losses[0] })
  } catch (err) {
    line({ ok: false, code: isLevanterError(err) ? err.code : undefined, message: (err as Error).message })
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await main()
