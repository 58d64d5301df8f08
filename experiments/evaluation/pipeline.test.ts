import { spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { openStore } from '@marin/finestore'
import { afterAll, expect, test } from 'vitest'

const root = resolve(import.meta.dirname, '../..')
const prefix = mkdtempSync(join(tmpdir(), 'evaluation-'))
afterAll(() => rmSync(prefix, { recursive: true, force: true }))

test('the evaluation experiment trains, serves, evaluates every ' +
  'built-in task over HTTP and stores the results', async () => {
  const run = spawnSync(process.execPath, ['--import', 'tsx', 'experiments/evaluation/pipeline.ts'], {
    cwd: root,
    encoding: 'utf8',
    env: { ...process.env, EVAL_SCALE: 'tiny', MARIN_PREFIX: prefix, LOG_LEVEL: 'warn' },
  })
  if (run.status !== 0) throw new Error(`pipeline exited ${run.status}: ${run.stderr}`)
  const lines = run.stdout.trim().split('\n')
  expect(lines).toContain('results: eval/evaluation-pipeline@1')
  const printed = JSON.parse(lines[lines.length - 1]!)
  expect(Object.keys(printed.tasks).sort()).toEqual(['brown_bpb', 'brown_cloze', 'brown_last_word'])
  const bpb = printed.tasks.brown_bpb.metrics.bits_per_byte.value
  expect(bpb).toBeGreaterThan(0)
  expect(bpb).toBeLessThan(8) // below a uniform guess over the 256 byte values, even after a few steps
  const store = await openStore({ url: join(prefix, 'store') })
  const summary = JSON.parse(await (await store.open('eval/evaluation-pipeline@1')).readText('summary.json'))
  expect(summary.tasks).toEqual(printed.tasks)
}, 120_000)
