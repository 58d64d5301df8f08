/**
 * `pnpm bench mesh` (also run by `pnpm bench levanter`): training on 2 processes at the reference
 * config (vocab 512, context 128, 4 layers, 4 heads, d_model 256, batch 16) in each mesh layout:
 * replicated (`mesh: { data: 2 }`), fsdp (`{ data: 2 }, fsdp`) and tensor parallel (`{ model: 2 }`).
 * Per layout: tokens/s (median of the timed steps), the largest member's peak RSS, the bytes of
 * parameters + AdamW moments each member owns, and the median time per step in each collective.
 *
 * MESH_BENCH_STEPS sets the timed steps per layout @default 3. MESH_BENCH_BIG=1 adds a model one
 * process cannot train at batch 16 (d_model 1024, 8 layers, 16 heads): 2 steps of it at batch 16 on
 * `{ model: 2 }`, and its losses on a batch of 2 (which one process fits) on one process and on
 * `{ model: 2 }`, with their largest difference.
 */
import { emit, median } from '@marin/rigging/bench'
import { initBackend } from '../src/backend.js'
import { Dataset } from '../src/data/dataset.js'
import { Gpt2LM } from '../src/models/lm.js'
import { DataParallelEngine } from '../src/parallel/data-parallel.js'
import { MeshEngine } from '../src/parallel/mesh-engine.js'
import type { MeshStepPhases } from '../src/parallel/mesh-replica.js'
import type { StepPhases } from '../src/parallel/replica.js'
import { Pipeline } from '../src/pipeline.js'
import { MemoryTracker } from '../src/trackers.js'
import { Trainer } from '../src/trainer.js'
import type { TrainerConfigInput } from '../src/trainer.js'

const b = 'levanter'
/** The reference config of bench/variant.ts (which runs when imported, so it is repeated here). */
const REFERENCE = { vocabSize: 512, seqLen: 128, dModel: 256, nLayers: 4, nHeads: 4 }
const raw = process.env.MESH_BENCH_STEPS
const STEPS = raw ? Number(raw) : 3
if (!(Number.isInteger(STEPS) && STEPS >= 1)) {
  process.stderr.write(`mesh bench: MESH_BENCH_STEPS must be a whole number ≥ 1, got "${raw}"\n`)
  process.exit(2)
}
const tokens = Array.from({ length: 200_000 }, (_, i) => (i * 7919 + (i >> 7)) % 512)
const dataset = Dataset.fromTokens(tokens, { evalFraction: 0 })
await initBackend()

type Layout = { name: string; config: Pick<TrainerConfigInput, 'mesh' | 'fsdp'> }
type Measured = {
  losses: number[]
  tokensPerSec: number
  peakRssMiB: number
  ownedMiB: number | null
  collectivesMs: Record<string, number>
}

/** Trains `model` for `steps` + 1 steps (the first warms up) on `layout`; what the members measured. */
async function measure(model: Gpt2LM, layout: Layout['config'], steps: number, batchSize: number): Promise<Measured> {
  const tps: number[] = []
  const trainer = new Trainer(
    { learningRate: 1e-3, batchSize, schedule: { decay: 'constant' }, ...layout },
    { trackers: [new MemoryTracker()], hooks: [{ every: 1, run: (i) => void tps.push(i.tokensPerSec) }] },
  )
  const pipeline = new Pipeline({ dataset, model, trainer, maxSteps: steps + 1 })
  const out: Omit<Measured, 'losses' | 'tokensPerSec'> = { peakRssMiB: 0, ownedMiB: null, collectivesMs: {} }
  trainer.addHook(steps + 1, async () => {
    const e = pipeline.engine
    if (e instanceof DataParallelEngine) {
      out.peakRssMiB = Math.max(...(await e.group.broadcast.memory()).map((m) => m.peakRssMiB))
      const phases = (await e.group.broadcast.phases()).map((ps) => ps.slice(1))
      const med = (k: keyof StepPhases) => Math.max(...phases.map((ps) => median(ps.map((p) => p[k]))))
      out.collectivesMs = { all_reduce_data: med('allReduce') }
      out.ownedMiB = (12 * model.numParams()) / 2 ** 20
    } else if (e instanceof MeshEngine) {
      const mem = await e.group.broadcast.memory()
      out.peakRssMiB = Math.max(...mem.map((m) => m.peakRssMiB))
      out.ownedMiB = Math.max(...mem.map((m) => m.ownedBytes)) / 2 ** 20
      const phases = (await e.group.broadcast.phases()).map((ps) => ps.slice(1))
      const med = (k: keyof MeshStepPhases) => Math.max(...phases.map((ps) => median(ps.map((p) => p[k]))))
      const tp = e.mesh.model > 1,
        dp = e.mesh.data > 1
      // Under fsdp the gathers and reduce-scatters run stage by stage inside the pass (the overlap lines below).
      out.collectivesMs = {
        ...(tp ? { all_reduce_model_stages: med('stageReduce'), all_reduce_model_norms: med('modelReduce') } : {}),
        ...(dp && !layout.fsdp ? { all_reduce_data: med('dataReduce') } : {}),
        all_reduce_norm: med('norm'),
      }
    } else {
      out.peakRssMiB = process.resourceUsage().maxRSS / 1024
      out.ownedMiB = (12 * model.numParams()) / 2 ** 20
    }
  })
  const r = await pipeline.run()
  return { ...out, losses: [...r.losses], tokensPerSec: median(tps.slice(1)) }
}

const LAYOUTS: Layout[] = [
  { name: 'replicated', config: { mesh: { data: 2 } } },
  { name: 'fsdp', config: { mesh: { data: 2 }, fsdp: true } },
  { name: 'model', config: { mesh: { model: 2 } } },
]
for (const { name, config } of LAYOUTS) {
  process.stderr.write(`mesh bench: ${name}, ${STEPS} timed steps\n`)
  const m = await measure(new Gpt2LM(REFERENCE, 0), config, STEPS, 16)
  const at = `mesh_${name}_2_processes`
  emit({ bench: b, metric: `${at}_train_tokens_per_s`, value: m.tokensPerSec, unit: 'tokens/s' })
  emit({ bench: b, metric: `${at}_member_peak_rss`, value: m.peakRssMiB, unit: 'MiB' })
  if (m.ownedMiB !== null) emit({ bench: b, metric: `${at}_member_params_and_adamw`, value: m.ownedMiB, unit: 'MiB' })
  for (const [k, v] of Object.entries(m.collectivesMs))
    emit({ bench: b, metric: `${at}_${k}_per_step`, value: v, unit: 'ms' })
}

// fsdp's gradients reduce-scattered stage by stage during the backward pass, against one collective after it.
const stepMs: Record<string, number> = {}
for (const overlapReduce of [true, false]) {
  const model = new Gpt2LM(REFERENCE, 0)
  const adamw = { beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0.1, maxGradNorm: 1 }
  const engine = await MeshEngine.create(model, adamw, { mesh: { data: 2, model: 1 }, fsdp: true, overlapReduce })
  const times: number[] = []
  try {
    for (let s = 0; s <= STEPS; s++) {
      const batch = await dataset.trainBatch(s, 16, REFERENCE.seqLen, 0)
      const t = performance.now()
      await engine.step(batch, 1e-3)
      if (s > 0) times.push(performance.now() - t) // step 0 warms up
    }
  } finally {
    await engine.close()
  }
  stepMs[overlapReduce ? 'overlapped' : 'after'] = median(times)
}
emit({ bench: b, metric: 'mesh_fsdp_2_step_reduce_scatter_per_stage', value: stepMs.overlapped!, unit: 'ms' })
emit({ bench: b, metric: 'mesh_fsdp_2_step_reduce_scatter_after_backward', value: stepMs.after!, unit: 'ms' })
emit({
  bench: b,
  metric: 'mesh_fsdp_2_step_time_saved_by_overlap',
  value: stepMs.after! - stepMs.overlapped!,
  unit: 'ms',
})

if (process.env.MESH_BENCH_BIG === '1') {
  const BIG = { vocabSize: 512, seqLen: 128, dModel: 1024, nLayers: 8, nHeads: 16 }
  process.stderr.write('mesh bench: d_model 1024, 8 layers on { model: 2 } at batch 16\n')
  const big = await measure(new Gpt2LM(BIG, 0), { mesh: { model: 2 } }, 1, 16)
  emit({ bench: b, metric: 'mesh_big_model_2_train_tokens_per_s', value: big.tokensPerSec, unit: 'tokens/s' })
  emit({ bench: b, metric: 'mesh_big_model_2_member_peak_rss', value: big.peakRssMiB, unit: 'MiB' })
  process.stderr.write('mesh bench: the same model at batch 2, one process against { model: 2 }\n')
  const one = await measure(new Gpt2LM(BIG, 0), {}, 2, 2)
  const two = await measure(new Gpt2LM(BIG, 0), { mesh: { model: 2 } }, 2, 2)
  const diff = Math.max(...one.losses.map((l, i) => Math.abs(l - two.losses[i]!)))
  emit({ bench: b, metric: 'mesh_big_model_2_loss_max_abs_diff_batch_2', value: diff, unit: 'nats' })
}
