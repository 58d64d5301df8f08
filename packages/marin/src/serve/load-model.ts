/**
 * @module Load what `marin serve` serves: a model and its tokenizer from a Hugging Face-style
 * directory (`config.json`, `model.safetensors`, `tokenizer.json`) or a finestore artifact
 * `ARTIFACT[@VERSION]`, either a levanter checkpoint (`checkpoints/<run>`: the newest step) or an
 * exported directory. levanter's checkpoints do not record a tokenizer, so one comes from the
 * artifact's `tokenizer.json` if present, else from `tokenizerPath`.
 */
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { BpeTokenizer } from '@marin/datakit'
import { openStore, storeUrl } from '@marin/finestore'
import { createModel, decodeSafetensors, importHf } from '@marin/levanter'
import type { CausalLM, ModelConfigInput } from '@marin/levanter'
import { MarinError } from '../errors.js'

export type LoadedModel = { readonly name: string; readonly model: CausalLM; readonly tokenizer: BpeTokenizer }

export type LoadModelOptions = {
  /** A directory, or `ARTIFACT[@VERSION]` in the store. */
  readonly checkpoint: string
  /** tokenizer.json to use when the checkpoint carries none (or to override it). */
  readonly tokenizerPath?: string
  /** Marin prefix whose `store/` holds artifacts. @default $MARIN_PREFIX or ./.marin */
  readonly prefix?: string
}

async function tokenizerFrom(checkpoint: string, own: string | undefined, override: string | undefined): Promise<BpeTokenizer> {
  const file = override ?? own
  if (file === undefined) throw new MarinError('BAD_USAGE', `${checkpoint}: the checkpoint records no tokenizer.json; pass --tokenizer PATH (the tokenizer it was trained with)`)
  if (!fs.existsSync(file)) throw new MarinError('BAD_USAGE', `--tokenizer ${file}: no such file`)
  return BpeTokenizer.load(file)
}

/** Loads a model and tokenizer for serving. */
export async function loadModel(o: LoadModelOptions): Promise<LoadedModel> {
  const dir = o.checkpoint
  if (fs.existsSync(dir) && fs.statSync(dir).isDirectory()) {
    const own = path.join(dir, 'tokenizer.json')
    const tokenizer = await tokenizerFrom(dir, fs.existsSync(own) ? own : undefined, o.tokenizerPath)
    return { name: path.basename(path.resolve(dir)), model: await importHf(dir), tokenizer }
  }
  if (!/^[\w.\-/]+(@\w+)?$/.test(dir)) throw new MarinError('BAD_USAGE', `--model-checkpoint ${dir}: not a directory nor an artifact ref ARTIFACT[@VERSION]`)
  const store = await openStore({ url: storeUrl(o.prefix ?? process.env.MARIN_PREFIX ?? './.marin') })
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'marin-serve-'))
  try {
    const view = await store.open(dir).catch((err: unknown) => {
      throw new MarinError('BAD_USAGE', `--model-checkpoint ${dir}: ${(err as Error).message}`, { cause: err })
    })
    const files = view.files()
    let own: string | undefined
    if (files.includes('tokenizer.json')) await view.copyTo('tokenizer.json', (own = path.join(tmp, 'tokenizer.json')))
    const tokenizer = await tokenizerFrom(dir, own, o.tokenizerPath)
    const name = view.artifact.replace(/^checkpoints\//, '')
    if (files.includes('config.json') && files.includes('model.safetensors')) {
      for (const f of ['config.json', 'model.safetensors']) await view.copyTo(f, path.join(tmp, f))
      return { name, model: await importHf(tmp), tokenizer }
    }
    const steps = ((view.metadata.steps as number[] | undefined) ?? []).slice().sort((a, b) => a - b)
    const step = steps[steps.length - 1]
    if (step === undefined) throw new MarinError('BAD_USAGE', `--model-checkpoint ${dir}: holds neither config.json + model.safetensors nor levanter checkpoints`)
    const stepDir = `step-${String(step).padStart(9, '0')}`
    const manifest = JSON.parse(await view.readText(`${stepDir}/manifest.json`)) as { config: { model: ModelConfigInput } }
    const model = createModel(manifest.config.model)
    const { tensors } = decodeSafetensors(await view.read(`${stepDir}/model.safetensors`), `${dir} ${stepDir}/model.safetensors`)
    for (const [n, t] of tensors) model.set(n, t.data instanceof Float32Array ? t.data : Float32Array.from(t.data))
    return { name, model, tokenizer }
  } finally {
    store.close()
    fs.rmSync(tmp, { recursive: true, force: true })
  }
}
