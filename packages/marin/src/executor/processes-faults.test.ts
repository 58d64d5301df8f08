/** Real processes at fault: two drivers at once, a killed driver, a killed step process. */
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { marinBin, names, runs, script, start } from '../fixtures/processes.js'

let root: string
beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'marin-proc-'))
})
afterAll(() => rmSync(root, { recursive: true, force: true }))

describe('experiment processes at fault', () => {
  test('two marin run of one experiment at once: each step runs exactly once', async () => {
    const prefix = join(root, 'concurrent')
    const counter = join(root, 'concurrent.count')
    const env = {
      MARIN_PREFIX: prefix,
      FIX_COUNTER: counter,
      FIX_SLEEP_STEP: 'ingest',
      FIX_SLEEP_MS: '1500',
      MARIN_LEASE_TTL_MS: '1000',
    }
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
    const first = start([marinBin, 'run', script, '--local'], {
      ...env,
      FIX_SLEEP_STEP: 'tokenize',
      FIX_SLEEP_MS: '60000',
    })
    for (let i = 0; i < 400 && !names(counter).includes('tokenize'); i++) await new Promise((r) => setTimeout(r, 50))
    expect(names(counter)).toEqual(['ingest', 'tokenize'])
    first.child.kill('SIGKILL')
    await first.done
    const tok = readdirSync(prefix).find((d) => d.startsWith('tokenize_'))!
    expect(readFileSync(join(prefix, tok, '.executor_status'), 'utf8')).toMatch(/^RUNNING\n/)
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
    expect(r.out).toMatch(
      /FAILED tokenize_\w+ \(.*\n\s+iris job \S+ ended FAILED without a result: task 0: terminated by signal SIGKILL/,
    )
    expect(r.out).toMatch(/DEP_FAILED train_/)
    const tok = readdirSync(prefix).find((d) => d.startsWith('tokenize_'))!
    expect(readFileSync(join(prefix, tok, '.executor_status'), 'utf8')).toBe('FAILED\n')
    const again = await start([marinBin, 'run', script, '--local'], env).done
    expect(again.code, again.err).toBe(0)
    expect(again.out).toMatch(/run {3}tokenize_\w+ +failed at /)
    expect(names(counter)).toEqual(['ingest', 'tokenize', 'tokenize', 'train'])
  }, 60_000)

  test('a step that exits its warm runner fails only itself; the next run redoes it in a fresh runner', async () => {
    const prefix = join(root, 'exits')
    const counter = join(root, 'exits.count')
    const env = { MARIN_PREFIX: prefix, FIX_COUNTER: counter }
    const first = await start(['--import', 'tsx', script], { ...env, FIX_EXIT: 'tokenize' }).done
    expect(first.code).toBe(1)
    expect(first.out).toMatch(/SUCCESS ingest_\w+/)
    expect(first.out).toMatch(
      /FAILED tokenize_\w+ \(.*\n\s+iris job \S+ ended FAILED without a result: task 0: exited with code 7/,
    )
    expect(first.out).toMatch(/DEP_FAILED train_/)
    // ingest and tokenize shared the runner that tokenize took down.
    const [ingest, tokenize] = runs(counter)
    expect(tokenize![1]).toBe(ingest![1])
    const again = await start(['--import', 'tsx', script], env).done
    expect(again.code, again.err).toBe(0)
    expect(again.out).toMatch(/skip {2}ingest_\w+ +done at /)
    const rows = runs(counter)
    expect(rows.map(([n]) => n)).toEqual(['ingest', 'tokenize', 'tokenize', 'train'])
    expect(rows[2]![1]).not.toBe(ingest![1])
    expect(rows[3]![1]).toBe(rows[2]![1])
  }, 60_000)

  test('two drivers at once with steps as iris jobs: each step runs exactly once', async () => {
    const prefix = join(root, 'concurrent-iris')
    const counter = join(root, 'concurrent-iris.count')
    const env = {
      MARIN_PREFIX: prefix,
      FIX_COUNTER: counter,
      FIX_SLEEP_STEP: 'ingest',
      FIX_SLEEP_MS: '1500',
      MARIN_LEASE_TTL_MS: '1000',
    }
    const [ra, rb] = await Promise.all([
      start(['--import', 'tsx', script], env).done,
      start([marinBin, 'run', script], env).done,
    ])
    expect(ra.code, ra.err).toBe(0)
    expect(rb.code, rb.err).toBe(0)
    expect(names(counter).sort()).toEqual(['ingest', 'tokenize', 'train'])
  }, 60_000)
})
