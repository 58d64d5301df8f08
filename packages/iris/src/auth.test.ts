import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, expect, test } from 'vitest'
import { IrisClient } from './client.js'
import { startController, type ControllerServer } from './controller-server.js'
import { isIrisError } from './errors.js'
import { grpcLink } from './grpc-link.js'
import { Worker } from './worker.js'

let dir: string
let server: ControllerServer
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'iris-auth-'))
  server = await startController({ statePath: join(dir, 'iris.sqlite'), token: 's3cret-token', heartbeatMs: 200 })
})
afterAll(async () => {
  await server.close()
  rmSync(dir, { recursive: true, force: true })
})

test('with a token configured, every call needs it', async () => {
  for (const token of [undefined, 'wrong', 'iris-job.forged-1.00ff']) {
    const c = new IrisClient({ controller: server.address, ...(token ? { token } : {}) })
    await expect(c.list()).rejects.toSatisfy(
      (e) => isIrisError(e, 'UNAUTHENTICATED') && /--token-file PATH/.test((e as Error).message),
    )
    await expect(c.submit({ name: 'x', command: ['true'] })).rejects.toSatisfy((e) => isIrisError(e, 'UNAUTHENTICATED'))
    c.close()
  }
  const noToken = grpcLink(server.address)
  await expect(
    noToken.register({
      workerId: 'w',
      address: 'h',
      resources: { cpu: 1, memory: 2 ** 30, gpu: 0 },
      docker: false,
      attempts: [],
    }),
  ).rejects.toSatisfy((e) => isIrisError(e, 'UNAUTHENTICATED'))
  noToken.close()
  expect(server.controller.listWorkers()).toEqual([])
})

test('with the token, workers and clients work', async () => {
  const link = grpcLink(server.address, { token: 's3cret-token' })
  const worker = new Worker({
    link,
    controllerAddress: server.address,
    workDir: join(dir, 'work'),
    workerId: 'w1',
    resources: { cpu: 1, memory: 2 ** 30, gpu: 0 },
    retryDelayMs: 50,
  })
  await worker.start()
  const c = new IrisClient({ controller: `http://${server.address}`, token: 's3cret-token' })
  try {
    // The task gets a token of its own job, never the cluster token.
    const id = await c.submit({
      name: 'authed',
      command: ['sh', '-c', 'test -n "$IRIS_TOKEN" && test "$IRIS_TOKEN" != s3cret-token && echo ok'],
    })
    const job = await c.wait(id, { timeoutMs: 30_000 })
    expect(job.state).toBe('SUCCEEDED')
    await expect(c.status('nope-123')).rejects.toSatisfy(
      (e) => isIrisError(e, 'JOB_NOT_FOUND') && /iris list/.test((e as Error).message),
    )
  } finally {
    c.close()
    await worker.stop()
    link.close()
  }
}, 30_000)
