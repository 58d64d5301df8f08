/**
 * Real processes: the 3-step experiment run with tsx (steps as iris jobs on a local
 * cluster) and with ts-node; two `marin run` at once; a run killed mid-step.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { JobScheduler } from '@marin/iris'
import { loadExperiment } from './load-script.js'

const pkg = join(import.meta.dirname, '..')
const repo = join(pkg, '..', '..')
const script = join(import.meta.dirname, 'fixtures', 'three-steps.ts')
const marinBin = join(pkg, 'bin', 'marin.js')
let root: string
beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'marin-proc-'))
})
afterAll(() => rmSync(root, { recursive: true, force: true }))

type Done = { code: number | null; out: string; err: string }
function start(args: string[], env: Record<string, string>): { child: ChildProcess; done: Promise<Done> } {
  const child = spawn(process.execPath, args, { cwd: repo, env: { ...process.env, LOG_LEVEL: 'warn', ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  let err = ''
  child.stdout!.on('data', (d: Buffer) => (out += d))
  child.stderr!.on('data', (d: Buffer) => (err += d))
  const done = new Promise<Done>((resolve) => child.on('close', (code) => resolve({ code, out, err })))
  return { child, done }
}
const runs = (counter: string) => (existsSync(counter) ? readFileSync(counter, 'utf8').trim().split('\n').map((l) => l.split(' ')) : [])
const names = (counter: string) => runs(counter).map(([n]) => n)

describe('experiment processes', () => {
  test('tsx: running the script itself runs each step as an iris job, logs kept with the step', async () => {
    const prefix = join(root, 'tsx')
    const counter = join(root, 'tsx.count')
    const { done } = start(['--import', 'tsx', script], { MARIN_PREFIX: prefix, FIX_COUNTER: counter })
    const r = await done
    expect(r.code, r.err).toBe(0)
    expect(r.out).toMatch(/SUCCESS three_steps: record /)
    const rows = runs(counter)
    expect(rows.map(([n]) => n)).toEqual(['ingest', 'tokenize', 'train'])
    // Each step ran in its own process, none in the driver.
    expect(new Set(rows.map(([, pid]) => pid)).size).toBe(3)
    const tok = readdirSync(prefix).find((d) => d.startsWith('tokenize_'))!
    const logs = readdirSync(join(prefix, tok, 'logs'))
    expect(logs.some((f) => f.endsWith('.job.log'))).toBe(true)
    expect(readFileSync(join(prefix, tok, 'logs', logs.find((f) => f.endsWith('.log') && !f.endsWith('.job.log'))!), 'utf8')).toContain('step succeeded')
    expect(readFileSync(join(prefix, tok, 'tokens.json'), 'utf8')).toContain('"vocab":256')
    expect(existsSync(join(prefix, 'iris', 'iris.sqlite'))).toBe(true)
  }, 60_000)

  test('ts-node: the same script with the same flags', async () => {
    const prefix = join(root, 'tsnode')
    const counter = join(root, 'tsnode.count')
    const { done } = start(['--loader', 'ts-node/esm', script, '--local'], { MARIN_PREFIX: prefix, FIX_COUNTER: counter, TS_NODE_TRANSPILE_ONLY: '1', NODE_NO_WARNINGS: '1' })
    const r = await done
    expect(r.code, r.err).toBe(0)
    expect(names(counter)).toEqual(['ingest', 'tokenize', 'train'])
    // The record names the script and each step's version and timing.
    const recs = readdirSync(join(prefix, 'experiments', 'three_steps'))
    const rec = JSON.parse(readFileSync(join(prefix, 'experiments', 'three_steps', recs[0]!), 'utf8'))
    expect(rec).toMatchObject({ experiment: 'three_steps', status: 'SUCCESS', script, config: { dataset: 'tiny', seed: 1 } })
    expect(rec.steps.map((x: { name: string; status: string }) => `${x.name}:${x.status}`)).toEqual(['ingest:SUCCESS', 'tokenize:SUCCESS', 'train:SUCCESS'])
  }, 60_000)

  test('two marin run of one experiment at once: each step runs exactly once', async () => {
    const prefix = join(root, 'concurrent')
    const counter = join(root, 'concurrent.count')
    const env = { MARIN_PREFIX: prefix, FIX_COUNTER: counter, FIX_SLEEP_STEP: 'ingest', FIX_SLEEP_MS: '1500', MARIN_LEASE_TTL_MS: '1000' }
    const a = start([marinBin, 'run', script, '--local'], env)
    const b = start([marinBin, 'run', script, '--local'], env)
    const [ra, rb] = await Promise.all([a.done, b.done])
    expect(ra.code, ra.err).toBe(0)
    expect(rb.code, rb.err).toBe(0)
    expect(names(counter).sort()).toEqual(['ingest', 'tokenize', 'train'])
    expect(`${ra.out}\n${rb.out}`).toMatch(/by a concurrent run/)
  }, 60_000)

  test('a run killed mid-step: after the lease expires the next run takes over and redoes only that step', async () => {
    const prefix = join(root, 'killed')
    const counter = join(root, 'killed.count')
    const env = { MARIN_PREFIX: prefix, FIX_COUNTER: counter, MARIN_LEASE_TTL_MS: '1000' }
    const first = start([marinBin, 'run', script, '--local'], { ...env, FIX_SLEEP_STEP: 'tokenize', FIX_SLEEP_MS: '60000' })
    for (let i = 0; i < 400 && !names(counter).includes('tokenize'); i++) await new Promise((r) => setTimeout(r, 50))
    expect(names(counter)).toEqual(['ingest', 'tokenize'])
    first.child.kill('SIGKILL')
    await first.done
    const tok = readdirSync(prefix).find((d) => d.startsWith('tokenize_'))!
    expect(readFileSync(join(prefix, tok, '.executor_status'), 'utf8')).toBe('RUNNING\n')
    const second = await start([marinBin, 'run', script, '--local'], env).done
    expect(second.code, second.err).toBe(0)
    expect(second.out).toMatch(/skip {2}ingest_\w+ +done at /)
    expect(second.out).toMatch(/(wait {2}tokenize_\w+ +running elsewhere|run {3}tokenize_\w+ +take over)/)
    expect(names(counter)).toEqual(['ingest', 'tokenize', 'tokenize', 'train'])
    expect(readFileSync(join(prefix, tok, '.executor_status'), 'utf8')).toBe('SUCCESS\n')
  }, 60_000)

  test('a step process killed mid-run: FAILED, dependents DEP_FAILED, the next run redoes that step only', async () => {
    const prefix = join(root, 'killed-job')
    const counter = join(root, 'killed-job.count')
    const env = { MARIN_PREFIX: prefix, FIX_COUNTER: counter, MARIN_LEASE_TTL_MS: '1000' }
    const first = start(['--import', 'tsx', script], { ...env, FIX_SLEEP_STEP: 'tokenize', FIX_SLEEP_MS: '60000' })
    for (let i = 0; i < 600 && !names(counter).includes('tokenize'); i++) await new Promise((r) => setTimeout(r, 50))
    const [, pid] = runs(counter).find(([n]) => n === 'tokenize')!
    process.kill(Number(pid), 'SIGKILL')
    const r = await first.done
    expect(r.code).toBe(1)
    expect(r.out).toMatch(/FAILED tokenize_\w+ \(.*\n\s+iris job \S+ ended FAILED without a result: task 0: terminated by signal SIGKILL/)
    expect(r.out).toMatch(/DEP_FAILED train_/)
    const tok = readdirSync(prefix).find((d) => d.startsWith('tokenize_'))!
    expect(readFileSync(join(prefix, tok, '.executor_status'), 'utf8')).toBe('FAILED\n')
    const again = await start([marinBin, 'run', script, '--local'], env).done
    expect(again.code, again.err).toBe(0)
    expect(again.out).toMatch(/run {3}tokenize_\w+ +failed at /)
    expect(names(counter)).toEqual(['ingest', 'tokenize', 'tokenize', 'train'])
  }, 60_000)

  test("iris's JobScheduler.submit(experiment) runs it as jobs, each when its dependencies are done", async () => {
    const prefix = join(root, 'scheduler')
    const counter = join(root, 'scheduler.count')
    const saved = { ...process.env }
    Object.assign(process.env, { MARIN_PREFIX: prefix, FIX_COUNTER: counter, LOG_LEVEL: 'warn' })
    const scheduler = new JobScheduler({ cluster: 'local', prefix })
    try {
      const experiment = await loadExperiment(script)
      const jobs = await scheduler.submit(experiment)
      expect(jobs.map((j) => j.name.replace(/_\w{8}$/, ''))).toEqual(['three_steps.ingest', 'three_steps.tokenize', 'three_steps.train'])
      for (const j of jobs) expect((await j.wait()).state).toBe('SUCCEEDED')
      expect(names(counter)).toEqual(['ingest', 'tokenize', 'train'])
      const again = await scheduler.submit(experiment)
      expect(again).toEqual([])
      expect(readdirSync(join(prefix, 'experiments', 'three_steps'))).toHaveLength(2)
    } finally {
      await scheduler.close()
      process.env = saved
    }
  }, 60_000)
})
