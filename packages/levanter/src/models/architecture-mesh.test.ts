import { LocalClient, withClient } from '@marin/fray'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { initBackend } from '../backend.js'
import { Dataset } from '../data/dataset.js'
import { Pipeline } from '../pipeline.js'
import { userArchitecture } from '../test-support/user-architecture.js'
import { Trainer } from '../trainer.js'
import type { TrainerConfigInput } from '../trainer.js'
import { createModel, loadArchitecture } from './lm.js'

// Members in processes of their own: they know only the config, and load the architecture from the module that
// registered it (test-support/user-architecture.ts).
const client = new LocalClient({ mode: 'process' })
const config = { type: userArchitecture.type, vocabSize: 11, seqLen: 8, dModel: 8, nLayers: 2, nHeads: 2, hidden: 8 }
const tokens = Array.from({ length: 1200 }, (_, i) => ((i * 3) % 10) + (i % 23 === 0 ? 1 : 0))

beforeAll(async () => {
  await initBackend()
})
afterAll(() => client.shutdown())

async function losses(layout: Pick<TrainerConfigInput, 'mesh' | 'fsdp'>): Promise<number[]> {
  const model = createModel(config, 5)
  const trainer = new Trainer({ learningRate: 3e-2, batchSize: 4, seed: 2, ...layout }, { trackers: [] })
  const dataset = Dataset.fromTokens(tokens, { evalFraction: 0 })
  const r = await withClient(client, () => new Pipeline({ dataset, model, trainer, maxSteps: 8 }).run())
  model.dispose()
  return [...r.losses]
}

describe("a user's architecture on a mesh", () => {
  test('the definition records the module that registered it', async () => {
    expect(userArchitecture.module).toMatch(/test-support\/user-architecture\.ts$/)
    expect(await loadArchitecture(userArchitecture.type, userArchitecture.module)).toBe(userArchitecture)
    await expect(loadArchitecture('nowhere', 'file:///nonexistent/arch.ts')).rejects.toThrow(
      /architecture "nowhere": its module file:\/\/\/nonexistent\/arch\.ts does not load/,
    )
  })

  test('replica processes load it: { data: 2 }, { data: 2 } fsdp and { model: 2 } match one process', async () => {
    const one = await losses({})
    expect(one.at(-1)!).toBeLessThan(one[0]!)
    for (const layout of [{ mesh: { data: 2 } }, { mesh: { data: 2 }, fsdp: true }, { mesh: { model: 2 } }]) {
      const got = await losses(layout)
      expect(got).toHaveLength(one.length)
      got.forEach((l, i) => expect(Math.abs(l - one[i]!), `${JSON.stringify(layout)} step ${i}`).toBeLessThan(1e-4))
    }
  }, 180_000)
})
