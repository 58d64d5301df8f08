/**
 * @module Load a model from a folder or an artifact reference: a Hugging Face-style folder
 * (`config.json` + `model.safetensors`), an exported model artifact holding the same two files, or
 * a checkpoint artifact `checkpoints/<run>[@VERSION][:STEP]` (the newest kept step by default).
 * Files are read straight from the store, never copied out.
 */
import fs from 'node:fs'
import path from 'node:path'
import { isFinestoreError, openStore } from '@marin/finestore'
import type { ArtifactView, Store } from '@marin/finestore'
import { LevanterError } from '../errors.js'
import type { CausalLM } from '../models/lm.js'
import { modelFromCheckpoint } from './checkpointer.js'
import { importHf } from './hf.js'

export type LoadModelOptions = {
  /** The store artifact references are looked up in: a `Store`, or its URL or local path. */
  readonly store?: Store | string
  /** Refuse a model that needs more bytes than this to load; @default 75% of the free memory (model-fit.ts) */
  readonly maxBytes?: number
}

export type LoadedModel = {
  readonly model: CausalLM
  /** The folder's name, or the artifact's name (`checkpoints/` dropped). */
  readonly name: string
  /**
   * The version the model came from (other files of the artifact, such as a tokenizer, are read
   * from it); given when the store was passed as a `Store` (one opened here from a URL is closed).
   */
  readonly view?: ArtifactView
  /** The checkpoint step, for a checkpoint artifact. */
  readonly step?: number
}

const REF = /^([\w.\-/]+(?:@\w+)?)(?::(\d+))?$/

/** Loads a model from `source`: a folder, or `ARTIFACT[@VERSION][:STEP]` in `o.store`. */
export async function loadModel(source: string, o: LoadModelOptions = {}): Promise<LoadedModel> {
  if (fs.existsSync(source) && fs.statSync(source).isDirectory())
    return { model: await importHf(source, o), name: path.basename(path.resolve(source)) }
  const ref = REF.exec(source)
  if (!ref)
    throw new LevanterError(
      'BAD_CONFIG',
      `${source}: not a directory nor an artifact reference ARTIFACT[@VERSION][:STEP]`,
    )
  if (o.store === undefined)
    throw new LevanterError('BAD_CONFIG', `${source}: an artifact reference needs a store; pass { store }`)
  const store = typeof o.store === 'string' ? await openStore({ url: o.store }) : o.store
  const owned = typeof o.store === 'string'
  try {
    const view = await store.open(ref[1]!).catch((err: unknown) => {
      if (isFinestoreError(err, 'NOT_FOUND'))
        throw new LevanterError('CHECKPOINT_NOT_FOUND', `${source}: ${(err as Error).message}`, { cause: err })
      if (isFinestoreError(err, 'INVALID_REF') || isFinestoreError(err, 'INVALID_NAME')) {
        throw new LevanterError(
          'BAD_CONFIG',
          `${source}: not a directory nor an artifact reference (${(err as Error).message})`,
          { cause: err },
        )
      }
      throw err
    })
    const name = view.artifact.replace(/^checkpoints\//, ''),
      from = owned ? {} : { view }
    const weights = view.has('model.safetensors') || view.has('model.safetensors.index.json')
    if (ref[2] === undefined && view.has('config.json') && weights)
      return { model: await importHf(view, o), name, ...from }
    if (ref[2] === undefined && !view.metadata.steps)
      throw new LevanterError(
        'CHECKPOINT_NOT_FOUND',
        `${source}: holds neither config.json + model.safetensors nor levanter checkpoints`,
      )
    const { model, step } = await modelFromCheckpoint(
      view,
      ref[2] === undefined ? undefined : Number(ref[2]),
      o.maxBytes,
    )
    return { model, name, ...from, step }
  } finally {
    if (owned) store.close()
  }
}
