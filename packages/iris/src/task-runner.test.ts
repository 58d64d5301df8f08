import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, test } from 'vitest'
import { probeDocker } from './container.js'
import { isAlive, killTagged, taggedProcesses } from './internal/test-processes.js'
import { orphanGuard, runTask, type TaskOutcome } from './task-runner.js'

let dir: string
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'iris-run-'))
})
afterEach(() => rmSync(dir, { recursive: true, force: true }))

const base = () => ({ cwd: dir, logDir: dir, env: { PATH: process.env.PATH ?? '/usr/bin:/bin', IRIS_JOB_ID: 'j-1' } })

describe('runTask', () => {
  test('captures lines, env and working directory', async () => {
    const lines: string[] = []
    const h = runTask({
      ...base(),
      command: ['sh', '-c', 'echo "$IRIS_JOB_ID in $(pwd)"; echo oops >&2; printf tail'],
      onLine: (s, l) => lines.push(`${s}:${l}`),
    })
    expect(await h.done).toEqual({ state: 'SUCCEEDED', exitCode: 0 })
    expect(lines).toContain(`stdout:j-1 in ${dir}`)
    expect(lines).toContain('stderr:oops')
    expect(lines).toContain('stdout:tail')
    expect(readFileSync(join(dir, 'stdout.log'), 'utf8')).toBe(`j-1 in ${dir}\ntail`)
  })

  test('a non-zero exit is FAILED with the code', async () => {
    expect(await runTask({ ...base(), command: ['sh', '-c', 'exit 3'] }).done).toEqual({
      state: 'FAILED',
      exitCode: 3,
      error: 'exited with code 3',
    })
  })

  test('a missing program is FAILED with 127', async () => {
    const o = await runTask({ ...base(), command: ['/nonexistent/prog'] }).done
    expect(o).toMatchObject({ state: 'FAILED', exitCode: 127 })
    expect(o.error).toMatch(/cannot start "\/nonexistent\/prog"/)
  })

  test('kill: SIGTERM first, SIGKILL after the grace period', async () => {
    const lines: string[] = []
    // This task ignores SIGTERM, so only the SIGKILL after the grace period ends it.
    const h = runTask({
      ...base(),
      command: ['sh', '-c', 'trap "echo got-term" TERM; echo ready; while true; do sleep 0.05; done'],
      onLine: (_s, l) => lines.push(l),
    })
    while (!lines.includes('ready')) await new Promise((r) => setTimeout(r, 10))
    h.kill(300)
    const o = await h.done
    expect(o.state).toBe('KILLED')
    expect(lines).toContain('got-term')
  })

  test('kill reaches a task that exits on SIGTERM', async () => {
    const h = runTask({ ...base(), command: ['sleep', '30'] })
    await new Promise((r) => setTimeout(r, 50))
    h.kill(5000)
    expect(await h.done).toMatchObject({ state: 'KILLED' })
  })

  test('the orphan guard wraps the command and keeps its behaviour', async () => {
    const prefix = orphanGuard()
    const lines: string[] = []
    const h = runTask({
      ...base(),
      prefix,
      command: ['sh', '-c', 'echo guarded; exit 4'],
      onLine: (_s, l) => lines.push(l),
    })
    expect(await h.done).toMatchObject({ state: 'FAILED', exitCode: 4 })
    expect(lines).toEqual(['guarded'])
  })
})

describe.skipIf(process.platform !== 'linux')('what a task leaves running ends with it', () => {
  let tag = ''
  beforeEach(() => {
    tag = `iris-run-${process.pid}-${Math.random().toString(36).slice(2)}`
  })
  // Whatever a failing test leaves, found by the tag every process of its task inherits.
  afterEach(() => {
    killTagged(tag)
  })
  const tagged = () => ({ ...base(), env: { ...base().env, IRIS_TEST_TAG: tag }, graceMs: 2000 })
  // Before, a background child holding stdout kept `done` from ever resolving: fail in seconds, not at the timeout.
  const within = (p: Promise<TaskOutcome>, ms = 5000) =>
    Promise.race([p, new Promise<TaskOutcome>((_, no) => setTimeout(() => no(new Error(`not done in ${ms} ms`)), ms))])
  const firstLine = async (lines: string[]) => {
    for (let i = 0; i < 500 && lines.length === 0; i++) await new Promise((r) => setTimeout(r, 10))
    return Number(lines[0])
  }

  test('a background child (holding stdout) is ended when the task exits 0, before the task is done', async () => {
    const lines: string[] = []
    const h = runTask({ ...tagged(), command: ['sh', '-c', 'sleep 1000 & echo $!'], onLine: (_s, l) => lines.push(l) })
    expect(await within(h.done)).toEqual({ state: 'SUCCEEDED', exitCode: 0 })
    expect(isAlive(Number(lines[0]))).toBe(false)
    expect(taggedProcesses(tag)).toEqual([])
  })

  test('a setsid child is ended by a kill', async () => {
    const lines: string[] = []
    const h = runTask({
      ...tagged(),
      command: ['sh', '-c', 'setsid sleep 1000 >/dev/null 2>&1 </dev/null & echo $!; sleep 1000'],
      onLine: (_s, l) => lines.push(l),
    })
    const pid = await firstLine(lines)
    expect(isAlive(pid)).toBe(true)
    h.kill(2000)
    expect(await within(h.done)).toMatchObject({ state: 'KILLED' })
    expect(isAlive(pid)).toBe(false)
    expect(taggedProcesses(tag)).toEqual([])
  })

  test.each([
    ['exits 0', 0, 'SUCCEEDED'],
    ['fails', 3, 'FAILED'],
  ])('a setsid child is ended when its task %s', async (_what, code, state) => {
    const lines: string[] = []
    const h = runTask({
      ...tagged(),
      command: ['sh', '-c', `setsid sleep 1000 >/dev/null 2>&1 </dev/null & echo $!; exit ${code}`],
      onLine: (_s, l) => lines.push(l),
    })
    expect(await within(h.done)).toMatchObject({ state, exitCode: code })
    expect(isAlive(Number(lines[0]))).toBe(false)
  })

  test('a child that ignores SIGTERM gets SIGKILL after the grace period; the task is done only then', async () => {
    const lines: string[] = []
    // The task exits only once the child's trap is set: a SIGTERM before that would end it at once.
    const script =
      `setsid sh -c 'trap "" TERM; : > ready; while :; do sleep 0.05; done' >/dev/null 2>&1 </dev/null & ` +
      'echo $!; until [ -e ready ]; do sleep 0.01; done'
    const h = runTask({ ...tagged(), graceMs: 400, command: ['sh', '-c', script], onLine: (_s, l) => lines.push(l) })
    const pid = await firstLine(lines)
    const t0 = Date.now()
    let doneAt = 0
    const outcome = within(h.done).then((o) => {
      doneAt = Date.now()
      // When the task is done, its tree is gone: the next task may have its resources.
      expect(isAlive(pid)).toBe(false)
      return o
    })
    await new Promise((r) => setTimeout(r, 200))
    expect(isAlive(pid)).toBe(true)
    expect(doneAt).toBe(0)
    expect(await outcome).toEqual({ state: 'SUCCEEDED', exitCode: 0 })
    expect(doneAt - t0).toBeGreaterThanOrEqual(350)
  })
})

test('probeDocker says why an engine is not usable', async () => {
  const p = await probeDocker({ binary: '/nonexistent/docker' })
  expect(p).toEqual({ available: false, reason: 'no "/nonexistent/docker" command on this worker' })
  const real = await probeDocker()
  // On a host where the engine answers this is true; otherwise a reason is given.
  if (!real.available) expect(real.reason).toMatch(/docker/)
})
