/**
 * The quickstart's shape with the Marin prefix in the object store (s3rver, the suite's S3 server, on loopback): its
 * data steps (Brown text → ingest → dedup → BPE token cache, `fixtures/s3-prefix-experiment.ts`), a very small
 * training, an evaluation over HTTP (`marin serve` on the trained artifact, as the quickstart's), an evaluation in
 * process of the model exported as a folder into a step output in the bucket, and the run's report published to a
 * site in the bucket. Every step succeeds and writes only into the store and step folders under the `s3://` prefix
 * (this machine keeps only scratch), each data step's `artifacts.json` and each evaluation's `results.json` equal
 * the same run's on a local folder prefix, the training's metrics and TensorBoard files are objects in its output,
 * the two sites hold the same files, and a second run skips every step.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { configureLogging, openStorage } from '@marin/rigging'
import { startLoopbackS3 } from '@marin/rigging/hosts-cluster'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { openStore, storeUrl } from '@marin/finestore'
import { BUILTIN_TASKS } from './eval/brown-tasks.js'
import { evalStep } from './eval/eval-step.js'
import { formatArtifactRef, type ArtifactRef } from './executor/artifacts.js'
import type { ExperimentRecord } from './executor/executor.js'
import { Experiment } from './executor/experiment.js'
import { runExperiment } from './executor/run-experiment.js'
import { step } from './executor/step.js'
import data from './fixtures/s3-prefix-experiment.js'
import { trainStep } from './steps/train-step.js'

const PREFIX = `s3://marin-test/s3-prefix-${process.pid}`
const SITE = `s3://marin-test/s3-prefix-site-${process.pid}`
const STEPS = ['brown-text', 'brown', 'brown-dedup', 'brown-bpe', 'gpt-brown', 'gpt-brown-hf', 'eval-http', 'eval-hf']
const EVALS = ['eval-http', 'eval-hf']

// The fixture's training, with a context as long as the evaluation items (the built-in Brown tasks' sentences).
const train = trainStep(data.steps.find((s) => s.name === 'brown-bpe')!, {
  name: 'gpt-brown',
  model: { type: 'gpt2', vocabSize: 384, seqLen: 128, dModel: 16, nLayers: 1, nHeads: 2 },
  trainer: { batchSize: 2, logEvery: 2, checkpointEvery: 4 },
  maxSteps: 4,
})
/** The trained model's files (config.json, model.safetensors, tokenizer.json) under `hf/` of its output. */
const hf = step({
  name: 'gpt-brown-hf',
  config: { model: train.artifact() },
  fn: async (c, { outputPath, prefix }) => {
    const store = await openStore({ url: storeUrl(prefix) })
    try {
      const view = await store.open(formatArtifactRef(c.model as ArtifactRef))
      const out = await openStorage(outputPath)
      for (const f of view.files()) await out.write(`hf/${f}`, await view.read(f))
    } finally {
      store.close()
    }
  },
})
const steps = [
  ...data.steps.filter((s) => s.name !== 'gpt-brown'),
  train,
  hf,
  evalStep('eval-http', { checkpoint: train.artifact(), serve: true, tasks: [...BUILTIN_TASKS], size: 4 }),
  evalStep('eval-hf', { checkpoint: hf.output('hf'), tasks: ['brown_cloze', 'brown_bpb'], size: 4 }),
]
const experiment = (target: string) => new Experiment({ name: 'quickstart-s3', steps, report: { target } })
const run = (prefix: string, target: string) =>
  runExperiment(experiment(target), { local: true, prefix, leaseTtlMs: 5000, out: () => {} })
/** The steps whose `artifacts.json` is the same on any prefix (training's records its seconds and backend). */
const DATA = ['brown', 'brown-dedup', 'brown-bpe']

const root = mkdtempSync(join(tmpdir(), 'marin-s3-prefix-'))
const saved = { ...process.env }
let closeS3: (() => void) | undefined

beforeAll(async () => {
  configureLogging({ destination: { write: () => {} }, pretty: false })
  const s3 = await startLoopbackS3(join(root, 's3'))
  closeS3 = s3.close
  Object.assign(process.env, {
    ...s3.env,
    // This machine's folder of the prefix (datakit's work and shard copies) is made under here, and removed.
    TMPDIR: join(root, 'tmp'),
  })
}, 30_000)

afterAll(() => {
  closeS3?.()
  for (const k of Object.keys(process.env)) if (!(k in saved)) delete process.env[k]
  Object.assign(process.env, saved)
  rmSync(root, { recursive: true, force: true })
})

/** Each step's `artifacts.json`, read back through the prefix's storage. */
async function artifactsOf(record: ExperimentRecord): Promise<Record<string, unknown>> {
  const out: Record<string, unknown> = {}
  for (const s of record.steps.filter((r) => r.name !== 'brown-text' && r.name !== 'gpt-brown-hf'))
    out[s.name] = JSON.parse(await (await openStorage(s.outputPath)).readText('artifacts.json'))
  return out
}

const statuses = (r: ExperimentRecord) => r.steps.map((s) => `${s.name}:${s.error ?? s.status}`).sort()

/** Eval results without the model's name, every number to 7 significant digits. */
const scores = (results: unknown) =>
  JSON.parse(
    JSON.stringify(results, (k, v) => (k === 'model' ? undefined : typeof v === 'number' ? +v.toPrecision(7) : v)),
  )

/** Every file of a report site by its path, the run's folder (`runs/<experiment>/<run>/`) named `RUN` and each log
 * (named by the time it began) `LOG`. */
async function siteFiles(target: string): Promise<string[]> {
  const files: string[] = []
  for await (const o of (await openStorage(target)).list(''))
    files.push(
      o.path.replace(/^runs\/([^/]+)\/[^/]+\//, 'runs/$1/RUN/').replace(/(\/logs\/[^/]+\/)[^/]+\.log$/, '$1LOG'),
    )
  return files.sort()
}

describe('the quickstart with the prefix in the object store', () => {
  test('data, train, eval and report on s3://; the same as on a local prefix; a rerun skips all', async () => {
    const first = await run(PREFIX, SITE)
    expect(statuses(first)).toEqual(STEPS.map((s) => `${s}:SUCCESS`).sort())
    for (const s of first.steps) expect(s.outputPath.startsWith(`${PREFIX}/${s.name}_`)).toBe(true)
    const inS3 = await artifactsOf(first)
    const results: Record<string, unknown> = {}
    for (const s of first.steps.filter((r) => EVALS.includes(r.name)))
      results[s.name] = JSON.parse(await (await openStorage(s.outputPath)).readText('results.json'))
    expect(inS3['brown-bpe']).toMatchObject({ artifacts: [{ name: 'token-caches/brown-bpe', version: 1 }] })
    expect(inS3['brown-dedup']).toMatchObject({ report: { documentsIn: 20 } })
    const model = inS3['gpt-brown'] as { artifacts: { name: string }[]; steps: number }
    expect([model.artifacts.map((r) => r.name.replace(/_[0-9a-f]{8}$/, '')), model.steps]).toEqual([
      ['models/gpt-brown', 'checkpoints/gpt-brown'],
      4,
    ])
    const trained = await openStorage(first.steps.find((s) => s.name === 'gpt-brown')!.outputPath)
    expect((await trained.readText('metrics.jsonl')).trim().split('\n').length).toBeGreaterThanOrEqual(2)
    const tensorboard: string[] = []
    for await (const o of trained.list('tensorboard/')) tensorboard.push(o.path)
    expect(tensorboard.some((p) => p.startsWith('tensorboard/events.out.tfevents.'))).toBe(true)

    // The store and step folders are objects in the bucket; this machine has only scratch and verified copies.
    const bucket = readdirSync(join(root, 's3'), { recursive: true }) as string[]
    expect(bucket.some((f) => /store\/artifacts\/token-caches\/brown-bpe\/versions\/1\.json/.test(f))).toBe(true)
    expect(bucket.some((f) => /brown-dedup_[0-9a-f]{8}\/artifacts\.json/.test(f))).toBe(true)
    const local = readdirSync(join(root, 'tmp'), { recursive: true }) as string[]
    expect(local.some((f) => /artifacts\.json|\.executor_status|versions\/\d+\.json$/.test(f))).toBe(false)
    // The copy of the exported model that eval-hf read is gone with the step.
    expect(local.some((f) => /eval-inputs\/./.test(f))).toBe(false)
    for (const e of EVALS) {
      expect(inS3[e]).toMatchObject({ artifacts: [{ name: `eval/${e}`, version: 1 }] })
      expect(results[e]).toMatchObject({ ref: `eval/${e}@1`, tasks: { brown_cloze: { samples: 4 } } })
    }
    expect(Object.keys((results['eval-http'] as { tasks: object }).tasks).sort()).toEqual([...BUILTIN_TASKS].sort())
    // The report is in the bucket: the run's page, its evaluation scores and the site's list of runs.
    const site = await siteFiles(SITE)
    expect(site).toEqual(expect.arrayContaining(['index.html', 'runs.json', 'runs/quickstart-s3/RUN/index.html']))
    const page = await (await openStorage(SITE)).readText(
      site.find((f) => f.endsWith('/data.json'))!.replace('RUN', first.run),
    )
    expect(JSON.parse(page).evals.map((e: { source: string }) => e.source)).toEqual(expect.arrayContaining(EVALS))

    // The same experiment on a local folder prefix hands on the same artifacts (versions, counts, reports).
    const onDisk = join(root, 'local')
    const here = await run(onDisk, join(root, 'local-site'))
    expect(statuses(here)).toEqual(STEPS.map((s) => `${s}:SUCCESS`).sort())
    expect(here.steps.map((s) => s.nameHash).sort()).toEqual(first.steps.map((s) => s.nameHash).sort())
    for (const s of here.steps.filter((r) => DATA.includes(r.name)))
      expect(JSON.parse(readFileSync(join(onDisk, s.nameHash, 'artifacts.json'), 'utf8'))).toEqual(inS3[s.name])
    // The same model scores the same on the same items, over HTTP and from the exported folder alike (to float
    // rounding: the server batches requests as they come); only the model's name (its URL or folder) differs.
    for (const s of here.steps.filter((r) => EVALS.includes(r.name)))
      expect(scores(JSON.parse(readFileSync(join(onDisk, s.nameHash, 'results.json'), 'utf8')))).toEqual(
        scores(results[s.name]),
      )
    expect(await siteFiles(join(root, 'local-site'))).toEqual(site)

    const again = await run(PREFIX, SITE)
    expect(statuses(again)).toEqual(STEPS.map((s) => `${s}:SKIPPED`).sort())
    expect(await artifactsOf(again)).toEqual(inS3)
    // Its report joins the first on the site.
    const runs = JSON.parse(await (await openStorage(SITE)).readText('runs.json')) as unknown[]
    expect(runs.length).toBe(2)
  }, 240_000)

  test('evaluating a checkpoint folder that is not in the bucket fails naming the field and the URL', async () => {
    const missing = `${PREFIX}-nothing/hf`
    const lone = evalStep('eval-missing', { checkpoint: missing, tasks: ['brown_cloze'], size: 2 })
    const r = await runExperiment(new Experiment({ name: 'eval-missing', steps: [lone] }), {
      local: true,
      prefix: PREFIX,
      out: () => {},
    })
    expect(r.steps[0]!.status).toBe('FAILED')
    expect(r.steps[0]!.error).toContain(
      `step eval-missing: checkpoint: cannot copy ${missing} to this machine (no objects under it)`,
    )
  }, 30_000)
})
