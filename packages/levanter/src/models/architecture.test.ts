import * as tf from '@tensorflow/tfjs'
import { beforeAll, describe, expect, test } from 'vitest'
import { z } from 'zod'
import { initBackend } from '../backend.js'
import { Dataset } from '../data/dataset.js'
import { generate } from '../generate.js'
import { maskCount } from '../data/batch.js'
import { isLevanterError } from '../errors.js'
import { checkModelAxis, cutForMember, joinModelParts, localParams } from '../parallel/layout.js'
import { heldWeights, stagesOf, sumInto, tensorParallelGrads } from '../parallel/tensor-parallel.js'
import type { ModelAllReduce } from '../parallel/tensor-parallel.js'
import { Pipeline } from '../pipeline.js'
import { computeGrads } from '../train-step.js'
import { Trainer } from '../trainer.js'
import { CausalLM } from './causal-lm.js'
import { ModelConfig, modelConfigFields } from './config.js'
import { lastPosition, linear } from './layers.js'
import type { ForwardArgs, ForwardResult } from './layers.js'
import { createModel, specsOf } from './lm.js'
import { mat, ones } from './param-spec.js'
import { architectureOf, defineArchitecture, registerArchitecture, registeredArchitectures } from './registry.js'
import { residual } from './stages.js'

// A third architecture, defined here as a user would: token embedding, one residual ReLU MLP per
// layer (split over the model axis by columns then rows), a scaled norm, an untied head.
const TinyConfig = z.strictObject({
  type: z.literal('tiny-mlp'),
  ...modelConfigFields,
  hidden: z.number().int().positive().default(8).describe('MLP width'),
})
type TinyConfig = z.output<typeof TinyConfig>

const tinySpecs = (c: TinyConfig) => [
  mat('embed.weight', [c.vocabSize, c.dModel], c.initStd),
  ...Array.from({ length: c.nLayers }, (_, i) => [
    ones(`layers.${i}.scale`, c.dModel),
    mat(`layers.${i}.up.weight`, [c.dModel, c.hidden], c.initStd, 'column'),
    mat(`layers.${i}.down.weight`, [c.hidden, c.dModel], c.initStd, 'row'),
  ]).flat(),
  mat('head.weight', [c.dModel, c.vocabSize], c.initStd),
]

const block = (x: tf.Tensor, scale: tf.Tensor, up: tf.Tensor, down: tf.Tensor) =>
  linear(tf.relu(linear(tf.mul(x, scale), up)), down)

function tinyForward(c: TinyConfig, ...[p, ids, _at, _past, lastOnly = false]: ForwardArgs): ForwardResult {
  const [B, T] = ids.shape as [number, number]
  let x = tf.reshape(tf.gather(p('embed.weight'), tf.reshape(ids, [-1])), [B, T, c.dModel])
  for (let i = 0; i < c.nLayers; i++) {
    const w = (n: string) => p(`layers.${i}.${n}`)
    x = tf.add(x, block(x, w('scale'), w('up.weight'), w('down.weight')))
  }
  return { logits: linear(lastOnly ? lastPosition(x) : x, p('head.weight')), kv: [] }
}

class TinyLM extends CausalLM<TinyConfig> {
  constructor(c: TinyConfig, seed: number) {
    super(c, tinySpecs(c), seed)
  }
  protected run(...args: ForwardArgs): ForwardResult {
    return tinyForward(this.config, ...args)
  }
}

const tinyArchitecture = defineArchitecture({
  type: 'tiny-mlp',
  config: TinyConfig,
  specs: tinySpecs,
  create: (c: TinyConfig, seed: number) => new TinyLM(c, seed),
  flopsPerToken: (c, _seqLen, numParams) => 6 * (numParams - c.vocabSize * c.dModel), // the lookup is no matmul
  modelAxis: (c) => [{ label: 'hidden', value: c.hidden, what: 'the MLP columns are split over it' }],
  stages: (c, _model, lead) => ({
    embed: {
      names: ['embed.weight'],
      split: false,
      fn: (ids, [w]) => {
        const [B, T] = ids.shape as [number, number]
        return tf.reshape(tf.gather(w!, tf.reshape(ids, [-1])), [B, T, c.dModel])
      },
    },
    blocks: Array.from({ length: c.nLayers }, (_, i) => ({
      names: ['scale', 'up.weight', 'down.weight'].map((n) => `layers.${i}.${n}`),
      split: true,
      fn: (x: tf.Tensor, [s, u, d]: tf.Tensor[]) => residual(lead, x, block(x, s!, u!, d!)),
    })),
    head: { names: ['head.weight'], split: false, fn: (x, [w]) => linear(x, w!) },
  }),
  module: import.meta.url,
})
registerArchitecture(tinyArchitecture)

const config = { type: 'tiny-mlp', vocabSize: 11, seqLen: 8, dModel: 8, nLayers: 2, nHeads: 4, hidden: 6 }
const tokens = Array.from({ length: 800 }, (_, i) => (i * 3) % 10)

beforeAll(async () => {
  await initBackend()
})

describe('an architecture is a value', () => {
  test('a registered user architecture builds from its config type and trains in one process', async () => {
    expect(registeredArchitectures()).toContain('tiny-mlp')
    expect(architectureOf('tiny-mlp')).toBe(tinyArchitecture)
    const model = createModel(config, 1)
    expect(model).toBeInstanceOf(TinyLM)
    expect(model.config).toMatchObject({ hidden: 6, initStd: 0.02 })
    const trainer = new Trainer({ learningRate: 0.1, batchSize: 4, logEvery: 100 }, { trackers: [] })
    const dataset = Dataset.fromTokens(tokens, { evalFraction: 0 })
    const r = await new Pipeline({ dataset, model, trainer, maxSteps: 30 }).run()
    expect(r.losses).toHaveLength(30)
    expect(r.losses.at(-1)!).toBeLessThan(r.losses[0]! * 0.7)
    model.dispose()
  })

  test('a user architecture without attention (its forward caches no layers) generates with the cache', () => {
    const model = createModel(config, 2)
    const prompt = [1, 4, 7]
    const cached = generate(model, prompt, { maxNewTokens: 4 })
    expect(cached.tokens).toHaveLength(4)
    expect(cached).toEqual(generate(model, prompt, { maxNewTokens: 4, useCache: false }))
    model.dispose()
  })

  test('specs, sharding and FLOPs come from the definition', () => {
    const specs = specsOf(config)
    expect(specs.map((s) => s.name)).toEqual([
      'embed.weight',
      'layers.0.scale',
      'layers.0.up.weight',
      'layers.0.down.weight',
      'layers.1.scale',
      'layers.1.up.weight',
      'layers.1.down.weight',
      'head.weight',
    ])
    const parsed = ModelConfig.parse(config)
    const layout = localParams(parsed, specs, { data: 1, model: 2 }, false)
    const by = new Map(layout.map((lp) => [lp.name, lp]))
    expect(by.get('layers.0.up.weight')).toMatchObject({ split: { kind: 'cols', groups: 1 }, local: [8, 3] })
    expect(by.get('layers.0.down.weight')).toMatchObject({ split: { kind: 'rows' }, local: [3, 8] })
    expect(by.get('embed.weight')).toMatchObject({ split: { kind: 'replicated' }, local: [11, 8], partial: false })
    // the scale is replicated but used inside a split stage: its gradient adds up over the model axis
    expect(by.get('layers.1.scale')).toMatchObject({ split: { kind: 'replicated' }, partial: true })
    expect(() => checkModelAxis(parsed, 4)).toThrow(/mesh\.model 4 must divide hidden 6/)
    expect(() => checkModelAxis(parsed, 2)).not.toThrow()
    const model = createModel(config)
    const matmul = 2 * (8 * 6 + 6 * 8 + 8) + 8 * 11
    expect(model.numParams()).toBe(11 * 8 + matmul)
    expect(model.flopsPerToken(8)).toBe(6 * matmul)
    model.dispose()
  })

  test("two tensor-parallel members running the definition's stages give the full model's gradients", async () => {
    const model = createModel(config, 2)
    const batch = await Dataset.fromTokens(tokens, { evalFraction: 0 }).trainBatch(0, 2, 8, 0)
    const denominator = maskCount(batch)
    const full = computeGrads(model, batch, denominator)
    const parsed = ModelConfig.parse(config)
    const mesh = { data: 1, model: 2 }
    const layout = localParams(parsed, model.specs, mesh, false)
    const weights = await model.weights()
    // an all-reduce over two members in this process
    let waiting: { x: Float32Array; done: (s: Float32Array) => void } | undefined
    const allReduce: ModelAllReduce = (x) =>
      new Promise((done) => {
        if (!waiting) {
          waiting = { x, done }
          return
        }
        const sum = x.map((v, i) => v + waiting!.x[i]!)
        waiting.done(sum.slice())
        waiting = undefined
        done(sum)
      })
    const grads = [new Map<string, Float32Array>(), new Map<string, Float32Array>()]
    const losses = await Promise.all(
      [0, 1].map((rank) => {
        const part = cutForMember({ weights, optimizer: new Map(), count: 0 }, layout, mesh, false, rank)
        const held = new Map(
          [...part.weights].map(([n, d]) => [n, tf.tensor(d, [...layout.find((l) => l.name === n)!.local])]),
        )
        const stages = stagesOf(parsed, 2, rank === 0)
        return tensorParallelGrads(stages, heldWeights(held), batch, denominator, 1, allReduce, sumInto(grads[rank]!))
      }),
    )
    expect(losses[0]).toBeCloseTo(full.loss, 5)
    for (const lp of layout) {
      const want = (await full.grads.get(lp.name)!.data()) as Float32Array
      const parts = grads.map((g) => g.get(lp.name)!)
      const got = lp.partial ? parts[0]!.map((v, i) => v + parts[1]![i]!) : joinModelParts(parts, lp.shape, lp.split)
      let diff = 0
      for (let i = 0; i < want.length; i++) diff = Math.max(diff, Math.abs(want[i]! - got[i]!))
      expect(diff, lp.name).toBeLessThan(1e-5)
    }
    tf.dispose([...full.grads.values()])
    model.dispose()
  })

  test('an unregistered type is a clear BAD_CONFIG naming it and the registered ones', () => {
    let err: unknown
    try {
      createModel({ type: 'mamba', vocabSize: 11 })
    } catch (e) {
      err = e
    }
    expect(isLevanterError(err) && err.code).toBe('BAD_CONFIG')
    expect(String(err)).toMatch(
      /type "mamba" is not a registered architecture \(registered: gpt2, llama, mixtral, qwen3, tiny-mlp\)/,
    )
    expect(() => specsOf({ type: 'mamba', vocabSize: 11 })).toThrow(/"mamba".*registerArchitecture/)
    expect(ModelConfig.safeParse({ type: 'mamba', vocabSize: 11 }).success).toBe(false)
    // another value under a registered type is refused; the same one again is not
    expect(() => registerArchitecture({ ...tinyArchitecture })).toThrow(/"tiny-mlp" is already registered/)
    expect(() => registerArchitecture(tinyArchitecture)).not.toThrow()
    expect(() => defineArchitecture({ ...tinyArchitecture, type: 'bad type' })).toThrow(/must be a name/)
  })
})
