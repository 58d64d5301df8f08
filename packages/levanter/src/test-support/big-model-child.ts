/**
 * A process for the big-model test: trains `BIG_MODEL` in this one process (no mesh) for one
 * step and prints one JSON line: `{ ok: true, loss }`, or `{ ok: false, code, message }` with the
 * error the run failed with.
 */
import { Dataset } from '../data/dataset.js'
import { isLevanterError } from '../errors.js'
import type { Gpt2ConfigInput } from '../models/config.js'
import { Gpt2LM } from '../models/lm.js'
import { Pipeline } from '../pipeline.js'
import { MemoryTracker } from '../trackers.js'
import { Trainer } from '../trainer.js'

/**
 * 554.1 M parameters: its parameters and their gradients alone (8 bytes a parameter, 4.13 GiB)
 * overflow one process's 4 GiB wasm heap, whatever the batch (one layer fewer would fit: 503.7 M
 * parameters train there, the heap at 3,888 MiB); a small vocabulary and context keep a step's
 * compute small.
 */
export const BIG_MODEL: Gpt2ConfigInput = { type: 'gpt2', vocabSize: 64, seqLen: 8, dModel: 2048, nLayers: 11, nHeads: 16 }
export const BIG_TOKENS = Array.from({ length: 400 }, (_, i) => (i * 7 + (i >> 3)) % 64)

async function main(): Promise<void> {
  const trainer = new Trainer(
    { learningRate: 1e-2, batchSize: 1, seed: 1, schedule: { decay: 'constant' } },
    { trackers: [new MemoryTracker()] },
  )
  try {
    const r = await new Pipeline({
      dataset: Dataset.fromTokens(BIG_TOKENS, { evalFraction: 0 }),
      model: new Gpt2LM(BIG_MODEL, 0),
      trainer,
      maxSteps: 1,
    }).run()
    process.stdout.write(JSON.stringify({ ok: true, loss: r.losses[0] }) + '\n')
  } catch (err) {
    const code = isLevanterError(err) ? err.code : undefined
    process.stdout.write(JSON.stringify({ ok: false, code, message: (err as Error).message }) + '\n')
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await main()
