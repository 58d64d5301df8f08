import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import type { Client } from './client.js'
import { openClient, type Opened } from './fixtures/backends.js'
import { jobRequest } from './job.js'

const dir = mkdtempSync(join(tmpdir(), 'fray-job-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
const node = process.execPath
const fixture = new URL('./fixtures/job-fn.ts', import.meta.url).href

describe.each(['process', 'iris'] as const)('jobs on the %s backend', (mode) => {
  let opened: Opened
  let client: Client
  beforeAll(async () => {
    opened = await openClient(mode)
    client = opened.client
  })
  afterAll(() => opened.close())

  test('a command runs to success and its output is captured', async () => {
    const job = await client.submit({
      name: 'hello',
      entrypoint: { command: [node, '-e', 'console.log("hi"); console.error("to stderr")'] },
    })
    expect(await job.wait()).toBe('succeeded')
    expect(await job.status()).toBe('succeeded')
    expect(await job.logs()).toEqual(expect.arrayContaining(['hi', 'to stderr']))
  })

  test('a failing command fails wait with JOB_FAILED and its last output', async () => {
    const job = await client.submit({
      name: 'boom',
      entrypoint: { command: [node, '-e', 'console.error("oh no"); process.exit(4)'] },
    })
    await expect(job.wait()).rejects.toMatchObject({
      code: 'JOB_FAILED',
      message: expect.stringMatching(/replica 0 exited with code 4[\s\S]*oh no/),
    })
    expect(await job.wait({ raiseOnFailure: false })).toBe('failed')
  })

  test('terminate stops a running job', async () => {
    const job = await client.submit({
      name: 'sleeper',
      entrypoint: { command: [node, '-e', 'setTimeout(() => {}, 60000)'] },
    })
    expect(['pending', 'running']).toContain(await job.status())
    await expect(job.wait({ timeoutMs: 50 })).rejects.toMatchObject({ code: 'JOB_TIMEOUT' })
    await job.terminate()
    expect(await job.status()).toBe('stopped')
  })

  test('a callable entrypoint runs an exported function in each replica', async () => {
    const marker = join(dir, `marker-${mode}`)
    const job = await client.submit({
      name: 'callable',
      entrypoint: { module: fixture, export: 'writeMarker', args: [marker, 'hello'] },
      resources: { replicas: 2 },
    })
    expect(await job.wait()).toBe('succeeded')
    expect(readFileSync(`${marker}.0`, 'utf8')).toBe('hello 2')
    expect(readFileSync(`${marker}.1`, 'utf8')).toBe('hello 2')
    expect(await job.logs()).toEqual(expect.arrayContaining(['[0] wrote hello', '[1] wrote hello']))
  })

  test('maxRetries starts a failed replica again', async () => {
    const once = join(dir, `once-${mode}`)
    const job = await client.submit({
      name: 'retry',
      entrypoint: { module: fixture, export: 'failOnce', args: [once] },
      maxRetries: 1,
    })
    expect(await job.wait()).toBe('succeeded')
    expect(existsSync(once)).toBe(true)
    expect((await job.logs()).join('\n')).toMatch(/first attempt fails on purpose[\s\S]*second attempt ok/)
  })
})

test('bad job requests are refused naming the field', () => {
  expect(() => jobRequest({ name: 'has space', entrypoint: { command: ['x'] } })).toThrow(
    /job request name: letters, digits/,
  )
  expect(() => jobRequest({ name: 'ok', entrypoint: { command: [] } })).toThrow(/job request entrypoint/)
  expect(() => jobRequest({ name: 'ok', entrypoint: { command: ['x'] }, resources: { gpu: -1 } })).toThrow(
    /resources\.gpu/,
  )
  expect(() => jobRequest({ name: 'ok', entrypoint: { command: ['x'] }, bogus: 1 } as never)).toThrow(
    /job request \(root\): Unrecognized key: "bogus"/,
  )
})
