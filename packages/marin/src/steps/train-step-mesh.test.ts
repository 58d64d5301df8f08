import { expect, test } from 'vitest'
import { isMarinError } from '../errors.js'
import { step } from '../executor/step.js'
import { versioned } from '../executor/versioned.js'
import { trainStep } from './train-step.js'

const tokens = step({ name: 'tokens', config: { n: versioned(1) }, fn: async () => ({}) })
const model = { type: 'gpt2' as const, vocabSize: 64, seqLen: 16, dModel: 32, nLayers: 1, nHeads: 2 }

test('trainStep takes the mesh and fsdp of levanter and versions them with the trainer', () => {
  const s = trainStep(tokens, {
    name: 'mesh-run',
    model,
    trainer: { batchSize: 4, mesh: { data: 2, model: 2 }, fsdp: true },
    maxSteps: 2,
  })
  expect(s.config.trainer.value).toMatchObject({ mesh: { data: 2, model: 2 }, fsdp: true })
})

test.each([
  [{ mesh: { data: 0 } }, /trainer\.mesh\.data/],
  [{ mesh: { model: 1.5 } }, /trainer\.mesh\.model/],
  [{ mesh: { data: 2, pipe: 2 } }, /trainer\.mesh\.pipe/],
  [{ fsdp: 'yes' }, /trainer\.fsdp/],
  [{ batchSize: 3, mesh: { data: 2 } }, /trainer\.batchSize 3 .*mesh\.data 2/],
])('a bad layout is BAD_CONFIG naming the field when the step is defined: %j', (trainer, field) => {
  expect(() => trainStep(tokens, { name: 'bad', model, trainer: trainer as never, maxSteps: 2 })).toThrow(
    expect.objectContaining({ code: 'BAD_CONFIG', message: expect.stringMatching(field) }),
  )
  expect(isMarinError(new Error('x'))).toBe(false)
})

test("the trainer config is checked with levanter's schema when the step is defined, every problem at once", () => {
  const define = (trainer: object) => () =>
    trainStep(tokens, { name: 'bad', model, trainer: trainer as never, maxSteps: 2 })
  // fields beyond the layout, which the hand-written check let through to the run
  expect(define({ learningRate: -1, schedule: { warmupStep: 5 } })).toThrow(
    'step bad: trainer.learningRate: Too small: expected number to be >0; ' +
      'trainer.schedule.warmupStep: Unrecognized key: "warmupStep"',
  )
  expect(define({ mesh: { data: 2, pipe: 2 } })).toThrow(
    'step bad: trainer.mesh.pipe: is not a mesh axis; the axes are data and model',
  )
})
