/**
 * `pnpm bench webgpu`: the reference config (vocab 512, context 128, 4 layers, 4 heads, d_model 256,
 * batch 16, AdamW) trained with the device-resident step on a hardware GPU adapter: tokens/s and
 * host↔device bytes per step. Without a hardware adapter it prints why on stderr and measures
 * nothing (SwiftShader, a software adapter, would time the CPU). LEVANTER_BENCH_STEPS sets the timed
 * steps (median reported) @default 5.
 */
import * as tf from '@tensorflow/tfjs'
import { emit, median } from '@marin/rigging/bench'
import { initBackend } from '../src/backend.js'
import { Dataset } from '../src/data/dataset.js'
import { LocalEngine } from '../src/engine.js'
import { createModel } from '../src/models/lm.js'
import { AdamWConfig } from '../src/optim/adamw.js'
import { hardwareAdapter } from '../src/webgpu/adapter.js'

const raw = process.env.LEVANTER_BENCH_STEPS ?? ''
const steps = raw === '' ? 5 : Number(raw)
if (!Number.isInteger(steps) || steps < 1) {
  process.stderr.write(`webgpu bench: LEVANTER_BENCH_STEPS must be a whole number ≥ 1, got "${raw}"\n`)
  process.exit(2)
}

if (!(await hardwareAdapter())) {
  process.stderr.write(
    'webgpu bench: skipped: no hardware GPU adapter (no Vulkan loader or driver, or only a software adapter); ' +
      'pnpm device-check --software runs the webgpu path on SwiftShader\n',
  )
  process.exit(0)
}
const info = await initBackend('webgpu')
process.stderr.write(`webgpu bench: ${JSON.stringify(info.adapter)}\n`)
const B = 16,
  T = 128
const model = createModel({ type: 'gpt2', vocabSize: 512, seqLen: T, dModel: 256, nLayers: 4, nHeads: 4 }, 0)
const data = Dataset.fromTokens(
  Array.from({ length: B * (T + 1) * 8 }, (_, i) => (i * 7919) % 512),
  { evalFraction: 0 },
)
const engine = new LocalEngine(model, AdamWConfig.parse({}))
const times: number[] = []
for (let s = 0; s < steps + 2; s++) {
  const batch = await data.trainBatch(s, B, T, 0)
  const t0 = performance.now()
  await engine.step(batch, 1e-4)
  if (s >= 2) times.push((performance.now() - t0) / 1000)
}
const bytes = engine.lastStep.toDevice + engine.lastStep.toHost
emit({ bench: 'levanter', metric: 'webgpu_train_tokens_per_sec', value: (B * T) / median(times), unit: 'tokens/s' })
emit({ bench: 'levanter', metric: 'webgpu_host_device_bytes_per_step', value: bytes, unit: 'bytes' })
await engine.close()
model.dispose()
tf.disposeVariables()
