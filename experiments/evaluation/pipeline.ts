/**
 * The evaluation experiment: serve a trained checkpoint with `marin serve`'s server, run the task
 * suite against it over the OpenAI-compatible API, store the results in finestore and print them.
 *
 * `EVAL_CHECKPOINT=DIR|checkpoints/<run>[@v]` (and `EVAL_TOKENIZER=tokenizer.json` when the
 * checkpoint has none) evaluates an existing checkpoint. Without it, a small GPT-2 is first trained
 * on the Brown sentences that the tasks do not use (the held-out files are the last 25) and
 * exported to `$MARIN_PREFIX/experiments/evaluation/model`.
 * `EVAL_SCALE=tiny` trains for a few steps and uses 20 items per task (for tests).
 */
import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { trainBpe } from '@marin/datakit'
import { openStore, storeUrl } from '@marin/finestore'
import { Dataset, Gpt2LM, Pipeline, Trainer, exportHf, initBackend } from '@marin/levanter'
import { BUILTIN_TASKS, OpenAICompletionsModel, brownSentences, evaluate, resolveTasks } from '@marin/marin/eval'
import { loadModel, startServer } from '@marin/marin/serve'
import { localMarinPrefix, logger, MARIN_LAYOUT } from '@marin/rigging'

const log = logger('evaluation')
const tiny = process.env.EVAL_SCALE === 'tiny'
const prefix = localMarinPrefix()

/** Train a small model on the held-in Brown sentences; returns its exported folder. */
async function trainSmallModel(): Promise<string> {
  const dir = join(prefix, MARIN_LAYOUT.experiments, 'evaluation', 'model')
  const sentences = brownSentences('in')
  const tokenizer = trainBpe(sentences.slice(0, 5000), { vocabSize: 512 })
  const ids: number[] = []
  for (const s of sentences.slice(0, tiny ? 2000 : 20000)) ids.push(...tokenizer.encode(`${s}\n`))
  const model = new Gpt2LM({ vocabSize: 512, seqLen: 128, dModel: 64, nLayers: 2, nHeads: 4 }, 0)
  const trainer = new Trainer({
    learningRate: 3e-3,
    batchSize: 16,
    logEvery: 50,
    evalEvery: 0,
    checkpointEvery: 0,
    runDir: join(prefix, MARIN_LAYOUT.experiments, 'evaluation', 'train'),
    schedule: { warmupSteps: 20, decay: 'cosine' },
  })
  await new Pipeline({
    dataset: Dataset.fromTokens(ids, { evalFraction: 0 }),
    model,
    trainer,
    maxSteps: tiny ? 20 : 600,
  }).run()
  mkdirSync(dir, { recursive: true })
  await exportHf(model, dir)
  writeFileSync(join(dir, 'tokenizer.json'), JSON.stringify(tokenizer.toJSON()))
  log.info({ dir, tokens: ids.length }, 'trained and exported a small model')
  return dir
}

await initBackend()
const checkpoint = process.env.EVAL_CHECKPOINT ?? (await trainSmallModel())
const { model, tokenizer, name } = await loadModel({
  checkpoint,
  prefix,
  ...(process.env.EVAL_TOKENIZER ? { tokenizerPath: process.env.EVAL_TOKENIZER } : {}),
})
const server = await startServer({ model, tokenizer, name, port: 0 })
try {
  const tasks = await resolveTasks([...BUILTIN_TASKS], { size: tiny ? 20 : 200 })
  const store = await openStore({ url: storeUrl(prefix) })
  const r = await evaluate({
    model: new OpenAICompletionsModel({ baseUrl: `${server.url}/v1`, model: name }),
    tasks,
    store,
    artifact: 'eval/evaluation-pipeline',
    lineage: checkpoint.startsWith('checkpoints/') ? [checkpoint] : [],
    config: { checkpoint, tasks: [...BUILTIN_TASKS], scale: tiny ? 'tiny' : 'full' },
  })
  for (const [task, t] of Object.entries(r.summary.tasks)) {
    for (const [metric, m] of Object.entries(t.metrics))
      console.log(
        `${task.padEnd(16)} ${metric.padEnd(16)} ${m.value.toFixed(4)} ± ${m.stderr.toFixed(4)}  (n=${t.samples})`,
      )
  }
  console.log(`results: ${r.ref}`)
  console.log(JSON.stringify({ ref: r.ref, ...r.summary }))
} finally {
  await server.close({ graceMs: 1000 })
}
