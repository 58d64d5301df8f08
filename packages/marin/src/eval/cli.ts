/** @module `marin eval`: run evaluation tasks against a checkpoint (in-process) or an OpenAI-compatible endpoint. */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { Command } from 'commander'
import { UsageError } from '@marin/rigging/cli'
import { openStore, storeUrl } from '@marin/finestore'
import { initBackend } from '@marin/levanter'
import { intArg, prefixOf } from '../cli/io.js'
import type { CliIo, Run } from '../cli/io.js'
import { isMarinError } from '../errors.js'
import { BUILTIN_TASKS, builtinTask } from './brown-tasks.js'
import { evaluate, resolveTasks } from './evaluate.js'
import { DEFAULT_FEWSHOT_SEED, LM_EVAL_SUITES } from './lm-eval-task.js'
import type { LanguageModel } from './language-model.js'
import { loadModel } from '../serve/load-model.js'
import { LocalLanguageModel } from './local-model.js'
import { OpenAICompletionsModel } from './openai-model.js'
import { taskToJsonl } from './task.js'

type EvalOptions = {
  modelCheckpoint?: string
  tokenizer?: string
  endpoint?: string
  model?: string
  apiKeyFile?: string
  tasks: string
  limit?: number
  size?: number
  artifact: string
  store: boolean
  json?: boolean
  exportTasks?: string
  lmEvalTasks?: string
  dataDir?: string
  dataFiles?: string
  numFewshot?: number
  fewshotSeed?: number
}

/** Task problems the user can fix on the command line exit 2. */
async function usage<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn()
  } catch (err) {
    if (isMarinError(err, 'BAD_CONFIG')) throw new UsageError(err.message)
    throw err
  }
}

/** The `eval` command. */
export function evalCommand(cmd: Command, io: CliIo, run: Run): void {
  cmd
    .option(
      '--model-checkpoint <ref>',
      'a folder with config.json + model.safetensors, or a checkpoint artifact checkpoints/<run>[@version]',
    )
    .option('--tokenizer <path>', 'tokenizer.json for --model-checkpoint when the checkpoint holds none')
    .option('--endpoint <url>', 'an OpenAI-compatible base URL ending in /v1, instead of --model-checkpoint')
    .option('--model <name>', 'the model name sent to --endpoint', 'default')
    .option('--api-key-file <file>', 'a file holding the API key for --endpoint')
    .option(
      '--tasks <list>',
      `comma-separated built-in tasks (${BUILTIN_TASKS.join(', ')}), .jsonl task files, ` +
        'lm-evaluation-harness task .yaml files, names of tasks under --lm-eval-tasks, and suites ' +
        `(${Object.keys(LM_EVAL_SUITES).join(', ')})`,
      BUILTIN_TASKS.join(','),
    )
    .option('--lm-eval-tasks <dir>', 'a folder of lm-evaluation-harness task YAML, searched for task names and suites')
    .option(
      '--data-dir <dir>',
      'local datasets for lm-eval tasks: <dir>/<dataset_path>/[<dataset_name>/]<split>.jsonl or .parquet',
    )
    .option('--data-files <file>', 'a JSONL or Parquet file with the documents of the (single) lm-eval task')
    .option(
      '--num-fewshot <n>',
      "few-shot examples before each lm-eval document, instead of the task's num_fewshot (not where it is 0)",
      intArg('a count', 0),
    )
    .option(
      '--fewshot-seed <n>',
      "seed of lm-eval's few-shot sampler (Python's random.Random; default 1234, as lm-eval)",
      intArg('a seed', 0),
    )
    .option('--limit <n>', 'evaluate at most n items per task', intArg('a count'))
    .option('--size <n>', 'items in each built-in task (default 200)', intArg('a count'))
    .option('--artifact <name>', 'finestore artifact for the results', 'eval/results')
    .option('--no-store', 'do not store the results')
    .option('--json', 'print the summary as JSON')
    .option('--export-tasks <dir>', 'write the built-in tasks as <dir>/<task>.jsonl and exit')
    .action((o: EvalOptions) =>
      run(async () => {
        const specs = o.tasks
          .split(',')
          .map((s) => s.trim())
          .filter(Boolean)
        if (o.exportTasks) {
          mkdirSync(o.exportTasks, { recursive: true })
          for (const name of specs) {
            const t = await usage(async () => builtinTask(name, { size: o.size }))
            writeFileSync(join(o.exportTasks, `${name}.jsonl`), taskToJsonl(t))
            io.out(`${join(o.exportTasks, `${name}.jsonl`)}  ${t.items.length} items`)
          }
          return 0
        }
        if (!o.modelCheckpoint === !o.endpoint)
          throw new UsageError('eval: give exactly one of --model-checkpoint PATH|ARTIFACT and --endpoint URL')
        const lmEval = {
          ...(o.lmEvalTasks ? { tasksDir: o.lmEvalTasks } : {}),
          ...(o.dataDir ? { dataDir: o.dataDir } : {}),
          ...(o.dataFiles ? { dataFiles: o.dataFiles } : {}),
          ...(o.numFewshot !== undefined ? { numFewshot: o.numFewshot } : {}),
          ...(o.fewshotSeed !== undefined ? { fewshotSeed: o.fewshotSeed } : {}),
        }
        const tasks = await usage(() => resolveTasks(specs, { size: o.size, lmEval }))
        const store = await openStore({ url: storeUrl(prefixOf(io)) })
        let model: LanguageModel
        const lineage: string[] = []
        if (o.modelCheckpoint) {
          await initBackend()
          const loaded = await loadModel({
            checkpoint: o.modelCheckpoint,
            prefix: prefixOf(io),
            ...(o.tokenizer ? { tokenizerPath: o.tokenizer } : {}),
          })
          model = new LocalLanguageModel(loaded.model, loaded.tokenizer, `local:${o.modelCheckpoint}`)
          if (o.modelCheckpoint.startsWith('checkpoints/')) lineage.push(o.modelCheckpoint)
        } else {
          let apiKey: string | undefined
          if (o.apiKeyFile) {
            try {
              apiKey = readFileSync(o.apiKeyFile, 'utf8').trim()
            } catch {
              throw new UsageError(`eval: --api-key-file ${o.apiKeyFile} cannot be read; check the path`)
            }
          }
          model = new OpenAICompletionsModel({ baseUrl: o.endpoint!, model: o.model ?? 'default', apiKey })
        }
        const r = await evaluate({
          model,
          tasks,
          limit: o.limit,
          store: o.store ? store : undefined,
          artifact: o.artifact,
          lineage,
          config: {
            tasks: specs,
            limit: o.limit ?? null,
            model: model.description,
            numFewshot: o.numFewshot ?? null,
            fewshotSeed: o.fewshotSeed ?? DEFAULT_FEWSHOT_SEED,
          },
        })
        if (o.json) io.out(JSON.stringify({ ref: r.ref ?? null, ...r.summary }, null, 2))
        else {
          for (const [task, t] of Object.entries(r.summary.tasks)) {
            for (const [metric, m] of Object.entries(t.metrics))
              io.out(
                `${task.padEnd(20)} ${metric.padEnd(16)} ${m.value.toFixed(4)} ± ` +
                  `${m.stderr.toFixed(4)}  (n=${t.samples})`,
              )
          }
          if (r.ref) io.out(`stored ${r.ref}`)
        }
        return 0
      }),
    )
}
