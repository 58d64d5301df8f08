import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { LocalClient, withClient } from '@marin/fray'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { initBackend } from '../backend.js'
import { Dataset } from '../data/dataset.js'
import { Gpt2LM } from '../models/lm.js'
import { Pipeline } from '../pipeline.js'
import { MemoryTracker } from '../trackers.js'
import { Trainer } from '../trainer.js'
import type { TrainerConfigInput } from '../trainer.js'
import type { MeshEngine } from '../parallel/mesh-engine.js'
import { Checkpointer, modelFromCheckpoint } from './checkpointer.js'

const cfg = { vocabSize: 11, seqLen: 8, dModel: 16, nLayers: 2, nHeads: 2 }
const tokens = Array.from({ length: 1500 }, (_, i) => ((i * 3) % 10) + (i % 23 === 0 ? 1 : 0))
// Members in this process (inline actors) linked by real sockets.
const client = new LocalClient({ mode: 'inline' })
const stores: string[] = []

beforeAll(async () => {
  await initBackend()
})
afterAll(async () => {
  await client.shutdown()
  for (const s of stores) fs.rmSync(s, { recursive: true, force: true })
})

type Layout = Pick<TrainerConfigInput, 'mesh' | 'fsdp'>

/** Trains to `maxSteps` on `layout` (resuming from `store`'s newest checkpoint); the losses of the steps it ran. */
async function train(
  layout: Layout,
  maxSteps: number,
  store?: string,
  after?: (p: Pipeline) => void,
): Promise<number[]> {
  const trainer = new Trainer(
    {
      learningRate: 1e-2,
      batchSize: 4,
      seed: 1,
      schedule: { decay: 'constant' },
      ...(store ? { checkpointStore: store, checkpointEvery: 4, runName: 'reshard' } : {}),
      ...layout,
    },
    { trackers: [new MemoryTracker()] },
  )
  const pipeline = new Pipeline({
    dataset: Dataset.fromTokens(tokens, { evalFraction: 0 }),
    model: new Gpt2LM(cfg, 3),
    trainer,
    maxSteps,
  })
  const losses = [...(await withClient(client, () => pipeline.run())).losses]
  after?.(pipeline)
  return losses
}

const newStore = () => {
  const s = fs.mkdtempSync(path.join(os.tmpdir(), 'lev-reshard-'))
  stores.push(s)
  return s
}

describe('checkpoints of a mesh', () => {
  let reference: number[]
  beforeAll(async () => {
    reference = await train({}, 8)
  }, 60_000)

  test('members write their shards into one version whose manifest records the mesh and the layout', async () => {
    const store = newStore()
    await train({ mesh: { data: 2, model: 2 }, fsdp: true }, 4, store)
    const ck = await Checkpointer.open({ store, run: 'reshard' })
    try {
      const view = await ck.store.open(ck.artifact)
      const files = view.files().filter((f) => f.startsWith('step-000000004/'))
      expect(files).toEqual(
        [
          'step-000000004/manifest.json',
          ...[0, 1, 2, 3].flatMap((r) => [
            `step-000000004/model-0000${r}-of-00004.safetensors`,
            `step-000000004/optimizer-0000${r}-of-00004.safetensors`,
          ]),
        ].sort(),
      )
      const manifest = JSON.parse(await view.readText('step-000000004/manifest.json'))
      expect(manifest.mesh).toMatchObject({ data: 2, model: 2, fsdp: true })
      const attn = manifest.mesh.layout.find((p: { name: string }) => p.name === 'transformer.h.0.attn.c_attn.weight')
      expect(attn).toMatchObject({ shape: [16, 48], local: [16, 24], split: { kind: 'cols', groups: 3 } })
      // A served model loads from the shards as from one file.
      const { model } = await modelFromCheckpoint(view)
      expect((await model.weights()).get('transformer.h.0.attn.c_attn.weight')).toHaveLength(16 * 48)
    } finally {
      ck.close()
    }
  }, 60_000)

  test.each<{ what: string; from: Layout; to: Layout }>([
    { what: 'data 2 → 1', from: { mesh: { data: 2 } }, to: {} },
    { what: '1 → data 2', from: {}, to: { mesh: { data: 2 } } },
    { what: 'fsdp → replicated', from: { mesh: { data: 2 }, fsdp: true }, to: { mesh: { data: 2 } } },
    { what: 'model 2 → 1', from: { mesh: { model: 2 } }, to: {} },
  ])(
    '$what: resumes within 1e-4 of the uninterrupted run',
    async ({ from, to }) => {
      const store = newStore()
      const first = await train(from, 4, store)
      const rest = await train(to, 8, store)
      expect(rest).toHaveLength(4)
      ;[...first, ...rest].forEach((l, i) => expect(Math.abs(l - reference[i]!)).toBeLessThan(1e-4))
    },
    60_000,
  )

  test.each<{ what: string; from: Layout; to: Layout }>([
    {
      what: 'fsdp data 4 → fsdp data 2',
      from: { mesh: { data: 4 }, fsdp: true },
      to: { mesh: { data: 2 }, fsdp: true },
    },
    { what: 'model 2 → fsdp data 2', from: { mesh: { model: 2 } }, to: { mesh: { data: 2 }, fsdp: true } },
    { what: 'fsdp data 2 → model 2', from: { mesh: { data: 2 }, fsdp: true }, to: { mesh: { model: 2 } } },
  ])(
    '$what: each member reads only the shards its parts lie in, and resumes within 1e-4',
    async ({ from, to }) => {
      const store = newStore()
      const first = await train(from, 4, store)
      let reads: { files: string[]; bytes: number }[] = []
      const rest = await train(to, 8, store, (p) => (reads = (p.engine as MeshEngine).shardReads))
      expect(rest).toHaveLength(4)
      ;[...first, ...rest].forEach((l, i) => expect(Math.abs(l - reference[i]!)).toBeLessThan(1e-4))
      const ck = await Checkpointer.open({ store, run: 'reshard' })
      const view = await ck.store.open(ck.artifact)
      const sizes = new Map(
        view
          .files()
          .filter((f) => /^step-000000004\/(model|optimizer)-/.test(f))
          .map((f) => [f.slice('step-000000004/'.length), view.entry(f).size]),
      )
      ck.close()
      const total = [...sizes.values()].reduce((a, b) => a + b, 0)
      const file = (kind: string, r: number, n: number) => `${kind}-0000${r}-of-0000${n}.safetensors`
      const old = (from.mesh?.data ?? 1) * (from.mesh?.model ?? 1)
      const files = (...ranks: number[]) =>
        ranks.flatMap((r) => [file('model', r, old), file('optimizer', r, old)]).sort()
      // Every member read its files itself (the driver joined nothing), only those its parts lie in.
      expect(reads.map((r) => [...r.files].sort())).toEqual(
        old === 4 ? [files(0, 1), files(2, 3)] : [files(0, 1), files(0, 1)],
      )
      for (const r of reads) expect(r.bytes).toBe(r.files.reduce((a, f) => a + sizes.get(f)!, 0))
      // fsdp members store only what they own: 4 → 2 reads half of the checkpoint per member.
      if (old === 4) for (const r of reads) expect(r.bytes).toBeLessThan(0.51 * total)
    },
    60_000,
  )

  test('resume on the same mesh is bit-exact', async () => {
    const layout: Layout = { mesh: { data: 2, model: 2 }, fsdp: true }
    const whole = await train(layout, 8)
    const store = newStore()
    await train(layout, 4, store)
    expect(await train(layout, 8, store)).toEqual(whole.slice(4))
  }, 60_000)
})
