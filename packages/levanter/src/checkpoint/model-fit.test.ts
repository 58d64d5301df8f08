/**
 * Configs someone else wrote (issue 33): a Hugging Face config.json or a checkpoint manifest that claims
 * more layers, a larger vocabulary or more memory than its weights and the machine hold is refused, naming
 * the field, before anything of the claimed size is allocated. Files are tiny and crafted here.
 */
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { openStore } from '@marin/finestore'
import type { Store } from '@marin/finestore'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { initBackend } from '../backend.js'
import { createModel } from '../models/lm.js'
import { Checkpointer } from './checkpointer.js'
import { exportHf, importHf } from './hf.js'
import { loadModel } from './load-model.js'

const FIXTURES = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../test-fixtures/hf-llama')
const tiny = { vocabSize: 13, seqLen: 8, dModel: 8, nLayers: 1, nHeads: 2 }
const root = fs.mkdtempSync(path.join(os.tmpdir(), 'lev-fit-'))
let gpt2Dir: string

beforeAll(async () => {
  await initBackend()
  gpt2Dir = path.join(root, 'gpt2')
  await exportHf(createModel({ type: 'gpt2', ...tiny }, 1), gpt2Dir)
})
afterAll(() => fs.rmSync(root, { recursive: true, force: true }))

/** A copy of folder `src` whose config.json is `edit`ed (or replaced by the text it returns). */
function variant(src: string, edit: (cfg: Record<string, unknown>) => unknown): string {
  const dir = fs.mkdtempSync(path.join(root, 'v-'))
  for (const f of fs.readdirSync(src)) fs.copyFileSync(path.join(src, f), path.join(dir, f))
  const cfg = JSON.parse(fs.readFileSync(path.join(src, 'config.json'), 'utf8'))
  const out = edit(cfg) ?? cfg
  fs.writeFileSync(path.join(dir, 'config.json'), typeof out === 'string' ? out : JSON.stringify(out))
  return dir
}

/** The error `p` rejects with, and how many ArrayBuffer bytes were allocated meanwhile. */
async function refusal(p: () => Promise<unknown>): Promise<{ err: Error & { code?: string }; grew: number }> {
  const before = process.memoryUsage().arrayBuffers
  const err = await p().then(
    () => new Error('loaded'),
    (e: Error) => e,
  )
  return { err, grew: process.memoryUsage().arrayBuffers - before }
}

const MiB = 2 ** 20

describe('Hugging Face config.json', () => {
  const cases: [string, () => string, RegExp][] = [
    [
      'gpt2 n_layer 1e6',
      () => variant(gpt2Dir, (c) => void (c.n_layer = 1e6)),
      /json: field "n_layer" is 1000000, a model of 12000004 tensors, but .* holds 16 \(at most 1 layer\)/,
    ],
    [
      'gpt2 vocab_size 1e9',
      () => variant(gpt2Dir, (c) => void (c.vocab_size = 1e9)),
      /"transformer\.wte\.weight" would be \[1000000000, 8\], .* \[13, 8\]; check field "vocab_size" \(1000000000\)$/,
    ],
    [
      'gpt2 n_positions 1e9',
      () => variant(gpt2Dir, (c) => void (c.n_positions = 1e9)),
      /tensor "transformer\.wpe\.weight" would be \[1000000000, 8\].*check field "n_positions"/,
    ],
    ['gpt2 n_layer -1', () => variant(gpt2Dir, (c) => void (c.n_layer = -1)), /config\.json: field "n_layer": /],
    [
      'llama num_hidden_layers 1e6',
      () => variant(path.join(FIXTURES, 'gqa-f32'), (c) => void (c.num_hidden_layers = 1e6)),
      /field "num_hidden_layers" is 1000000, a model of 9000003 tensors, but .* holds 21 \(at most 2 layers\)/,
    ],
    [
      'llama intermediate_size 1e9',
      () => variant(path.join(FIXTURES, 'gqa-f32'), (c) => void (c.intermediate_size = 1e9)),
      /"model\.layers\.0\.mlp\.gate_proj\.weight" would be \[32, 1000000000\].*check field "intermediate_size"/,
    ],
    [
      'llama num_key_value_heads of another width',
      () => variant(path.join(FIXTURES, 'gqa-f32'), (c) => void (c.num_key_value_heads = 1)),
      /k_proj\.weight" would be \[32, 8\], .* \[32, 16\]; check field "num_attention_heads" \(4\) or "num_key_value_h/,
    ],
    ['not JSON', () => variant(gpt2Dir, () => '{ "model_type": "gpt2", oops'), /config\.json: not JSON \(/],
    ['a JSON array', () => variant(gpt2Dir, () => '[1, 2]'), /config\.json: not a JSON object/],
  ]
  test.each(cases)('%s: BAD_CONFIG naming the file and the field, nothing allocated', async (_name, dir, message) => {
    const { err, grew } = await refusal(() => importHf(dir()))
    expect(err).toMatchObject({ name: 'LevanterError', code: 'BAD_CONFIG' })
    expect(err.message).toMatch(message)
    expect(grew).toBeLessThan(16 * MiB) // the claimed model is 100s of GiB; its headers and config are bytes
  })

  test('a model larger than the memory allowed is refused before it is read, naming its size', async () => {
    const { err, grew } = await refusal(() => loadModel(gpt2Dir, { maxBytes: 1000 }))
    expect(err).toMatchObject({ code: 'BAD_CONFIG' })
    expect(err.message).toMatch(
      /config\.json: the model it describes \(n_layer 1, n_embd 8, vocab_size 13: 1056 parameters\)/,
    )
    expect(err.message).toMatch(/needs \d+ bytes to load, more than the 1000 bytes allowed \(maxBytes\)/)
    expect(grew).toBeLessThan(MiB)
    await expect(loadModel(gpt2Dir)).resolves.toMatchObject({ name: 'gpt2' }) // the default budget: free memory
  })

  test('from a finestore view: the same refusal, naming the version and the file', async () => {
    const store = await openStore({ url: path.join(root, 'store-hf') })
    const m = createModel({ type: 'gpt2', ...tiny }, 2)
    await store.commit('models/huge', async (txn) => {
      await exportHf(m, txn)
      const cfg = JSON.parse(fs.readFileSync(path.join(gpt2Dir, 'config.json'), 'utf8'))
      await txn.put('config.json', JSON.stringify({ ...cfg, n_layer: 1e6 }))
    })
    const { err, grew } = await refusal(() => loadModel('models/huge', { store }))
    expect(err).toMatchObject({ code: 'BAD_CONFIG' })
    expect(err.message).toMatch(/^models\/huge@1 config\.json: field "n_layer" is 1000000/)
    expect(grew).toBeLessThan(16 * MiB)
    store.close()
  })
})

describe('levanter checkpoint manifests', () => {
  let store: Store
  const step = 'step-000000001'
  beforeAll(async () => {
    store = await openStore({ url: path.join(root, 'store-ck') })
  })
  afterAll(() => store.close())

  /** A checkpoint artifact `checkpoints/<run>` of a tiny model whose step-1 manifest is then `edit`ed. */
  async function doctored(run: string, edit: (manifest: Record<string, unknown>) => void): Promise<void> {
    const m = createModel({ type: 'llama', ...tiny }, 3)
    const ck = await Checkpointer.open({ store, run })
    const manifest = {
      step: 1,
      dataPosition: 0,
      rng: { seed: 0 },
      optimizerCount: 0,
      config: { model: m.config, trainer: {} },
      metrics: {},
    }
    const shapes = new Map(m.specs.map((s) => [s.name, s.shape]))
    await ck.save(manifest, { weights: await m.weights(), optimizer: new Map(), count: 0 }, shapes)
    const bad = JSON.parse(JSON.stringify(manifest)) as Record<string, unknown>
    edit(bad)
    await store.commit(
      `checkpoints/${run}`,
      async (txn) => {
        await txn.put(`${step}/manifest.json`, JSON.stringify(bad))
        txn.setMetadata({ latest: 1, steps: [1] })
      },
      { inherit: true },
    )
    m.dispose()
  }
  const model = (m: Record<string, unknown>) => (m.config as { model: Record<string, unknown> }).model

  const cases: [string, (m: Record<string, unknown>) => void, string, RegExp][] = [
    [
      'nLayers 1e6',
      (m) => void (model(m).nLayers = 1e6),
      'BAD_CONFIG',
      /json: field "config\.model\.nLayers" is 1000000, a model of 9000003 tensors, .* 12 \(at most 1 layer\)/,
    ],
    [
      'vocabSize 1e9',
      (m) => void (model(m).vocabSize = 1e9),
      'BAD_CONFIG',
      /"model\.embed_tokens\.weight" would be \[1000000000, 8\].*check field "config\.model\.vocabSize"/,
    ],
    [
      'no model config',
      (m) => void (m.config = null),
      'BAD_CHECKPOINT',
      /manifest\.json: has no "config\.model" object/,
    ],
    [
      'a mesh of 1e9 members',
      (m) => void (m.mesh = { data: 1e9, model: 1, fsdp: false, layout: [] }),
      'BAD_CHECKPOINT',
      /manifest\.json: "mesh" has 1000000000 members, more than the version's 3 files/,
    ],
    [
      'a mesh parameter claiming [1e9, 8]',
      (m) =>
        void (m.mesh = {
          data: 1,
          model: 1,
          fsdp: false,
          layout: [{ name: 'model.norm.weight', shape: [1e9, 8], split: { kind: 'replicated' }, size: 8, owned: 8 }],
        }),
      'BAD_CHECKPOINT',
      /"mesh" parameter "model\.norm\.weight" has shape \[1000000000, 8\] but parts of 8 floats/,
    ],
  ]
  test.each(cases)('%s: refused naming the manifest, nothing allocated', async (name, edit, code, message) => {
    const run = name.replace(/\W+/g, '-')
    await doctored(run, edit)
    const { err, grew } = await refusal(() => loadModel(`checkpoints/${run}`, { store }))
    expect(err).toMatchObject({ name: 'LevanterError', code })
    expect(err.message).toMatch(new RegExp(`^checkpoints/${run}@2 `))
    expect(err.message).toMatch(message)
    expect(grew).toBeLessThan(16 * MiB)
  })

  test('resuming from a manifest whose mesh is damaged fails naming it, not by allocating', async () => {
    await doctored('mesh-resume', (m) => void (m.mesh = { data: 1e9, model: 1, fsdp: false, layout: [] }))
    const ck = await Checkpointer.open({ store, run: 'mesh-resume' })
    await expect(ck.load()).rejects.toMatchObject({
      code: 'CHECKPOINT_DAMAGED',
      message: expect.stringMatching(/step-000000001: .*"mesh" has 1000000000 members/),
    })
  })
})
