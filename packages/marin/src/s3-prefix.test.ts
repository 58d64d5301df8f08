/**
 * The quickstart with the Marin prefix in the object store (s3rver, the suite's S3 server, on loopback). First
 * `experiments/quickstart.ts` itself at its tiny scale, as `pnpm quickstart` runs it (steps as iris jobs on a local
 * cluster; its report to a site in the bucket), from an empty working folder: its 6 steps succeed, its summary reads
 * the model and the scores back through the store, and its cluster's state is in this machine's folder of the
 * prefix (`localClusterDir`), not in the working folder. Then the same steps in process with two more, the trained
 * model exported as a folder into a step output in the bucket and an evaluation of that folder: the quickstart's six
 * are skipped. Every step writes only into the store and step folders under the `s3://` prefix (this machine keeps
 * only scratch), the training's metrics and TensorBoard files are objects in its output, the exported model scores
 * as the quickstart's evaluation over HTTP did, each data step's `artifacts.json` equals the same step's on a local
 * folder prefix, the report is on a site in the bucket, and a second run skips every step.
 */
import { spawn } from 'node:child_process'
import { createRequire } from 'node:module'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { configureLogging, openStorage } from '@marin/rigging'
import { startLoopbackS3 } from '@marin/rigging/hosts-cluster'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { openStore, storeUrl } from '@marin/finestore'
import { BUILTIN_TASKS } from './eval/brown-tasks.js'
import { evalStep } from './eval/eval-step.js'
import { formatArtifactRef, type ArtifactRef } from './executor/artifacts.js'
import type { ExperimentRecord } from './executor/executor.js'
import { Experiment } from './executor/experiment.js'
import { localClusterDir, runExperiment } from './executor/run-experiment.js'
import type { Step } from './executor/step.js'
import { step } from './executor/step.js'
import type { trainStep } from './steps/train-step.js'

const REPO = resolve(import.meta.dirname, '../../..')
const QUICKSTART = join(REPO, 'experiments/quickstart.ts')
const TSX = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href
const PREFIX = `s3://marin-test/s3-prefix-${process.pid}`
const SITE = `s3://marin-test/s3-prefix-site-${process.pid}`
/** The quickstart's own report. */
const QUICKSTART_SITE = `${SITE}-quickstart`
const QUICKSTART_STEPS = ['brown-text', 'brown', 'brown-dedup', 'brown-bpe', 'gpt-brown', 'eval-brown']
const STEPS = [...QUICKSTART_STEPS, 'gpt-brown-hf', 'eval-hf']
const EVALS = ['eval-brown', 'eval-hf']
const FOLDER_TASKS = ['brown_cloze', 'brown_bpb']

const root = mkdtempSync(join(tmpdir(), 'marin-s3-prefix-'))
const saved = { ...process.env }
let closeS3: (() => void) | undefined
let steps: Step[] = []

beforeAll(async () => {
  configureLogging({ destination: { write: () => {} }, pretty: false })
  const s3 = await startLoopbackS3(join(root, 's3'))
  closeS3 = s3.close
  Object.assign(process.env, {
    ...s3.env,
    // This machine's folder of the prefix (datakit's work and shard copies, the local cluster) is made under here.
    TMPDIR: join(root, 'tmp'),
    QUICKSTART_SCALE: 'tiny',
  })
  mkdirSync(join(root, 'tmp'))
  // The quickstart's steps, at its tiny scale (read when it is imported); imported, it runs nothing.
  const quickstart = ((await import(QUICKSTART)) as { default: Experiment }).default
  const train = quickstart.steps.find((s) => s.name === 'gpt-brown') as ReturnType<typeof trainStep>
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
  // The quickstart's evaluation's items (its tiny scale has 10 a task), for the same scores.
  const fromFolder = evalStep('eval-hf', { checkpoint: hf.output('hf'), tasks: FOLDER_TASKS, size: 10 })
  steps = [...quickstart.steps, hf, fromFolder]
}, 60_000)

afterAll(() => {
  closeS3?.()
  for (const k of Object.keys(process.env)) if (!(k in saved)) delete process.env[k]
  Object.assign(process.env, saved)
  rmSync(root, { recursive: true, force: true })
})

/** The steps whose `artifacts.json` is the same on any prefix (training's records its seconds and backend). */
const DATA = ['brown', 'brown-dedup', 'brown-bpe']
/** The experiment of `steps` in this process on `prefix`, its report published to `target`; or with `data`, only
 * the data steps (the corpus text and the three above) and no report. */
function run(prefix: string, target: string | { data: true }): Promise<ExperimentRecord> {
  const experiment =
    typeof target === 'string'
      ? new Experiment({ name: 'quickstart-s3', steps, report: { target } })
      : new Experiment({
          name: 'quickstart-s3-data',
          steps: steps.filter((s) => ['brown-text', ...DATA].includes(s.name)),
        })
  return runExperiment(experiment, { local: true, prefix, leaseTtlMs: 5000, out: () => {} })
}

/** `experiments/quickstart.ts` run as a program in `cwd` on the prefix `PREFIX`; its stdout. */
function quickstart(cwd: string): Promise<string> {
  const env = { ...process.env, MARIN_PREFIX: PREFIX, QUICKSTART_SITE, LOG_LEVEL: 'warn' }
  const child = spawn(process.execPath, ['--import', TSX, QUICKSTART], { cwd, env })
  let out = ''
  let err = ''
  child.stdout.on('data', (d) => (out += d))
  child.stderr.on('data', (d) => (err += d))
  return new Promise((ok, fail) =>
    child.on('close', (code) =>
      code === 0 ? ok(out) : fail(new Error(`quickstart exited ${code}:\n${out}\n${err.slice(-3000)}`)),
    ),
  )
}

/** Each step's `artifacts.json`, read back through the prefix's storage. */
async function artifactsOf(record: ExperimentRecord): Promise<Record<string, unknown>> {
  const out: Record<string, unknown> = {}
  for (const s of record.steps.filter((r) => r.name !== 'brown-text' && r.name !== 'gpt-brown-hf'))
    out[s.name] = JSON.parse(await (await openStorage(s.outputPath)).readText('artifacts.json'))
  return out
}

type TaskScores = { samples: number; metrics: Record<string, { value: number }> }

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
  test('quickstart.ts on s3://, then its steps and two more; as on a local prefix; a rerun skips all', async () => {
    // The quickstart itself, as a newcomer runs it, from a folder of its own.
    const cwd = join(root, 'cwd')
    mkdirSync(cwd)
    // The data steps on a local folder prefix, meanwhile (held to the same steps' artifacts in the bucket below).
    const onDisk = join(root, 'local')
    const onDiskRun = run(onDisk, { data: true })
    const printed = await quickstart(cwd)
    for (const s of QUICKSTART_STEPS) expect(printed).toMatch(new RegExp(`SUCCESS ${s}_[0-9a-f]{8} `))
    expect(printed).toContain('quickstart (tiny): 6 steps, 0 already done')
    expect(printed).toMatch(/final checkpoint: models\/gpt-brown@\d+ \(an artifact in the store under s3:\/\//)
    expect(printed).toMatch(/brown_cloze\s+acc\s+[\d.]+ ± [\d.]+ {2}\(n=10\)/)
    expect(printed).toContain(`report: ${QUICKSTART_SITE}/index.html`)
    // Its local cluster kept its state in this machine's folder of the prefix; the working folder got nothing.
    expect(readdirSync(cwd)).toEqual([])
    const clusterDir = localClusterDir(PREFIX)
    expect(clusterDir.startsWith(join(root, 'tmp', 'marin-prefix-'))).toBe(true)
    expect(existsSync(join(clusterDir, 'iris', 'iris.sqlite'))).toBe(true)
    // On a local prefix it stays the prefix's own folder.
    expect(localClusterDir(onDisk)).toBe(onDisk)
    const quickSite = await siteFiles(QUICKSTART_SITE)
    expect(quickSite).toEqual(expect.arrayContaining(['index.html', 'runs/quickstart-tiny/RUN/index.html']))

    // Its steps again in process, with the model exported into the bucket and evaluated from there.
    const first = await run(PREFIX, SITE)
    expect(statuses(first)).toEqual(
      STEPS.map((s) => `${s}:${QUICKSTART_STEPS.includes(s) ? 'SKIPPED' : 'SUCCESS'}`).sort(),
    )
    for (const s of first.steps) expect(s.outputPath.startsWith(`${PREFIX}/${s.name}_`)).toBe(true)
    const inS3 = await artifactsOf(first)
    const results: Record<string, { tasks: Record<string, unknown> }> = {}
    for (const s of first.steps.filter((r) => EVALS.includes(r.name)))
      results[s.name] = JSON.parse(await (await openStorage(s.outputPath)).readText('results.json'))
    expect(inS3['brown-bpe']).toMatchObject({ artifacts: [{ name: 'token-caches/brown-bpe', version: 1 }] })
    expect(inS3['brown-dedup']).toMatchObject({ report: { documentsIn: 20 } })
    const model = inS3['gpt-brown'] as { artifacts: { name: string }[]; steps: number }
    expect([model.artifacts.map((r) => r.name.replace(/_[0-9a-f]{8}$/, '')), model.steps]).toEqual([
      ['models/gpt-brown', 'checkpoints/gpt-brown'],
      40,
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
      expect(results[e]).toMatchObject({ ref: `eval/${e}@1`, tasks: { brown_cloze: { samples: 10 } } })
    }
    // The quickstart's evaluation, over HTTP to `marin serve`, ran every built-in task; the model exported into the
    // bucket scores the same on the same items (to float rounding: the server batches requests as they come).
    expect(Object.keys(results['eval-brown']!.tasks).sort()).toEqual([...BUILTIN_TASKS].sort())
    for (const task of FOLDER_TASKS) {
      const [http, folder] = ['eval-brown', 'eval-hf'].map((e) => scores(results[e]!.tasks[task]) as TaskScores)
      expect(folder!.samples).toBe(http!.samples)
      for (const [metric, m] of Object.entries(http!.metrics))
        expect(Math.abs(folder!.metrics[metric]!.value - m.value), `${task} ${metric}`).toBeLessThan(1e-4)
    }
    // The report is in the bucket: the run's page, its evaluation scores and the site's list of runs.
    const site = await siteFiles(SITE)
    expect(site).toEqual(expect.arrayContaining(['index.html', 'runs.json', 'runs/quickstart-s3/RUN/index.html']))
    const page = await (await openStorage(SITE)).readText(
      site.find((f) => f.endsWith('/data.json'))!.replace('RUN', first.run),
    )
    expect(JSON.parse(page).evals.map((e: { source: string }) => e.source)).toEqual(expect.arrayContaining(EVALS))

    // The data steps on a local folder prefix handed on the same artifacts (versions, counts, reports).
    const here = await onDiskRun
    expect(statuses(here)).toEqual(['brown-text', ...DATA].map((s) => `${s}:SUCCESS`).sort())
    for (const s of here.steps.filter((r) => DATA.includes(r.name))) {
      expect(s.nameHash).toBe(first.steps.find((r) => r.name === s.name)!.nameHash)
      expect(JSON.parse(readFileSync(join(onDisk, s.nameHash, 'artifacts.json'), 'utf8'))).toEqual(inS3[s.name])
    }

    const again = await run(PREFIX, SITE)
    expect(statuses(again)).toEqual(STEPS.map((s) => `${s}:SKIPPED`).sort())
    expect(await artifactsOf(again)).toEqual(inS3)
    // Its report joins the first on the site.
    const runs = JSON.parse(await (await openStorage(SITE)).readText('runs.json')) as unknown[]
    expect(runs.length).toBe(2)
  }, 300_000)

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
