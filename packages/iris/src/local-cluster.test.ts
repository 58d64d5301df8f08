/** `iris cluster start --local` as a real process, used through the gRPC client. */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { expect, test } from 'vitest'
import { IrisClient } from './client.js'
import { startIris } from './internal/test-processes.js'

test('iris cluster start --local runs jobs and keeps their logs under the prefix', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'iris-localcli-'))
  const cluster = startIris(
    [
      'cluster',
      'start',
      '--local',
      '--prefix',
      join(dir, 'prefix'),
      '--port',
      '0',
      '--workers',
      '2',
      '--resources',
      'cpu=2,memory=2G',
    ],
    { logDir: dir, name: 'cluster' },
  )
  let client: IrisClient | undefined
  try {
    const m = await cluster.waitFor(/local cluster on (\S+) /)
    client = new IrisClient({
      controller: m[1]!,
      token: readFileSync(join(dir, 'prefix', 'iris', 'token'), 'utf8').trim(),
    })
    const id = await client.submit({
      name: 'hello',
      replicas: 2,
      command: ['sh', '-c', 'echo "hello from $IRIS_TASK_INDEX"'],
    })
    const job = await client.wait(id, { timeoutMs: 30_000 })
    expect(job.state).toBe('SUCCEEDED')
    expect(new Set(job.tasks.map((t) => t.workerId))).toEqual(new Set(['local-0', 'local-1']))
    const lines: string[] = []
    for await (const l of client.logs(id, { since: '5m' })) lines.push(l.line)
    expect(lines.sort()).toEqual(['hello from 0', 'hello from 1'])
    await new Promise((r) => setTimeout(r, 50))
    const recent: string[] = []
    for await (const l of client.logs(id, { since: 1 })) recent.push(l.line)
    expect(recent).toEqual([])
    expect((await client.workers()).map((w) => w.workerId)).toEqual(['local-0', 'local-1'])
  } finally {
    client?.close()
    cluster.child.kill('SIGTERM')
    expect(await cluster.exited).toBe(0)
    rmSync(dir, { recursive: true, force: true })
  }
}, 60_000)
