import { describe, expect, test } from 'vitest'
import { isLevanterError } from '../errors.js'
import { Gpt2LM, LlamaLM } from '../models/lm.js'
import { Dataset } from '../data/dataset.js'
import { Pipeline } from '../pipeline.js'
import { Trainer } from '../trainer.js'

const badConfig = (fn: () => unknown, field: RegExp) =>
  expect(fn).toThrow(expect.objectContaining({ code: 'BAD_CONFIG', message: expect.stringMatching(field) }))

describe('mesh and fsdp in the trainer config', () => {
  test('default to one process, unsharded', () => {
    const c = new Trainer({}).config
    expect(c.mesh).toEqual({ data: 1, model: 1 })
    expect(c.fsdp).toBe(false)
    expect(new Trainer({ mesh: { model: 2 } }).config.mesh).toEqual({ data: 1, model: 2 })
    expect(new Trainer({ mesh: { data: 2, model: 2 }, fsdp: true, batchSize: 4 }).config.fsdp).toBe(true)
  })

  test('bad values are BAD_CONFIG naming the field', () => {
    badConfig(() => new Trainer({ mesh: { data: 0 } }), /mesh\.data/)
    badConfig(() => new Trainer({ mesh: { model: 1.5 } }), /mesh\.model/)
    badConfig(() => new Trainer({ mesh: { data: 2, pipe: 2 } as never }), /mesh.*pipe/)
    badConfig(() => new Trainer({ fsdp: 'yes' as never }), /fsdp/)
    badConfig(() => new Trainer({ batchSize: 3, mesh: { data: 2 } }), /batchSize 3 must be a multiple of mesh.data 2/)
  })

  test('a model that does not split over mesh.model is refused before anything starts', () => {
    const data = Dataset.fromTokens([1, 2, 3, 4, 5, 6, 7, 8, 9], { evalFraction: 0 })
    const gpt = new Gpt2LM({ vocabSize: 11, seqLen: 4, dModel: 12, nLayers: 1, nHeads: 3 })
    badConfig(
      () => new Pipeline({ dataset: data, model: gpt, trainer: new Trainer({ mesh: { model: 2 } }), maxSteps: 1 }),
      /mesh\.model 2 must divide nHeads 3/,
    )
    const llama = new LlamaLM({ vocabSize: 11, seqLen: 4, dModel: 8, nLayers: 1, nHeads: 2, intermediateSize: 9 })
    badConfig(
      () => new Pipeline({ dataset: data, model: llama, trainer: new Trainer({ mesh: { model: 2 } }), maxSteps: 1 }),
      /mesh\.model 2 must divide the MLP width 9/,
    )
    const mqa = new LlamaLM({ vocabSize: 11, seqLen: 4, dModel: 8, nLayers: 1, nHeads: 2, nKvHeads: 1 })
    badConfig(
      () => new Pipeline({ dataset: data, model: mqa, trainer: new Trainer({ mesh: { model: 2 } }), maxSteps: 1 }),
      /mesh\.model 2 must divide nKvHeads 1/,
    )
    expect(isLevanterError(new Error('x'))).toBe(false)
  })
})
