/**
 * `pnpm bench mesh` (also run by `pnpm bench levanter`): training on 2 processes at the reference
 * config (vocab 512, context 128, 4 layers, 4 heads, d_model 256, batch 16) in each mesh layout:
 * replicated (`mesh: { data: 2 }`), fsdp (`{ data: 2 }, fsdp`) and tensor parallel (`{ model: 2 }`).
 * Per layout: tokens/s (median of the timed steps), the largest member's peak RSS, the bytes of
 * parameters + AdamW moments each member owns, and the median time per step in each collective.
 *
 * Then fsdp's reduce-scatters per stage against one after the backward pass, and replicated data
 * 2's all-reduce in buckets during the backward pass against one after it.
 *
 * MESH_BENCH_STEPS sets the timed steps per layout @default 3. MESH_BENCH_BIG=1 adds the model one
 * process cannot train at any batch (554 M parameters, src/test-support/big-model-child.ts): its
 * members' start (each draws its own part of the weights), 2 steps on `{ data: 2 }` fsdp, the
 * members' peak RSS, wasm heap and owned bytes.
 */
import { emit, median } from '@marin/rigging/bench'
import { initBackend } from '../src/backend.js'
import type { Batch } from '../src/data/batch.js'
import { Dataset } from '../src/data/dataset.js'
import { Gpt2LM } from '../src/models/lm.js'
import { BIG_MODEL, BIG_TOKENS } from '../src/test-support/big-model-child.js'
import { MeshEngine } from '../src/parallel/mesh-engine.js'
import type { MeshStepPhases } from '../src/parallel/step-record.js'
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
    if (e instanceof MeshEngine) {
      const mem = await e.group.broadcast.memory()
      out.peakRssMiB = Math.max(...mem.map((m) => m.peakRssMiB))
      out.ownedMiB = Math.max(...mem.map((m) => m.ownedBytes)) / 2 ** 20
      const phases = (await e.group.broadcast.phases()).map((ps) => ps.slice(1))
      const med = (k: keyof MeshStepPhases) => Math.max(...phases.map((ps) => median(ps.map((p) => p[k]))))
      const tp = e.mesh.model > 1,
        dp = e.mesh.data > 1
      // Under fsdp the gathers and reduce-scatters run stage by stage inside the pass (the overlap lines below);
      // replicas of the whole model take the norm of the summed gradient each, no collective.
      out.collectivesMs = {
        ...(tp ? { all_reduce_model_stages: med('stageReduce'), all_reduce_model_norms: med('modelReduce') } : {}),
        ...(dp && !layout.fsdp ? { all_reduce_data: med('dataReduce') } : {}),
        ...(e.replicated ? {} : { all_reduce_norm: med('norm') }),
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

const ADAMW = { beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0.1, maxGradNorm: 1 }

/** The median time of `engine`'s steps 1…STEPS on the reference batches (step 0 warms up). */
async function medianStepMs(engine: { step(batch: Batch, lr: number): Promise<unknown> }): Promise<number> {
  const times: number[] = []
  for (let s = 0; s <= STEPS; s++) {
    const batch = await dataset.trainBatch(s, 16, REFERENCE.seqLen, 0)
    const t = performance.now()
    await engine.step(batch, 1e-3)
    if (s > 0) times.push(performance.now() - t)
  }
  return median(times)
}

// fsdp's gradients reduce-scattered stage by stage during the backward pass, against one collective after it.
const stepMs: Record<string, number> = {}
for (const overlapReduce of [true, false]) {
  const model = new Gpt2LM(REFERENCE, 0)
  const engine = await MeshEngine.create(model, ADAMW, { mesh: { data: 2, model: 1 }, fsdp: true, overlapReduce })
  try {
    stepMs[overlapReduce ? 'overlapped' : 'after'] = await medianStepMs(engine)
  } finally {
    await engine.close()
  }
}
emit({ bench: b, metric: 'mesh_fsdp_2_step_reduce_scatter_per_stage', value: stepMs.overlapped!, unit: 'ms' })
emit({ bench: b, metric: 'mesh_fsdp_2_step_reduce_scatter_after_backward', value: stepMs.after!, unit: 'ms' })
emit({
  bench: b,
  metric: 'mesh_fsdp_2_step_time_saved_by_overlap',
  value: stepMs.after! - stepMs.overlapped!,
  unit: 'ms',
})

// Replicated data 2: gradients all-reduced in buckets as the backward pass finishes them, against one all-reduce
// after it (the same bits). Interleaved rounds, each the median of its timed steps; the median over rounds.
const ROUNDS = 3
const dpMs: Record<'overlapped' | 'after', number[]> = { overlapped: [], after: [] }
for (let round = 0; round < ROUNDS; round++)
  for (const overlapReduce of [true, false]) {
    const model = new Gpt2LM(REFERENCE, 0)
    const engine = await MeshEngine.create(model, ADAMW, { mesh: { data: 2, model: 1 }, overlapReduce })
    model.dispose()
    try {
      dpMs[overlapReduce ? 'overlapped' : 'after'].push(await medianStepMs(engine))
      if (overlapReduce && round === 0) {
        const phases = (await engine.group.broadcast.phases())[0]!
        emit({ bench: b, metric: 'mesh_replicated_2_buckets_per_step', value: phases.at(-1)!.buckets, unit: 'count' })
      }
    } finally {
      await engine.close()
    }
  }
const dpOverlapped = median(dpMs.overlapped),
  dpAfter = median(dpMs.after)
emit({ bench: b, metric: 'mesh_replicated_2_step_all_reduce_in_buckets', value: dpOverlapped, unit: 'ms' })
emit({ bench: b, metric: 'mesh_replicated_2_step_all_reduce_after_backward', value: dpAfter, unit: 'ms' })
emit({ bench: b, metric: 'mesh_replicated_2_step_time_saved_by_buckets', value: dpAfter - dpOverlapped, unit: 'ms' })

if (process.env.MESH_BENCH_BIG === '1') {
  // 554 M parameters: one process cannot train it (src/parallel/big-model.test.ts); fsdp over 2 members can.
  process.stderr.write('mesh bench: the 554 M-parameter model on { data: 2 } fsdp, 2 steps at batch 2, context 8\n')
  const t0 = performance.now()
  const engine = await MeshEngine.init(BIG_MODEL, 0, ADAMW, { mesh: { data: 2, model: 1 }, fsdp: true })
  emit({ bench: b, metric: 'mesh_big_fsdp_2_init', value: performance.now() - t0, unit: 'ms' })
  const big = Dataset.fromTokens(BIG_TOKENS, { evalFraction: 0 })
  const times: number[] = []
  try {
    for (let s = 0; s < 2; s++) {
      const batch = await big.trainBatch(s, 2, BIG_MODEL.seqLen!, 1)
      const t = performance.now()
      await engine.step(batch, 1e-2)
      times.push(performance.now() - t)
    }
    const mem = await engine.group.broadcast.memory()
    emit({ bench: b, metric: 'mesh_big_fsdp_2_step', value: median(times), unit: 'ms' })
    emit({
      bench: b,
      metric: 'mesh_big_fsdp_2_member_peak_rss',
      value: Math.max(...mem.map((m) => m.peakRssMiB)),
      unit: 'MiB',
    })
    emit({
      bench: b,
      metric: 'mesh_big_fsdp_2_member_wasm_heap',
      value: Math.max(...mem.map((m) => m.heapBytes)) / 2 ** 20,
      unit: 'MiB',
    })
    emit({
      bench: b,
      metric: 'mesh_big_fsdp_2_member_params_and_adamw',
      value: Math.max(...mem.map((m) => m.ownedBytes)) / 2 ** 20,
      unit: 'MiB',
    })
  } finally {
    await engine.close()
  }
}
