/** @module Evaluation as an executor step: evaluate a checkpoint on tasks, store results in finestore, write them to
 * the step's output. The output, the store and a checkpoint folder may be in an object store (a prefix `s3://…`):
 * results go through the output's storage, and a checkpoint folder given as a URL is copied to this machine first. */
import { existsSync } from 'node:fs'
import { openStore, storeUrl, type Store } from '@marin/finestore'
import { marinPrefix, openStorage } from '@marin/rigging'
import { MarinError } from '../errors.js'
import { isOutputRef, step } from '../executor/step.js'
import { versioned } from '../executor/versioned.js'
import { mainArtifact, writeArtifacts } from '../steps/artifacts.js'
import { localCopies } from './remote-files.js'
import { formatArtifactRef, isArtifactRef, type ArtifactRef } from '../executor/artifacts.js'
import { serveProcess, type ServeProcess } from './serve-process.js'
import type { OutputRef, Step, StepContext } from '../executor/step.js'
import { evaluate, resolveTasks } from './evaluate.js'
import { OpenAICompletionsModel } from './openai-model.js'

/** What an evaluation step evaluates: a checkpoint (folder or artifact) in-process, or an endpoint. */
export type EvalStepConfig = {
  /**
   * A folder with config.json + model.safetensors, a finestore `ARTIFACT[@VERSION]` (`models/<name>`,
   * `checkpoints/<run>`),
   * or the artifact a step committed (`train.artifact()`; `train.output('artifacts.json')` reads the same).
   */
  readonly checkpoint?: string | OutputRef | ArtifactRef
  /** tokenizer.json, when the checkpoint holds none. */
  readonly tokenizer?: string | OutputRef
  /** An OpenAI-compatible base URL ending in /v1, instead of `checkpoint`. */
  readonly endpoint?: string
  /** @default 'default' */
  readonly model?: string
  /** Built-in task names, .jsonl task files, lm-evaluation-harness task .yaml files, names of tasks under
   * `lmEvalTasks`, and suites (`core`, `marin_core`). */
  readonly tasks: readonly string[]
  /** A folder of lm-evaluation-harness task YAML, searched for task names and suites. */
  readonly lmEvalTasks?: string
  /** Local datasets for lm-eval tasks: `<dataDir>/<dataset_path>/[<dataset_name>/]<split>.jsonl|.parquet`. */
  readonly dataDir?: string
  /** Few-shot examples before each lm-eval document, instead of the task's `num_fewshot` (not where it is 0). */
  readonly numFewshot?: number
  /** Seed of lm-eval's few-shot sampler. @default 1234 */
  readonly fewshotSeed?: number
  readonly limit?: number
  /** Items per built-in task. @default 200 */
  readonly size?: number
  /** finestore artifact for the results. @default 'eval/<step name>' */
  readonly artifact?: string
  /** Evaluate over HTTP: start `marin serve` on the checkpoint for the step's duration and send every request to it.
   * @default false */
  readonly serve?: boolean
}

/**
 * A step that evaluates and writes `results.json` (the summary plus the stored ref) and `artifacts.json` (the ref) to
 * its output.
 * Results go to the finestore under `options.prefix` (default `$MARIN_PREFIX`, else ./.marin); the prefix is not part
 * of the step's version.
 * @example evalStep('eval/tiny', { checkpoint: train.output('hf'), tasks: ['brown_cloze', 'brown_bpb'] })
 */
export function evalStep(name: string, config: EvalStepConfig, options: { readonly prefix?: string } = {}): Step {
  if (!config.checkpoint === !config.endpoint)
    throw new MarinError('BAD_STEP', `step ${name}: give exactly one of checkpoint and endpoint`)
  if (config.serve && !config.checkpoint)
    throw new MarinError(
      'BAD_STEP',
      `step ${name}: serve needs a checkpoint to serve; give checkpoint, or drop serve to use endpoint`,
    )
  // Every setting that changes the results counts toward the step's version; output references count through their
  // step.
  const v = <T>(x: T) => (isOutputRef(x) || x === undefined ? x : versioned(x))
  const versionedConfig = Object.fromEntries(Object.entries(config).map(([k, x]) => [k, v(x)])) as Record<
    string,
    unknown
  >
  return step({
    name,
    config: versionedConfig,
    description: `evaluate on ${config.tasks.join(', ')}${config.serve ? ' over HTTP (marin serve)' : ''}`,
    fn: async (resolved, ctx) => {
      const c = resolved as unknown as EvalStepConfig
      const prefix = options.prefix ? marinPrefix({ prefix: options.prefix }) : ctx.prefix
      const lmEval = {
        ...(c.lmEvalTasks !== undefined ? { tasksDir: c.lmEvalTasks } : {}),
        ...(c.dataDir !== undefined ? { dataDir: c.dataDir } : {}),
        ...(c.numFewshot !== undefined ? { numFewshot: c.numFewshot } : {}),
        ...(c.fewshotSeed !== undefined ? { fewshotSeed: c.fewshotSeed } : {}),
      }
      const tasks = await resolveTasks(c.tasks as string[], { size: c.size, lmEval })
      // The artifact a step committed (`trainStep` → `models/<name>@v`), as a reference or through its artifacts.json.
      const given = c.checkpoint as unknown
      const named = isArtifactRef(given)
        ? formatArtifactRef(given)
        : typeof given === 'string' && given.endsWith('artifacts.json')
          ? await mainArtifact(given)
          : (given as string | undefined)
      // A checkpoint folder or tokenizer in an object store (another step's output on an s3:// prefix) is read from
      // a copy on this machine, removed when the step ends.
      const copies = localCopies(prefix)
      const store = await openStore({ url: storeUrl(prefix) })
      try {
        const checkpoint =
          named === undefined ? undefined : await copies.local(named, 'folder', `step ${name}: checkpoint`)
        const tokenizer =
          c.tokenizer === undefined
            ? undefined
            : await copies.local(c.tokenizer as string, 'file', `step ${name}: tokenizer`)
        // An artifact reference (neither a path nor a URL) is the results' lineage.
        const lineage = named && named === checkpoint && !existsSync(named) ? [named] : []
        const label = named ?? c.endpoint
        return await evaluateWith(c, { name, prefix, checkpoint, tokenizer, label, lineage, store, tasks, ctx })
      } finally {
        store.close()
        await copies.remove()
      }
    },
  })
}

/** Loads or serves the model, evaluates it, and writes `results.json` and `artifacts.json` into the output. */
async function evaluateWith(
  c: EvalStepConfig,
  o: {
    name: string
    prefix: string
    checkpoint: string | undefined
    tokenizer: string | undefined
    /** The checkpoint as given (not its local copy). */
    label: string | undefined
    lineage: string[]
    store: Store
    tasks: Awaited<ReturnType<typeof resolveTasks>>
    ctx: StepContext
  },
): Promise<Record<string, unknown>> {
  const { name, prefix, checkpoint, tokenizer, ctx } = o
  let model
  let server: ServeProcess | undefined
  if (checkpoint && c.serve) {
    server = await serveProcess({ checkpoint, prefix, ...(tokenizer ? { tokenizer } : {}) })
    ctx.log.info({ url: server.baseUrl, pid: server.pid, checkpoint }, 'marin serve is up')
    model = new OpenAICompletionsModel({ baseUrl: server.baseUrl, model: server.name })
  } else if (checkpoint) {
    // The model stack loads only here, so that importing evalStep stays light.
    const [{ initBackend }, { loadModel }, { LocalLanguageModel }] = await Promise.all([
      import('@marin/levanter'),
      import('../serve/load-model.js'),
      import('./local-model.js'),
    ])
    await initBackend()
    const loaded = await loadModel({ checkpoint, prefix, ...(tokenizer ? { tokenizerPath: tokenizer } : {}) })
    model = new LocalLanguageModel(loaded.model, loaded.tokenizer, `local:${o.label}`)
  } else if (c.endpoint) {
    model = new OpenAICompletionsModel({ baseUrl: c.endpoint, model: c.model ?? 'default' })
  } else {
    throw new MarinError('BAD_CONFIG', `step ${name}: config needs checkpoint or endpoint; set one of them`)
  }
  let r
  try {
    r = await evaluate({
      model,
      tasks: o.tasks,
      limit: c.limit,
      store: o.store,
      artifact: c.artifact ?? `eval/${name.replace(/\//g, '-')}`,
      lineage: o.lineage,
    })
  } finally {
    await server?.close()
  }
  // Through the output's storage (a folder or an object store), each file written whole.
  const out = await openStorage(ctx.outputPath)
  await out.write('results.json', JSON.stringify({ ref: r.ref, ...r.summary }, null, 2) + '\n')
  // artifacts.json names the stored results (summary and per-sample records), as every step that commits does.
  if (r.ref) await writeArtifacts(ctx.outputPath, { artifacts: [r.ref] })
  ctx.log.info({ ref: r.ref }, 'evaluation stored')
  return { ref: r.ref, ...r.summary }
}
