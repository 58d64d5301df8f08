/**
 * Real processes: the 3-step experiment run with tsx (steps as iris jobs on a local
 * cluster), with ts-node, and on a JobScheduler the caller made.
 */
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { JobScheduler } from '@marin/iris'
import { loadExperiment } from './load-script.js'
import { runExperiment } from './run-experiment.js'
import { names, runs, script, start } from '../fixtures/processes.js'

let root: string
beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'marin-proc-'))
})
afterAll(() => rmSync(root, { recursive: true, force: true }))

describe('experiment processes', () => {
  test('tsx: running the script itself runs each step as an iris job, logs kept with the step', async () => {
    const prefix = join(root, 'tsx')
    const counter = join(root, 'tsx.count')
    const { child, done } = start(['--import', 'tsx', script], { MARIN_PREFIX: prefix, FIX_COUNTER: counter })
    const r = await done
    expect(r.code, r.err).toBe(0)
    expect(r.out).toMatch(/SUCCESS three_steps: record /)
    const rows = runs(counter)
    expect(rows.map(([n]) => n)).toEqual(['ingest', 'tokenize', 'train'])
    // The three steps ran as calls in one warm runner of the worker, which imported the script once; not in the driver.
    expect(new Set(rows.map(([, pid]) => pid)).size).toBe(1)
    expect(rows[0]![1]).not.toBe(String(child.pid))
    const tok = readdirSync(prefix).find((d) => d.startsWith('tokenize_'))!
    const logs = readdirSync(join(prefix, tok, 'logs'))
    expect(logs.some((f) => f.endsWith('.job.log'))).toBe(true)
    expect(
      readFileSync(join(prefix, tok, 'logs', logs.find((f) => f.endsWith('.log') && !f.endsWith('.job.log'))!), 'utf8'),
    ).toContain('step succeeded')
    expect(readFileSync(join(prefix, tok, 'tokens.json'), 'utf8')).toContain('"vocab":256')
    expect(existsSync(join(prefix, 'iris', 'iris.sqlite'))).toBe(true)
  }, 60_000)

  test('ts-node: the same script with the same flags', async () => {
    const prefix = join(root, 'tsnode')
    const counter = join(root, 'tsnode.count')
    const { done } = start(['--loader', 'ts-node/esm', script, '--local'], {
      MARIN_PREFIX: prefix,
      FIX_COUNTER: counter,
      TS_NODE_TRANSPILE_ONLY: '1',
      NODE_NO_WARNINGS: '1',
    })
    const r = await done
    expect(r.code, r.err).toBe(0)
    expect(names(counter)).toEqual(['ingest', 'tokenize', 'train'])
    // The record names the script and each step's version and timing.
    const recs = readdirSync(join(prefix, 'experiments', 'three_steps'))
    const rec = JSON.parse(readFileSync(join(prefix, 'experiments', 'three_steps', recs[0]!), 'utf8'))
    expect(rec).toMatchObject({
      experiment: 'three_steps',
      status: 'SUCCESS',
      script,
      config: { dataset: 'tiny', seed: 1 },
    })
    expect(rec.steps.map((x: { name: string; status: string }) => `${x.name}:${x.status}`)).toEqual([
      'ingest:SUCCESS',
      'tokenize:SUCCESS',
      'train:SUCCESS',
    ])
  }, 60_000)

  test('runExperiment on a JobScheduler of your own runs each step as ' +
    'one of its jobs, each when its dependencies are done', async () => {
    const prefix = join(root, 'scheduler')
    const counter = join(root, 'scheduler.count')
    const saved = { ...process.env }
    Object.assign(process.env, { MARIN_PREFIX: prefix, FIX_COUNTER: counter, LOG_LEVEL: 'warn' })
    // The cluster keeps its state apart from the experiment's prefix: the jobs are found only on it.
    const scheduler = new JobScheduler({ cluster: 'local', prefix: join(root, 'own-cluster') })
    try {
      const experiment = await loadExperiment(script)
      const record = await runExperiment(experiment, { prefix, scheduler, out: () => {} })
      expect(record.status).toBe('SUCCESS')
      const client = await scheduler.client()
      const jobs = (await client.list()).sort((a, b) => a.submittedAt - b.submittedAt)
      expect(jobs.map((j) => j.name.replace(/_\w{8}$/, ''))).toEqual([
        'three_steps.ingest',
        'three_steps.tokenize',
        'three_steps.train',
      ])
      expect(jobs.map((j) => j.state)).toEqual(['SUCCEEDED', 'SUCCEEDED', 'SUCCEEDED'])
      expect(names(counter)).toEqual(['ingest', 'tokenize', 'train'])
      // Done steps are skipped: a second run submits no job.
      const again = await runExperiment(experiment, { prefix, scheduler, out: () => {} })
      expect(again.steps.map((s) => s.status)).toEqual(['SKIPPED', 'SKIPPED', 'SKIPPED'])
      expect(await client.list()).toHaveLength(3)
      expect(readdirSync(join(prefix, 'experiments', 'three_steps'))).toHaveLength(2)
    } finally {
      await scheduler.close()
      process.env = saved
    }
  }, 60_000)

  test('scheduler.submit(experiment) runs its steps as jobs and resolves with their handles', async () => {
    const prefix = join(root, 'submit')
    const counter = join(root, 'submit.count')
    const saved = { ...process.env }
    Object.assign(process.env, { MARIN_PREFIX: prefix, FIX_COUNTER: counter, LOG_LEVEL: 'warn' })
    const scheduler = new JobScheduler({ cluster: 'local', prefix: join(root, 'submit-cluster') })
    try {
      const experiment = await loadExperiment(script)
      const jobs = await scheduler.submit(experiment)
      expect(jobs.map((j) => j.name.replace(/_\w{8}$/, ''))).toEqual([
        'three_steps.ingest',
        'three_steps.tokenize',
        'three_steps.train',
      ])
      expect((await Promise.all(jobs.map((j) => j.status()))).map((s) => s.state)).toEqual([
        'SUCCEEDED',
        'SUCCEEDED',
        'SUCCEEDED',
      ])
      expect(names(counter)).toEqual(['ingest', 'tokenize', 'train'])
      // Done steps run no job.
      expect(await scheduler.submit(experiment)).toEqual([])
      // Anything else is refused, saying what submit takes.
      await expect(scheduler.submit({ steps: [] } as never)).rejects.toThrow(
        /got object with keys steps; pass a job request \(\{ name, command \}\), an iterable of them/,
      )
    } finally {
      await scheduler.close()
      process.env = saved
    }
  }, 60_000)
})
