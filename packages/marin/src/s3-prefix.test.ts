/**
 * The quickstart's data steps (Brown text → ingest → dedup → BPE token cache, `fixtures/s3-prefix-experiment.ts`)
 * and a very small training step, with the Marin prefix in the object store (s3rver, the suite's S3 server, on
 * loopback): every step succeeds and writes only into the store and step folders under the `s3://` prefix, each
 * data step's `artifacts.json` equals the same run's on a local folder prefix, the training's metrics and
 * TensorBoard files are objects in its output, and a second run skips every step.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { configureLogging, openStorage } from '@marin/rigging'
import { startLoopbackS3 } from '@marin/rigging/hosts-cluster'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { Executor, type ExperimentRecord } from './executor/executor.js'
import experiment from './fixtures/s3-prefix-experiment.js'

const PREFIX = `s3://marin-test/s3-prefix-${process.pid}`
const STEPS = ['brown-text', 'brown', 'brown-dedup', 'brown-bpe', 'gpt-brown']
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
  for (const s of record.steps.filter((r) => r.name !== 'brown-text'))
    out[s.name] = JSON.parse(await (await openStorage(s.outputPath)).readText('artifacts.json'))
  return out
}

const statuses = (r: ExperimentRecord) => r.steps.map((s) => `${s.name}:${s.error ?? s.status}`).sort()

describe('the quickstart data steps with the prefix in the object store', () => {
  test('ingest, dedup, tokenize and train on s3://; the data steps equal the local run; a rerun skips all', async () => {
    const first = await new Executor({ prefix: PREFIX, leaseTtlMs: 5000 }).run(experiment)
    expect(statuses(first)).toEqual(STEPS.map((s) => `${s}:SUCCESS`).sort())
    for (const s of first.steps) expect(s.outputPath.startsWith(`${PREFIX}/${s.name}_`)).toBe(true)
    const inS3 = await artifactsOf(first)
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

    // The same experiment on a local folder prefix hands on the same artifacts (versions, counts, reports).
    const onDisk = join(root, 'local')
    const here = await new Executor({ prefix: onDisk, leaseTtlMs: 5000 }).run(experiment)
    expect(statuses(here)).toEqual(STEPS.map((s) => `${s}:SUCCESS`).sort())
    expect(here.steps.map((s) => s.nameHash).sort()).toEqual(first.steps.map((s) => s.nameHash).sort())
    for (const s of here.steps.filter((r) => DATA.includes(r.name)))
      expect(JSON.parse(readFileSync(join(onDisk, s.nameHash, 'artifacts.json'), 'utf8'))).toEqual(inS3[s.name])

    const again = await new Executor({ prefix: PREFIX, leaseTtlMs: 5000 }).run(experiment)
    expect(statuses(again)).toEqual(STEPS.map((s) => `${s}:SKIPPED`).sort())
    expect(await artifactsOf(again)).toEqual(inS3)
  }, 240_000)
})
