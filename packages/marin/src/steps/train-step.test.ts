import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, expect, test } from 'vitest'
import { openStore, storeUrl } from '@marin/finestore'
import { loadModel as loadLevanterModel } from '@marin/levanter'
import { configureLogging } from '@marin/rigging'
import { Executor } from '../executor/executor.js'
import { Experiment } from '../executor/experiment.js'
import { loadModel } from '../serve/load-model.js'
import { ingestStep, tokenizeStep } from './datakit-steps.js'
import { trainStep } from './train-step.js'

let root: string
beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'marin-train-step-'))
  configureLogging({ destination: { write: () => {} }, pretty: false })
})
afterAll(() => rmSync(root, { recursive: true, force: true }))

test("trainStep commits the exported model and the cache's tokenizer " +
  'straight into the model artifact, no folder in between', async () => {
  const src = join(root, 'corpus.txt')
  writeFileSync(
    src,
    Array.from(
      { length: 12 },
      (_, i) => `Sentence number ${i} talks about the harbor, the ferry and the bridge over the river.`,
    ).join('\n\n'),
  )
  const prefix = join(root, 'prefix')
  const tok = tokenizeStep(ingestStep({ name: 'toy', source: src, format: 'text', textUnit: 'paragraph' }), {
    name: 'toy-tokens',
    vocabSize: 300,
  })
  const train = trainStep(tok, {
    name: 'toy-lm',
    model: { type: 'gpt2', vocabSize: 300, seqLen: 16, dModel: 16, nLayers: 1, nHeads: 2 },
    trainer: { batchSize: 2, checkpointEvery: 2 },
    maxSteps: 2,
  })
  const rec = await new Executor({ prefix, leaseTtlMs: 2000 }).run(new Experiment({ name: 'train', steps: [train] }))
  expect(
    rec.steps.map((s) => `${s.name}:${s.status}`),
    JSON.stringify(rec.steps.map((s) => s.error)),
  ).toEqual(['toy:SUCCESS', 'toy-tokens:SUCCESS', 'toy-lm:SUCCESS'])
  const out = join(prefix, rec.steps[2]!.nameHash)
  expect(existsSync(join(out, 'hf'))).toBe(false)
  const arts = JSON.parse(readFileSync(join(out, 'artifacts.json'), 'utf8')) as {
    artifacts: { kind: 'artifact'; name: string; version: number }[]
    cache: string
    backend: { name: string }
  }
  expect(arts.artifacts[0]).toEqual({ kind: 'artifact', name: 'models/toy-lm', version: 1 })
  // The backend levanter trained on, for the report's provenance.
  expect(arts.backend).toMatchObject({ name: expect.stringMatching(/^(tensorflow|webgpu|wasm|cpu)$/) })
  // TensorBoard event files beside metrics.jsonl.
  expect(readdirSync(join(out, 'tensorboard')).some((f) => f.startsWith('events.out.tfevents.'))).toBe(true)
  const store = await openStore({ url: storeUrl(prefix) })
  const model = await store.open('models/toy-lm@1'),
    cache = await store.open(arts.cache)
  expect(model.files()).toEqual(['config.json', 'model.safetensors', 'tokenizer.json'])
  expect(model.entry('tokenizer.json')).toEqual(cache.entry('tokenizer.json')) // the same blob, not a copy
  const loaded = await loadModel({ checkpoint: 'models/toy-lm', prefix })
  // the last checkpoint: the weights training ended with
  const trained = await loadLevanterModel(`${arts.artifacts[1]!.name}@${arts.artifacts[1]!.version}`, { store })
  expect(trained.step).toBe(2)
  expect(await loaded.model.weights()).toEqual(await trained.model.weights())
  expect(loaded.tokenizer.decode(loaded.tokenizer.encode('the harbor'))).toBe('the harbor')
  store.close()
  loaded.model.dispose()
  trained.model.dispose()
}, 120_000)
