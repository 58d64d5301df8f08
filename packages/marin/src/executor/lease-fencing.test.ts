/**
 * Real processes racing for one step under a short lease: a body that blocks its event loop far
 * past the TTL keeps its lease (renewed off the main thread), and a run frozen until its lease is
 * taken over can neither publish its output nor write the step's status when it resumes.
 */
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { marinBin, start, type Done } from '../fixtures/processes.js'

const script = join(import.meta.dirname, '..', 'fixtures', 'blocking-steps.ts')
let root: string
beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'marin-fence-'))
})
afterAll(() => rmSync(root, { recursive: true, force: true }))

type Mark = { what: 'start' | 'end'; step: string; pid: string }
const marks = (file: string): Mark[] =>
  existsSync(file)
    ? readFileSync(file, 'utf8')
        .trim()
        .split('\n')
        .map((l) => l.split(' '))
        .map(([what, step, pid]) => ({ what: what as Mark['what'], step: step!, pid: pid! }))
    : []

/** Polls `cond` every 50 ms; fails naming `what` after `ms`. */
async function until(cond: () => boolean, what: string, ms = 40_000): Promise<void> {
  for (const end = Date.now() + ms; !cond(); ) {
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

const stepDir = (prefix: string, name: string) =>
  join(prefix, readdirSync(prefix).find((d) => d.startsWith(`${name}_`))!)
/** The `step succeeded` lines in all of a step's logs: one per SUCCESS written. */
const successes = (dir: string) =>
  readdirSync(join(dir, 'logs'))
    .filter((f) => f.endsWith('.log') && !f.endsWith('.job.log'))
    .map(
      (f) =>
        readFileSync(join(dir, 'logs', f), 'utf8')
          .split('\n')
          .filter((l) => l.includes('step succeeded')).length,
    )
    .reduce((a, b) => a + b, 0)
const recordStatuses = (prefix: string, step: string) =>
  readdirSync(join(prefix, 'experiments', 'blocking_steps'))
    .map(
      (f) =>
        JSON.parse(readFileSync(join(prefix, 'experiments', 'blocking_steps', f), 'utf8')) as {
          steps: { name: string; status: string }[]
        },
    )
    .map((r) => r.steps.find((s) => s.name === step)!.status)
    .sort()
const complete = /^first (\d+)\nlast \1\n$/

describe('step leases with real processes', () => {
  test('two runs of a step that blocks its event loop far past the ' +
    'lease TTL: the body never runs twice at once, one SUCCESS, the ' +
    'dependent sees a complete output', async () => {
    const prefix = join(root, 'blocked')
    const file = join(root, 'blocked.marks')
    // A 1 s lease and a body that blocks its event loop for 3 s, and on until the second run has planned the step.
    const release = join(root, 'blocked.release')
    const env = {
      MARIN_PREFIX: prefix,
      FIX_MARKS: file,
      FIX_RELEASE: release,
      FIX_BLOCK_MS: '3000',
      MARIN_LEASE_TTL_MS: '1000',
    }
    const a = start([marinBin, 'run', script, '--local'], env)
    await until(() => marks(file).some((m) => m.what === 'start'), 'the first run to start produce')
    // The second run starts while the first one's body is blocked, and plans the step before it ends.
    const b = start([marinBin, 'run', script, '--local'], env)
    let planned = ''
    let closed = false
    b.child.stdout!.on('data', (d: Buffer) => (planned += d))
    void b.done.then(() => (closed = true))
    await until(() => /produce_\w+ .*\n/.test(planned) || closed, 'the second run to plan produce')
    writeFileSync(release, '')
    const [ra, rb] = await Promise.all([a.done, b.done])
    expect(ra.code, `${ra.out}\n${ra.err}`).toBe(0)
    expect(rb.code, `${rb.out}\n${rb.err}`).toBe(0)
    // Each body ran once; no two runs of a body overlapped (each start is followed by its own end).
    const ms = marks(file)
    for (const name of ['produce', 'consume']) {
      const seq = ms.filter((m) => m.step === name)
      expect(
        seq.map((m) => m.what),
        name,
      ).toEqual(['start', 'end'])
      expect(seq[0]!.pid, name).toBe(seq[1]!.pid)
    }
    // Exactly one SUCCESS for each step; the other run skipped it.
    const produce = stepDir(prefix, 'produce')
    expect(successes(produce)).toBe(1)
    expect(recordStatuses(prefix, 'produce')).toEqual(['SKIPPED', 'SUCCESS'])
    expect(readFileSync(join(produce, '.executor_status'), 'utf8')).toBe('SUCCESS\n')
    // The output and what the dependent read of it are complete, from one run.
    expect(readFileSync(join(produce, 'data.txt'), 'utf8')).toMatch(complete)
    expect(readFileSync(join(stepDir(prefix, 'consume'), 'seen.txt'), 'utf8')).toMatch(complete)
    // The second run met the first one's live lease and waited for it: the race was real.
    expect(rb.out).toMatch(/wait {2}produce_\w+ +running elsewhere/)
  }, 60_000)

  test('a run frozen past its lease (SIGSTOP) while another takes the ' +
    'step over: once resumed it fails with LEASE_LOST and neither ' +
    'publishes its output nor writes a status', async () => {
    const prefix = join(root, 'frozen')
    const file = join(root, 'frozen.marks')
    const env = { MARIN_PREFIX: prefix, FIX_MARKS: file, MARIN_LEASE_TTL_MS: '1000' }
    // The first run's body blocks until the second run is done (and the first resumed). The second starts meanwhile
    // and waits, before it plans anything, to be let go.
    const release = join(root, 'frozen.release')
    const go = join(root, 'frozen.go')
    const a = start([marinBin, 'run', script, '--local'], { ...env, FIX_RELEASE: release })
    const b = start([marinBin, 'run', script, '--local'], { ...env, FIX_GO: go })
    await until(() => marks(file).some((m) => m.what === 'start'), 'the first run to start produce')
    const pidA = Number(marks(file)[0]!.pid)
    // Freeze the whole first process (its renewals too), mid-body; then the second run takes the step over.
    process.kill(pidA, 'SIGSTOP')
    let rb: Done
    try {
      writeFileSync(go, '')
      rb = await b.done
    } finally {
      writeFileSync(release, '')
      process.kill(pidA, 'SIGCONT')
    }
    expect(rb.code, `${rb.out}\n${rb.err}`).toBe(0)
    const produce = stepDir(prefix, 'produce')
    const taken = readFileSync(join(produce, 'data.txt'), 'utf8')
    expect(taken).toMatch(complete)
    expect(taken).not.toContain(String(pidA))
    const ra = await a.done
    expect(ra.code, `${ra.out}\n${ra.err}`).toBe(1)
    expect(ra.out).toMatch(/FAILED produce_\w+ [\s\S]*LEASE_LOST/)
    // The resumed run wrote nothing: the output, the status and the dependent's view are the second run's.
    expect(readFileSync(join(produce, 'data.txt'), 'utf8')).toBe(taken)
    expect(readFileSync(join(produce, '.executor_status'), 'utf8')).toBe('SUCCESS\n')
    expect(successes(produce)).toBe(1)
    expect(readFileSync(join(stepDir(prefix, 'consume'), 'seen.txt'), 'utf8')).toBe(taken)
    expect(recordStatuses(prefix, 'produce')).toEqual(['FAILED', 'SUCCESS'])
  }, 60_000)
})
