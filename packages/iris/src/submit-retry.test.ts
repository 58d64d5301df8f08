/**
 * `iris submit` survives a controller that goes away mid-call: the call is retried
 * with the same client-made request id, so a job the controller had already stored
 * is found again instead of being made twice.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, expect, test } from 'vitest'
import { IrisClient } from './client.js'
import { runCli } from './cli.js'
import { startController, type ControllerServer } from './controller-server.js'

let dir: string
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'iris-retry-'))
})
afterAll(() => {
  rmSync(dir, { recursive: true, force: true })
})

test('a submit whose job is stored but whose reply is lost, while the ' +
  'controller restarts, is retried and makes exactly one job', async () => {
  const statePath = join(dir, 'iris.sqlite')
  const token = 'retry-test-token-0123456789'
  const first = await startController({ statePath, token })
  const port = Number(first.address.split(':').pop())
  let stored: (id: string) => void = () => {}
  const committed = new Promise<string>((r) => (stored = r))
  // The controller stores the job, then dies before its answer leaves.
  const realSubmit = first.controller.submit.bind(first.controller)
  first.controller.submit = ((...args: Parameters<typeof realSubmit>) => {
    const id = realSubmit(...args)
    first.server.forceShutdown()
    first.controller.close()
    stored(id)
    return id
  }) as typeof realSubmit

  const out: string[] = []
  const err: string[] = []
  const io = {
    out: (l: string) => out.push(l),
    err: (l: string) => err.push(l),
    env: { IRIS_CONTROLLER: first.address, IRIS_TOKEN: token },
    stopped: Promise.resolve(),
  }
  const cli = runCli(['submit', '--job-name', 'once', '--', 'true'], io)
  const jobId = await committed
  // The controller comes back on the same port and state while the CLI retries.
  let second: ControllerServer | undefined
  try {
    second = await startController({ statePath, token, port })
    const code = await cli
    expect(err).toEqual([])
    expect(code).toBe(0)
    expect(out).toEqual([jobId])
    const client = new IrisClient({ controller: second.address, token })
    try {
      expect((await client.list()).map((j) => j.jobId)).toEqual([jobId])
    } finally {
      client.close()
    }
  } finally {
    await cli.catch(() => {})
    await second?.close()
  }
}, 60_000)

test('a submit that never reaches a controller gives up after its ' +
  'retry window with CONTROLLER_UNAVAILABLE', async () => {
  const server = await startController({ statePath: join(dir, 'gone.sqlite') })
  const address = server.address
  await server.close()
  const client = new IrisClient({ controller: address, submitRetryMs: 500 })
  try {
    await expect(client.submit({ name: 'nowhere', command: ['true'] })).rejects.toThrow(/did not answer/)
  } finally {
    client.close()
  }
}, 30_000)
