import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, test } from 'vitest'
import { probeDocker } from './container.js'
import { orphanGuard, runTask } from './task-runner.js'

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

test('probeDocker says why an engine is not usable', async () => {
  const p = await probeDocker({ binary: '/nonexistent/docker' })
  expect(p).toEqual({ available: false, reason: 'no "/nonexistent/docker" command on this worker' })
  const real = await probeDocker()
  // On a host where the engine answers this is true; otherwise a reason is given.
  if (!real.available) expect(real.reason).toMatch(/docker/)
})
