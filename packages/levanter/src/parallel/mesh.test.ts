import { LocalClient, withClient } from '@marin/fray'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { initBackend } from '../backend.js'
import { isLevanterError } from '../errors.js'
import { Dataset } from '../data/dataset.js'
import { generate } from '../generate.js'
import { createModel } from '../models/lm.js'
import type { ModelConfigInput } from '../models/config.js'
import { Pipeline } from '../pipeline.js'
import { MemoryTracker } from '../trackers.js'
import { Trainer } from '../trainer.js'
import type { TrainerConfigInput } from '../trainer.js'
import type { MeshEngine } from './mesh-engine.js'

const STEPS = 20
const tokens = Array.from({ length: 1500 }, (_, i) => ((i * 3) % 10) + (i % 23 === 0 ? 1 : 0))
const MODELS: Record<string, ModelConfigInput> = {
  gpt2: { type: 'gpt2', vocabSize: 11, seqLen: 8, dModel: 16, nLayers: 2, nHeads: 2 },
  llama: { type: 'llama', vocabSize: 11, seqLen: 8, dModel: 16, nLayers: 2, nHeads: 2 },
  // grouped-query attention, tied head, scaled rotary
  'llama gqa': {
    type: 'llama',
    ...{ vocabSize: 11, seqLen: 8, dModel: 16, nLayers: 2, nHeads: 4, nKvHeads: 2, tieWordEmbeddings: true },
    ropeScaling: { type: 'linear', factor: 2 },
  },
}
// Members in this process (inline actors) linked by real sockets: the suite starts no process per member.
const client = new LocalClient({ mode: (process.env.LEVANTER_MESH_TEST_MODE as 'process' | undefined) ?? 'inline' })

beforeAll(async () => {
  await initBackend()
})
afterAll(() => client.shutdown())

type Run = {
  losses: number[]
  evals: number[]
  text: number[]
  ownedBytes: number[]
  heldBytes: number[]
  /** What the run logged as each member's parameter + AdamW bytes. */
  ownedMetric: number | undefined
  params: number
  tensors: number
}

async function train(model: ModelConfigInput, layout: Pick<TrainerConfigInput, 'mesh' | 'fsdp'>): Promise<Run> {
  const lm = createModel(model, 3)
  const tracker = new MemoryTracker()
  const trainer = new Trainer(
    { learningRate: 1e-2, batchSize: 4, seed: 1, evalEvery: 10, ...layout },
    { trackers: [tracker] },
  )
  const pipeline = new Pipeline({
    dataset: Dataset.fromTokens(tokens, { evalFraction: 0.1 }),
    model: lm,
    trainer,
    maxSteps: STEPS,
  })
  const ownedBytes: number[] = [],
    heldBytes: number[] = []
  trainer.addHook(STEPS, async () => {
    const e = pipeline.engine as MeshEngine | undefined
    if (e && 'layout' in e) {
      const mem = await e.group.broadcast.memory()
      ownedBytes.push(...mem.map((m) => m.ownedBytes))
      heldBytes.push(...mem.map((m) => m.heldBytes))
    }
  })
  const r = await withClient(client, () => pipeline.run())
  const evals = tracker.rows.filter((x) => x['eval/loss'] !== undefined).map((x) => x['eval/loss']!)
  const text = generate(lm, [1, 4, 7], { maxNewTokens: 8, temperature: 0 }).tokens
  const params = lm.numParams(),
    tensors = lm.specs.length
  lm.dispose()
  const ownedMetric = tracker.rows.findLast((x) => x['memory/params_and_adamw_bytes_per_member'] !== undefined)?.[
    'memory/params_and_adamw_bytes_per_member'
  ]
  return { losses: [...r.losses], evals, text, ownedBytes, heldBytes, params, tensors, ownedMetric }
}

const close = (a: readonly number[], b: readonly number[]) => {
  expect(a).toHaveLength(b.length)
  a.forEach((x, i) => expect(Math.abs(x - b[i]!)).toBeLessThan(1e-4))
}

describe.each(Object.keys(MODELS))('%s on a mesh matches one process on the same global batch', (name) => {
  const model = MODELS[name]!
  let single: Run
  beforeAll(async () => {
    single = await train(model, {})
  }, 60_000)

  test.each([
    { layout: 'data 2', mesh: { data: 2 }, fsdp: false },
    { layout: 'data 2 fsdp', mesh: { data: 2 }, fsdp: true },
    { layout: 'model 2', mesh: { model: 2 }, fsdp: false },
    { layout: 'data 2 × model 2', mesh: { data: 2, model: 2 }, fsdp: false },
    { layout: 'data 2 × model 2 fsdp', mesh: { data: 2, model: 2 }, fsdp: true },
  ])(
    `$layout: ${STEPS} losses, evaluation and generated text`,
    async ({ mesh, fsdp }) => {
      const sharded = await train(model, { mesh, fsdp })
      expect(single.losses).toHaveLength(STEPS)
      close(sharded.losses, single.losses)
      expect(single.evals).toHaveLength(2)
      close(sharded.evals, single.evals)
      expect(sharded.text).toEqual(single.text)
      // Every run logs what each member keeps: all of it in one process or replicated, its share otherwise.
      expect(single.ownedMetric).toBe(12 * single.params)
      if (fsdp || mesh.model) expect(sharded.ownedMetric).toBe(Math.max(...sharded.ownedBytes))
      else expect(sharded.ownedMetric).toBe(12 * sharded.params)
      // The mesh engine's members report what they own: fsdp keeps half of each parameter and its moments.
      if (fsdp || mesh.model) expect(sharded.ownedBytes).toHaveLength((mesh.data ?? 1) * (mesh.model ?? 1))
      // fsdp: parameters + AdamW moments (12 bytes a float) owned per member are 1/data of the model part
      // (up to one padding float per tensor), and no whole parameter is held between steps.
      if (fsdp) {
        expect(new Set(sharded.heldBytes)).toEqual(new Set([0]))
        const part = mesh.model ? 0.75 : 1 // with model 2, the split half of the weights is halved again
        for (const b of sharded.ownedBytes)
          expect(b).toBeLessThanOrEqual((12 * sharded.params * part) / 2 + 12 * sharded.tensors)
        if (!mesh.model)
          for (const b of sharded.ownedBytes)
            expect(Math.abs(b - (12 * sharded.params) / 2)).toBeLessThanOrEqual(12 * sharded.tensors)
      }
    },
    60_000,
  )
})

test('a dead tensor-parallel member fails the step with REPLICA_FAILED naming it', async () => {
  const processes = new LocalClient() // members as real processes, so one can be killed
  const trainer = new Trainer(
    { learningRate: 1e-2, batchSize: 4, mesh: { model: 2 } },
    { trackers: [new MemoryTracker()] },
  )
  const pipeline = new Pipeline({
    dataset: Dataset.fromTokens(tokens, { evalFraction: 0 }),
    model: createModel(MODELS.gpt2!, 3),
    trainer,
    maxSteps: 10,
  })
  trainer.addHook(2, () => {
    process.kill((pipeline.engine as MeshEngine).pids[1]!, 'SIGKILL')
  })
  try {
    await expect(withClient(processes, () => pipeline.run())).rejects.toSatisfy(
      (e) =>
        isLevanterError(e, 'REPLICA_FAILED') &&
        /mesh step: member 1 of 2 failed.*resume from the last checkpoint/.test((e as Error).message),
    )
  } finally {
    await processes.shutdown()
  }
}, 60_000)
