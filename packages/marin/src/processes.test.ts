/**
 * Real processes: the 3-step experiment run with tsx (steps as iris jobs on a local
 * cluster) and with ts-node; two `marin run` at once; a run killed mid-step.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'

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
    const again = await start(['--loader', 'ts-node/esm', script, '--dry-run'], { MARIN_PREFIX: prefix, TS_NODE_TRANSPILE_ONLY: '1', NODE_NO_WARNINGS: '1' }).done
    expect(again.code, again.err).toBe(0)
    expect(again.out.match(/skip {2}\w+ +done at /g)).toHaveLength(3)
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
})
