/** @module Load a levanter model and its tokenizer for in-process evaluation: a Hugging Face-style folder or a checkpoint artifact. */
import { existsSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { BpeTokenizer } from '@marin/datakit'
import type { Store } from '@marin/finestore'
import { createModel, decodeSafetensors, importHf } from '@marin/levanter'
import type { CausalLM, ModelConfigInput } from '@marin/levanter'
import { MarinError } from '../errors.js'

/**
 * A model from `source`: a folder with `config.json` + `model.safetensors` (`exportHf`), or a
 * finestore checkpoint artifact `checkpoints/<run>[@version]` (its newest kept step, or `step`).
 */
export async function loadCheckpointModel(source: string, store: Store | undefined, step?: number): Promise<CausalLM> {
  if (existsSync(source) && statSync(source).isDirectory()) return importHf(source)
  if (!store) throw new MarinError('BAD_CONFIG', `checkpoint ${source}: not a folder, and no store to look it up in; pass a folder or set --prefix`)
  let view
  try {
    view = await store.open(source)
  } catch (err) {
    throw new MarinError('BAD_CONFIG', `checkpoint ${source}: not a folder and not an artifact in the store (${(err as Error).message}); check --model-checkpoint`, { cause: err })
  }
  const steps = view.files().flatMap((f) => /^step-(\d+)\/model\.safetensors$/.exec(f)?.[1] ?? []).map(Number).sort((a, b) => a - b)
  const s = step ?? steps[steps.length - 1]
  if (s === undefined || !steps.includes(s)) throw new MarinError('BAD_CONFIG', `checkpoint ${view.ref}: no model at step ${s ?? '(any)'}; kept steps: ${steps.join(', ') || 'none'}`)
  const dir = `step-${String(s).padStart(9, '0')}`
  const manifest = JSON.parse(await view.readText(`${dir}/manifest.json`)) as { config: { model: ModelConfigInput } }
  const model = createModel(manifest.config.model)
  const { tensors } = decodeSafetensors(await view.read(`${dir}/model.safetensors`), `${view.ref} ${dir}/model.safetensors`)
  for (const [name, t] of tensors) model.set(name, t.data as Float32Array)
  return model
}

/** The tokenizer at `path` (a `tokenizer.json`, or a folder holding one). */
export async function loadTokenizer(path: string): Promise<BpeTokenizer> {
  const file = existsSync(path) && statSync(path).isDirectory() ? join(path, 'tokenizer.json') : path
  if (!existsSync(file)) throw new MarinError('BAD_CONFIG', `tokenizer ${file}: no such file; pass --tokenizer PATH/tokenizer.json`)
  return BpeTokenizer.load(file)
}
