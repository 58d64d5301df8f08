/**
 * @module Load what `marin serve` serves: a model (through levanter's `loadModel`: a Hugging
 * Face-style directory, an exported model artifact, or a levanter checkpoint artifact
 * `checkpoints/<run>[@VERSION][:STEP]`) and its tokenizer. levanter's checkpoints do not record a
 * tokenizer, so one comes from the directory's or artifact's `tokenizer.json` if present (read
 * straight from the store), else from `tokenizerPath`. A `tokenizer_config.json` beside the
 * checkpoint's tokenizer supplies the chat template (`chat_template`, `bos_token`, `eos_token`).
 */
import fs from 'node:fs'
import path from 'node:path'
import { BpeTokenizer } from '@marin/datakit'
import { openStore, storeUrl } from '@marin/finestore'
import { isLevanterError, loadModel as loadLevanterModel } from '@marin/levanter'
import type { CausalLM } from '@marin/levanter'
import { marinPrefix } from '@marin/rigging'
import { MarinError } from '../errors.js'
import { chatTemplateFromConfig } from './chat-template.js'
import type { ChatTemplate } from './chat-template.js'

export type LoadedModel = {
  readonly name: string
  readonly model: CausalLM
  readonly tokenizer: BpeTokenizer
  /** From the checkpoint's `tokenizer_config.json`; none means ChatML. */
  readonly chatTemplate?: ChatTemplate
}

function parseConfig(text: string, file: string): ChatTemplate | undefined {
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch (err) {
    throw new MarinError('BAD_USAGE', `${file}: not valid JSON (${(err as Error).message})`, { cause: err })
  }
  return chatTemplateFromConfig(json, file)
}

export type LoadModelOptions = {
  /** A directory, or `ARTIFACT[@VERSION][:STEP]` in the store. */
  readonly checkpoint: string
  /** tokenizer.json to use when the checkpoint carries none (or to override it). */
  readonly tokenizerPath?: string
  /** Marin prefix whose `store/` holds artifacts. @default $MARIN_PREFIX or ./.marin */
  readonly prefix?: string
}

/** Loads a model and tokenizer for serving. */
export async function loadModel(o: LoadModelOptions): Promise<LoadedModel> {
  const src = o.checkpoint
  const usage = (err: unknown): never => {
    if (!isLevanterError(err, 'BAD_CONFIG') && !isLevanterError(err, 'CHECKPOINT_NOT_FOUND')) throw err
    throw new MarinError('BAD_USAGE', `--model-checkpoint ${err.message}`, { cause: err })
  }
  if (o.tokenizerPath !== undefined && !fs.existsSync(o.tokenizerPath))
    throw new MarinError('BAD_USAGE', `--tokenizer ${o.tokenizerPath}: no such file`)
  const noTokenizer = () =>
    new MarinError(
      'BAD_USAGE',
      `${src}: the checkpoint records no tokenizer.json; pass ` +
        `--tokenizer PATH (the tokenizer it was trained with)`,
    )
  if (fs.existsSync(src) && fs.statSync(src).isDirectory()) {
    const own = path.join(src, 'tokenizer.json'),
      file = o.tokenizerPath ?? (fs.existsSync(own) ? own : undefined)
    if (file === undefined) throw noTokenizer()
    const tokenizer = await BpeTokenizer.load(file)
    const cfg = path.join(src, 'tokenizer_config.json')
    const chatTemplate = fs.existsSync(cfg) ? parseConfig(fs.readFileSync(cfg, 'utf8'), cfg) : undefined
    const { model, name } = await loadLevanterModel(src).catch(usage)
    return { name, model, tokenizer, ...(chatTemplate ? { chatTemplate } : {}) }
  }
  const store = await openStore({ url: storeUrl(marinPrefix({ prefix: o.prefix })) })
  try {
    const { model, name, view } = await loadLevanterModel(src, { store }).catch(usage)
    try {
      let tokenizer: BpeTokenizer
      if (o.tokenizerPath !== undefined) tokenizer = await BpeTokenizer.load(o.tokenizerPath)
      else if (view?.has('tokenizer.json'))
        tokenizer = BpeTokenizer.fromJSON(
          JSON.parse(await view.readText('tokenizer.json')),
          `${view.ref} tokenizer.json`,
        )
      else throw noTokenizer()
      const chatTemplate = view?.has('tokenizer_config.json')
        ? parseConfig(await view.readText('tokenizer_config.json'), `${view.ref} tokenizer_config.json`)
        : undefined
      return { name, model, tokenizer, ...(chatTemplate ? { chatTemplate } : {}) }
    } catch (err) {
      model.dispose()
      throw err
    }
  } finally {
    store.close()
  }
}
