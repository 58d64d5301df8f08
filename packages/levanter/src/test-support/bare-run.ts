/**
 * A process for the bare-pipeline test: a Pipeline with no trackers of its own, as a first
 * experiment writes it (from the package's entry), trained for 4 steps (the prefix and log level come from the
 * environment).
 */
import { Dataset, Gpt2LM, Pipeline, Trainer } from '@marin/levanter'

const tokens = Array.from({ length: 600 }, (_, i) => (i * 7) % 10)
await new Pipeline({
  dataset: Dataset.fromTokens(tokens, { evalFraction: 0.1 }),
  model: new Gpt2LM({ vocabSize: 11, seqLen: 8, dModel: 16, nLayers: 1, nHeads: 2 }, 0),
  trainer: new Trainer({ batchSize: 2, logEvery: 2, runName: 'bare', peakFlops: 1e9 }),
  maxSteps: 4,
}).run()
