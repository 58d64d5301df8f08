/**
 * What the controller costs a caller it refuses: the token is checked from the call's
 * metadata before the request is read, and worker reports may carry more log lines than a
 * control call's 4 MiB. A real controller on loopback.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, expect, test } from 'vitest'
import { IrisClient } from './client.js'
import { startController, type ControllerServer } from './controller-server.js'
import { isIrisError } from './errors.js'
import { grpcLink } from './grpc-link.js'

let dir: string
let server: ControllerServer
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'iris-gate-'))
  server = await startController({ statePath: join(dir, 'iris.sqlite'), token: 'gate-token', heartbeatMs: 200 })
})
afterAll(async () => {
  await server.close()
  rmSync(dir, { recursive: true, force: true })
})

const spec = (bytes: number) => ({ name: 'big', command: ['true'], env: { PAD: 'x'.repeat(bytes) } })

test(
  'a call without a valid token is refused from its metadata, ' +
    'before its request is read: an 8 MiB submit is UNAUTHENTICATED, ' +
    'not over the size limit',
  async () => {
    for (const token of [undefined, 'wrong']) {
      const client = new IrisClient({ controller: server.address, ...(token ? { token } : {}) })
      try {
        // Were the request read first, its size (over submit's 4 MiB) would be the answer.
        await expect(client.submit(spec(8 * 1024 * 1024))).rejects.toSatisfy((e) => isIrisError(e, 'UNAUTHENTICATED'))
      } finally {
        client.close()
      }
    }
  },
)

test(
  'with the token, an oversized submit is refused with the size ' +
    'limit named, and a worker report of 5000 one-KiB log lines ' +
    '(over 4 MiB) is taken',
  async () => {
    const client = new IrisClient({ controller: server.address, token: 'gate-token' })
    const link = grpcLink(server.address, { token: 'gate-token' })
    try {
      await expect(client.submit(spec(8 * 1024 * 1024))).rejects.toThrow(
        /RESOURCE_EXHAUSTED.*over the limit of 4194304 bytes \(4 MiB\)/,
      )
      const logs = Array.from({ length: 5000 }, (_, i) => ({
        attemptId: 'none-1/0/1',
        lineNo: i,
        stream: 'stdout' as const,
        ts: 0,
        line: 'y'.repeat(1024),
      }))
      expect(await link.report({ workerId: 'w-unknown', attempts: [], logs })).toEqual({ reregister: true })
    } finally {
      client.close()
      link.close()
    }
  },
)

test('replies that grow with the cluster (listJobs over 4 MiB) are not held to a request limit', async () => {
  const client = new IrisClient({ controller: server.address, token: 'gate-token' })
  try {
    // 30 pending jobs (no worker) whose commands carry 200 KB each: a 6 MB list.
    for (let i = 0; i < 30; i++)
      await client.submit({ name: `long-${i}`, command: ['true', String(i).padEnd(200_000, 'z')] })
    const jobs = await client.list()
    expect(jobs.filter((j) => j.name.startsWith('long-'))).toHaveLength(30)
  } finally {
    client.close()
  }
})
