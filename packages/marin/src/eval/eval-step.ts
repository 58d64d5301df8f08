/** @module Evaluation as an executor step: evaluate a checkpoint on tasks, store results in finestore, write them to the step's output. */
import { mkdir, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { openStore, storeUrl } from '@marin/finestore'
import { initBackend } from '@marin/levanter'
import { MarinError } from '../errors.js'
import { defaultPrefix } from '../executor.js'
import { step } from '../step.js'
import type { OutputRef, Step } from '../step.js'
import { evaluate, resolveTasks } from './evaluate.js'
import { loadModel } from '../serve/load-model.js'
import { LocalLanguageModel } from './local-model.js'
import { OpenAICompletionsModel } from './openai-model.js'

/** What an evaluation step evaluates: a checkpoint (folder or artifact) in-process, or an endpoint. */
export type EvalStepConfig = {
  /** A folder with config.json + model.safetensors (another step's output), or `checkpoints/<run>[@version]`. */
  readonly checkpoint?: string | OutputRef
  /** tokenizer.json, when the checkpoint holds none. */
  readonly tokenizer?: string | OutputRef
  /** An OpenAI-compatible base URL ending in /v1, instead of `checkpoint`. */
  readonly endpoint?: string
  /** @default 'default' */
  readonly model?: string
  /** Built-in task names and .jsonl task files. */
  readonly tasks: readonly string[]
  readonly limit?: number
  /** Items per built-in task. @default 200 */
  readonly size?: number
  /** finestore artifact for the results. @default 'eval/<step name>' */
  readonly artifact?: string
}

/**
 * A step that evaluates and writes `results.json` (the summary plus the stored ref) to its output.
 * Results go to the finestore under `options.prefix` (default `$MARIN_PREFIX`, else ./.marin); the prefix is not part of the step's version.
 * @example evalStep('eval/tiny', { checkpoint: train.output('hf'), tasks: ['brown_cloze', 'brown_bpb'] })
 */
export function evalStep(name: string, config: EvalStepConfig, options: { readonly prefix?: string } = {}): Step<EvalStepConfig> {
  if (!config.checkpoint === !config.endpoint) throw new MarinError('BAD_STEP', `step ${name}: give exactly one of checkpoint and endpoint`)
  return step({
    name,
    config,
    description: `evaluate on ${config.tasks.join(', ')}`,
    fn: async (c, ctx) => {
      const prefix = defaultPrefix(options.prefix)
      const store = await openStore({ url: storeUrl(prefix) })
      const tasks = await resolveTasks(c.tasks as string[], { size: c.size })
      const checkpoint = c.checkpoint as string | undefined
      let model
      if (checkpoint) {
        await initBackend()
        const tokenizerPath = c.tokenizer as string | undefined
        const loaded = await loadModel({ checkpoint, prefix, ...(tokenizerPath ? { tokenizerPath } : {}) })
        model = new LocalLanguageModel(loaded.model, loaded.tokenizer, `local:${checkpoint}`)
      } else if (c.endpoint) {
        model = new OpenAICompletionsModel({ baseUrl: c.endpoint, model: c.model ?? 'default' })
      } else {
        throw new MarinError('BAD_CONFIG', `step ${name}: config needs checkpoint or endpoint; set one of them`)
      }
      const r = await evaluate({ model, tasks, limit: c.limit, store, artifact: c.artifact ?? `eval/${name.replace(/\//g, '-')}`, lineage: checkpoint?.startsWith('checkpoints/') ? [checkpoint] : [] })
      await mkdir(ctx.outputPath, { recursive: true })
      await writeFile(join(ctx.outputPath, 'results.json'), JSON.stringify({ ref: r.ref, ...r.summary }, null, 2) + '\n')
      ctx.log.info({ ref: r.ref }, 'evaluation stored')
      return { ref: r.ref, ...r.summary }
    },
  })
}
