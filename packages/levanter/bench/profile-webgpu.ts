/**
 * Where a device-resident training step's time goes on webgpu: GPU programs dispatched per step
 * (by program, counted where the backend dispatches them), and per tfjs kernel the GPU time from
 * timestamp queries (tf.profile), largest first; then the median wall time of plain steps.
 * `node --import tsx bench/profile-webgpu.ts [gpt2|llama] [vocab,seqLen,dModel,layers,heads,batch] [--stock]`
 * (--stock: without levanter's WGSL kernels, src/webgpu/kernels/)
 * (LEVANTER_BACKEND is forced to webgpu: a GPU, else SwiftShader, whose times only stand in for a GPU's).
 */
import * as tf from '@tensorflow/tfjs'
import { initBackend } from '../src/backend.js'
import { printTally, tally, withShapes } from './profile-report.js'
import { Dataset } from '../src/data/dataset.js'
import { LocalEngine } from '../src/engine.js'
import { createModel } from '../src/models/lm.js'
import { AdamWConfig } from '../src/optim/adamw.js'
import { WgslKernel } from '../src/webgpu/kernels/dispatch.js'
import { unregisterWebGpuKernels } from '../src/webgpu/kernels/register.js'

const type = (process.argv[2] ?? 'gpt2') as 'gpt2' | 'llama'
const shape = process.argv[3]?.startsWith('-') ? undefined : process.argv[3]
const [vocabSize, seqLen, dModel, nLayers, nHeads, batch] = (shape ?? '512,32,32,1,2,4').split(',').map(Number)
const info = await initBackend('webgpu')
if (process.argv.includes('--stock')) unregisterWebGpuKernels()
process.stderr.write(`${JSON.stringify(info.adapter)}\n`)
const model = createModel(
  { type, vocabSize: vocabSize!, seqLen: seqLen!, dModel: dModel!, nLayers: nLayers!, nHeads: nHeads! },
  0,
)
const data = Dataset.fromTokens(
  Array.from({ length: batch! * (seqLen! + 1) * 8 }, (_, i) => (i * 7919) % vocabSize!),
  { evalFraction: 0 },
)
const engine = new LocalEngine(model, AdamWConfig.parse({}))

// Count the programs the backend dispatches, by program class, and levanter's WGSL kernels by name.
type Program = { constructor: { name: string }; shaderKey?: string }
const backend = tf.backend() as unknown as { runWebGPUProgram: (p: Program, ...rest: unknown[]) => unknown }
const run = backend.runWebGPUProgram.bind(backend)
let dispatches = new Map<string, number>()
backend.runWebGPUProgram = (p, ...rest) => {
  dispatches.set(p.constructor.name, (dispatches.get(p.constructor.name) ?? 0) + 1)
  return run(p, ...rest)
}
const dispatchWgsl = WgslKernel.prototype.dispatch
WgslKernel.prototype.dispatch = function (this: WgslKernel, ...args: Parameters<WgslKernel['dispatch']>) {
  dispatches.set(this.name, (dispatches.get(this.name) ?? 0) + 1)
  return dispatchWgsl.apply(this, args)
}
const step = async (s: number) => engine.step(await data.trainBatch(s, batch!, seqLen!, 0), 1e-4)
await step(0)
await step(1)
dispatches = new Map()
await step(2)
const total = [...dispatches.values()].reduce((a, b) => a + b, 0)
console.log(`programs dispatched per step: ${total}`)
for (const [k, n] of [...dispatches].sort((a, b) => b[1] - a[1])) console.log(`${String(n).padStart(6)}× ${k}`)

const prof = await tf.profile(async () => {
  await step(3)
  return []
})
const gpuMs = prof.kernels.reduce((t, k) => t + (k.kernelTimeMs as number), 0)
console.log(`tfjs kernels per step: ${prof.kernels.length}, GPU time ${gpuMs.toFixed(1)} ms (timestamp queries)`)
console.log('by kernel:')
printTally(
  tally(prof.kernels, (k) => k.name),
  2,
)
console.log('by kernel and shape (top 30):')
printTally(tally(prof.kernels, withShapes).slice(0, 30), 2)

const times: number[] = []
for (let s = 4; s < 11; s++) {
  const t0 = performance.now()
  await step(s)
  times.push(performance.now() - t0)
}
times.sort((a, b) => a - b)
console.log(
  `wall ms per step (median of ${times.length}): ${times[times.length >> 1]!.toFixed(1)}  ` +
    `all: ${times.map((t) => t.toFixed(0)).join(' ')}`,
)
await engine.close()
model.dispose()
process.exit(0)
