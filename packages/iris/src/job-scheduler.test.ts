import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, expect, test } from 'vitest'
import type { JobRequest } from './job-spec.js'
import { JobScheduler } from './job-scheduler.js'

let dir: string
let scheduler: JobScheduler
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'iris-js-'))
  scheduler = new JobScheduler({
    cluster: 'local',
    prefix: dir,
    local: { heartbeatMs: 200, resources: { cpu: 2, memory: 2 ** 30, gpu: 0 } },
  })
})
afterAll(async () => {
  await scheduler.close()
  rmSync(dir, { recursive: true, force: true })
})

test('submits one request, and anything that yields requests', async () => {
  const [one] = await scheduler.submit({ name: 'single', command: ['echo', 'single'] })
  function* steps(): Generator<JobRequest> {
    yield { name: 'step-a', command: ['echo', 'a'] }
    yield { name: 'step-b', command: ['sh', '-c', 'exit 2'] }
  }
  const many = await scheduler.submit(steps())
  async function* more(): AsyncGenerator<JobRequest> {
    yield { name: 'async-step', command: ['echo', 'c'], priority: 'production' }
  }
  const [fromAsync] = await scheduler.submit(more)
  expect(many.map((h) => h.name)).toEqual(['step-a', 'step-b'])
  const states = await Promise.all(
    [one!, ...many, fromAsync!].map(async (h) => (await h.wait({ timeoutMs: 30_000 })).state),
  )
  expect(states).toEqual(['SUCCEEDED', 'SUCCEEDED', 'FAILED', 'SUCCEEDED'])
  const lines: string[] = []
  for await (const l of one!.logs()) lines.push(l.line)
  expect(lines).toEqual(['single'])
  // The local cluster keeps its state under the prefix.
  expect((await scheduler.client()).address).toMatch(/^127\.0\.0\.1:\d+$/)
}, 60_000)

test('handles kill', async () => {
  const [h] = await scheduler.submit({ name: 'long', command: ['sleep', '30'] })
  while ((await h!.status()).state !== 'RUNNING') await new Promise((r) => setTimeout(r, 20))
  expect(await h!.kill()).toBe('KILLED')
  expect((await h!.wait()).state).toBe('KILLED')
}, 30_000)
