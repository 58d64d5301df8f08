/**
 * @module The add-an-architecture guide (docs/guides/add-an-architecture.md): a model of your own, defined in
 * this file, registered by its `type`, trained by levanter like a built-in one, exported in Hugging Face's
 * format for `marin serve`. `GUIDE_SCALE=tiny` makes it small enough for a test.
 */
import { trainBpe } from '@marin/datakit'
import { CausalLM, Dataset, Pipeline, Trainer, createModel, exportHf, generate, initBackend } from '@marin/levanter'
import { defineArchitecture, modelConfigFields, registerArchitecture, residual } from '@marin/levanter'
import type { ForwardArgs, ForwardResult, ModelConfigInput, ParamSpec } from '@marin/levanter'
import * as tf from '@tensorflow/tfjs'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { z } from 'zod'

const tiny = process.env.GUIDE_SCALE === 'tiny'
const TYPE = 'guide-gated-mlp'

// 1. The config: the fields every architecture shares, and this one's own `hidden` (zod, a root dependency).
const GuideConfig = z.strictObject({
  type: z.literal(TYPE),
  ...modelConfigFields,
  hidden: z.number().int().positive().default(32).describe('MLP width'),
})
type GuideConfig = z.output<typeof GuideConfig>
// Its fields as its Hugging Face config.json spells them.
const HF_FIELDS = {
  vocabSize: 'vocab_size',
  seqLen: 'max_position_embeddings',
  dModel: 'hidden_size',
  nLayers: 'num_hidden_layers',
  nHeads: 'num_attention_heads',
  hidden: 'intermediate_size',
  initStd: 'initializer_range',
} as const satisfies Partial<Record<keyof GuideConfig, string>>

// 2. The parameters, in order, each with its init and its split over the model axis (tensor parallelism).
const block = (i: number) => ['norm', 'gate.weight', 'up.weight', 'down.weight'].map((n) => `blocks.${i}.${n}`)
const specs = (c: GuideConfig): ParamSpec[] => [
  { name: 'tok.weight', shape: [c.vocabSize, c.dModel], init: { std: c.initStd }, decay: true },
  ...Array.from({ length: c.nLayers }, (_, i): ParamSpec[] => {
    const [norm, gate, up, down] = block(i) as [string, string, string, string]
    return [
      { name: norm, shape: [c.dModel], init: 'ones', decay: false },
      { name: gate, shape: [c.dModel, c.hidden], init: { std: c.initStd }, decay: true, shard: 'column' },
      { name: up, shape: [c.dModel, c.hidden], init: { std: c.initStd }, decay: true, shard: 'column' },
      { name: down, shape: [c.hidden, c.dModel], init: { std: c.initStd }, decay: true, shard: 'row' },
    ]
  }).flat(),
  { name: 'out.weight', shape: [c.dModel, c.vocabSize], init: { std: c.initStd }, decay: true },
]

// 3. The computation: x [B, T, D] · w [D, F] → [B, T, F]; a block is a gated MLP without its residual.
const dense = (x: tf.Tensor, w: tf.Tensor) => {
  const [B, T, D] = x.shape as [number, number, number]
  return tf.reshape(tf.matMul(tf.reshape(x, [B * T, D]), w), [B, T, w.shape[1]!])
}
const gated = (x: tf.Tensor, [norm, gate, up, down]: tf.Tensor[]) => {
  const h = tf.mul(x, norm!)
  return dense(tf.mul(tf.sigmoid(dense(h, gate!)), dense(h, up!)), down!)
}
const embed = (c: GuideConfig, ids: tf.Tensor, table: tf.Tensor) => {
  const [B, T] = ids.shape as [number, number]
  return tf.reshape(tf.gather(table, tf.reshape(ids, [-1])), [B, T, c.dModel])
}

// 4. The model: a CausalLM whose `run` reads each parameter by name through `p`.
class GuideLM extends CausalLM<GuideConfig> {
  constructor(c: GuideConfig, seed: number) {
    super(c, specs(c), seed)
  }
  protected run(...[p, ids, _at, _past, lastOnly = false]: ForwardArgs): ForwardResult {
    let x = embed(this.config, ids, p('tok.weight'))
    for (let i = 0; i < this.config.nLayers; i++) x = tf.add(x, gated(x, block(i).map(p)))
    if (lastOnly) x = tf.slice(x, [0, x.shape[1]! - 1, 0], [-1, 1, -1])
    return { logits: dense(x, p('out.weight')), kv: [] }
  }
}

// 5. The architecture as a value. `stages` and `modelAxis` let it train on { model: n } meshes; `hf` names its
// Hugging Face files; `module` lets processes that receive only the config (mesh members, `marin serve`) import
// this file to find it.
export const guideArchitecture = defineArchitecture({
  type: TYPE,
  config: GuideConfig,
  specs,
  create: (c: GuideConfig, seed: number) => new GuideLM(c, seed),
  // 6 FLOPs per matmul parameter and token (the embedding is a lookup); no attention
  flopsPerToken: (c, _seqLen, numParams) => 6 * (numParams - c.vocabSize * c.dModel),
  modelAxis: (c) => [{ label: 'hidden', value: c.hidden, what: 'the MLP columns are split over it' }],
  stages: (c, _model, lead) => ({
    embed: { names: ['tok.weight'], split: false, fn: (ids, [table]) => embed(c, ids, table!) },
    blocks: Array.from({ length: c.nLayers }, (_, i) => ({
      names: block(i),
      split: true,
      fn: (x: tf.Tensor, w: tf.Tensor[]) => residual(lead, x, gated(x, w)),
    })),
    head: { names: ['out.weight'], split: false, fn: (x, [w]) => dense(x, w!) },
  }),
  hf: {
    modelType: TYPE,
    className: 'GuideGatedMlpForCausalLM',
    fields: new Map(Object.entries(HF_FIELDS)),
    toConfig: (c) => ({
      architectures: ['GuideGatedMlpForCausalLM'],
      model_type: TYPE,
      ...Object.fromEntries(
        Object.entries(HF_FIELDS).map(([ours, theirs]) => [theirs, c[ours as keyof typeof HF_FIELDS]]),
      ),
    }),
    fromConfig: (j, file) => {
      const c: Record<string, unknown> = { type: TYPE }
      for (const [ours, theirs] of Object.entries(HF_FIELDS)) {
        if (j[theirs] === undefined) throw new Error(`${file}: has no "${theirs}"; export the model again`)
        c[ours] = j[theirs]
      }
      return c as ModelConfigInput
    },
    // stored as PyTorch's nn.Linear holds them, [out, in]; [in, out] here
    transposed: (name) => name !== 'tok.weight' && name.endsWith('.weight'),
  },
  module: import.meta.url,
})
registerArchitecture(guideArchitecture)

// 6. From here on it is a model config like any other: build it, train it, read its loss, export it. Only when
// this file is the program: processes that import it for the definition above must not train. The layouts named
// train in turn, each from the same seed (`one data fsdp model`: all four); `--export DIR` exports the first's model.
async function main(args = process.argv.slice(2)) {
  const layouts = {
    one: {},
    data: { mesh: { data: 2 } },
    fsdp: { mesh: { data: 2 }, fsdp: true },
    model: { mesh: { model: 2 } },
  }
  const at = args.indexOf('--export')
  const named = at < 0 ? args : args.slice(0, at)
  const dir = at < 0 ? undefined : args[at + 1]
  for (const layout of named)
    if (!(layout in layouts))
      throw new Error(`add-an-architecture: layout "${layout}" is not one of ${Object.keys(layouts).join(', ')}`)
  if (at >= 0 && (dir === undefined || args.length !== at + 2))
    throw new Error('add-an-architecture: after the layouts, only --export DIR (the folder to write)')
  await initBackend()
  // Text, in bytes: a byte-level tokenizer (256 ids, no merges) is what `marin serve` reads and writes it with.
  const text = 'the quick brown fox jumps over the lazy dog. '.repeat(100)
  const tokenizer = trainBpe([text], { vocabSize: 256 })
  const tokens = tokenizer.encode(text)
  for (const [i, layout] of (named.length > 0 ? named : ['one']).entries()) {
    const dataset = Dataset.fromTokens(tokens, { evalFraction: 0 })
    const model = createModel({ type: TYPE, vocabSize: 256, seqLen: 16, dModel: tiny ? 16 : 64, nLayers: 2, nHeads: 2 })
    const trainer = new Trainer(
      { learningRate: 3e-2, batchSize: 8, logEvery: 100, ...layouts[layout as keyof typeof layouts] },
      { trackers: [] },
    )
    const { losses } = await new Pipeline({ dataset, model, trainer, maxSteps: tiny ? 20 : 200 }).run()
    if (i === 0) console.log(`${TYPE}: ${model.numParams()} parameters, ${model.flopsPerToken(16)} FLOPs per token`)
    console.log(`${layout}: loss ${losses[0]!.toFixed(3)} → ${losses.at(-1)!.toFixed(3)} in ${losses.length} steps`)
    if (i === 0 && dir !== undefined) {
      await exportHf(model, dir) // config.json and model.safetensors, through `hf` above
      writeFileSync(join(dir, 'tokenizer.json'), JSON.stringify(tokenizer.toJSON()))
      const { tokens: next } = generate(model, tokenizer.encode('the quick'), { maxNewTokens: 6, temperature: 0 })
      console.log(`exported to ${dir}; generate: "the quick" → ${JSON.stringify(tokenizer.decode(next))}`)
    }
    model.dispose()
  }
}
if (process.argv[1] === fileURLToPath(import.meta.url)) await main()
