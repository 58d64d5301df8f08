/**
 * Where a training step's time goes: runs the reference config on one process and prints, per
 * kernel, the summed time of one step (tf.profile), largest first. `node --import tsx bench/profile-step.ts [steps]`
 */
import * as tf from '@tensorflow/tfjs'
import { initBackend } from '../src/backend.js'
import { printTally, tally, withShapes } from './profile-report.js'
import { Dataset } from '../src/data/dataset.js'
import { maskCount } from '../src/data/batch.js'
import { Gpt2LM } from '../src/models/lm.js'
import { AdamW, AdamWConfig } from '../src/optim/adamw.js'
import { computeGrads } from '../src/train-step.js'

const REFERENCE = { vocabSize: 512, seqLen: 128, dModel: 256, nLayers: 4, nHeads: 4 }
const BATCH = 16
await initBackend()
const model = new Gpt2LM(REFERENCE, 0)
const opt = new AdamW(AdamWConfig.parse({}), model)
const tokens = Array.from({ length: 200_000 }, (_, i) => (i * 7919 + (i >> 7)) % 512)
const dataset = Dataset.fromTokens(tokens, { evalFraction: 0 })
const step = async (s: number) => {
  const b = await dataset.trainBatch(s, BATCH, REFERENCE.seqLen, 0)
  const t0 = performance.now()
  const { grads } = computeGrads(model, b, maskCount(b))
  const t1 = performance.now()
  opt.apply(grads, 1e-3)
  tf.dispose([...grads.values()])
  return { grads: t1 - t0, apply: performance.now() - t1 }
}
await step(0)
for (let s = 1; s <= Number(process.argv[2] ?? 2); s++) console.log(JSON.stringify(await step(s)))
const prof = await tf.profile(async () => {
  await step(99)
  return []
})
const total = prof.kernels.reduce((t, k) => t + (k.kernelTimeMs as number), 0)
console.log(`kernels: ${prof.kernels.length}, total ${total.toFixed(0)} ms`)
printTally(tally(prof.kernels, withShapes).slice(0, 80), 1)
// by kernel name, without the scopes of custom gradients (their kernels are counted on their own)
console.log('by kernel:')
printTally(
  tally(prof.kernels, (k) => (k.name === 'unnamed scope' ? undefined : k.name)),
  1,
)
