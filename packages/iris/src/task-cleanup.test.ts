/**
 * A job's task is its whole process tree, on a real local cluster: what it starts in the background or in a session
 * of its own is gone once the job has ended (SUCCEEDED, `iris kill`, the worker stopping), and the worker's
 * resources go to the next job only after that. Every process a test starts carries its tag, and is killed after
 * the test even when it fails.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, test } from 'vitest'
import { runCli } from './cli.js'
import type { IrisClient } from './client.js'
import { isAlive, killTagged, taggedProcesses } from './internal/test-processes.js'
import { LocalCluster } from './local-cluster.js'

const linux = process.platform === 'linux'
let dir: string
let tag = ''
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'iris-tree-'))
})
afterAll(() => rmSync(dir, { recursive: true, force: true }))
beforeEach(() => {
  tag = `iris-tree-${process.pid}-${Math.random().toString(36).slice(2)}`
})
afterEach(() => {
  killTagged(tag)
})

async function stdout(client: IrisClient, id: string): Promise<string[]> {
  const out: string[] = []
  for await (const l of client.logs(id)) if (l.stream === 'stdout') out.push(l.line)
  return out
}

async function firstLine(client: IrisClient, id: string): Promise<number> {
  for (let i = 0; i < 500; i++) {
    const lines = await stdout(client, id)
    if (lines.length > 0) return Number(lines[0])
    await new Promise((r) => setTimeout(r, 20))
  }
  throw new Error(`job ${id} printed nothing in 10 s`)
}

describe.skipIf(!linux)('on a local cluster with one cpu', () => {
  let cluster: LocalCluster
  let client: IrisClient
  beforeAll(async () => {
    cluster = await LocalCluster.start({
      prefix: join(dir, 'cluster'),
      resources: { cpu: 1, memory: 8e9, gpu: 0 },
      killGraceMs: 500,
      warmRunners: false,
    })
    client = cluster.client()
  })
  afterAll(async () => {
    client.close()
    await cluster.stop()
  })
  const submit = (script: string) =>
    client.submit({ name: 'tree', command: ['sh', '-c', script], env: { IRIS_TEST_TAG: tag } })

  test('a background sleep (holding stdout) is gone once the job SUCCEEDED', async () => {
    const id = await submit('sleep 1000 & echo $!')
    // Before, the job stayed RUNNING as long as the sleep held its stdout.
    expect((await client.wait(id, { timeoutMs: 10_000 })).state).toBe('SUCCEEDED')
    const [pid] = await stdout(client, id)
    expect(isAlive(Number(pid))).toBe(false)
    expect(taggedProcesses(tag)).toEqual([])
  })

  test('a setsid sleep is gone once the job SUCCEEDED', async () => {
    const id = await submit('setsid sleep 1000 >/dev/null 2>&1 </dev/null & echo $!')
    expect((await client.wait(id, { timeoutMs: 10_000 })).state).toBe('SUCCEEDED')
    expect(isAlive(Number((await stdout(client, id))[0]))).toBe(false)
    expect(taggedProcesses(tag)).toEqual([])
  })

  test('a setsid sleep is gone after `iris kill`', async () => {
    const id = await submit('setsid sleep 1000 >/dev/null 2>&1 </dev/null & echo $!; sleep 1000')
    const pid = await firstLine(client, id)
    expect(isAlive(pid)).toBe(true)
    const out: string[] = []
    const io = {
      out: (l: string) => out.push(l),
      err: (l: string) => out.push(l),
      env: { IRIS_CONTROLLER: cluster.address, IRIS_TOKEN_FILE: cluster.tokenFile },
      stopped: Promise.resolve(),
    }
    expect(await runCli(['kill', id], io), out.join('\n')).toBe(0)
    expect((await client.wait(id, { timeoutMs: 10_000 })).state).toBe('KILLED')
    // The attempt is final on the controller only once the worker has ended its tree.
    for (let i = 0; i < 100 && isAlive(pid); i++) await new Promise((r) => setTimeout(r, 20))
    expect(isAlive(pid)).toBe(false)
    expect(taggedProcesses(tag)).toEqual([])
  })

  test("the next job gets the worker's cpu only once the last one's tree is gone", async () => {
    const pidFile = join(dir, `${tag}.pid`)
    // This child ignores SIGTERM: only the SIGKILL after the grace period (500 ms) ends it.
    const first = await submit(
      `setsid sh -c 'trap "" TERM; : > ${pidFile}.ready; while :; do sleep 0.05; done' >/dev/null 2>&1 </dev/null & ` +
        `echo $! > ${pidFile}; until [ -e ${pidFile}.ready ]; do sleep 0.01; done`,
    )
    // Alive: in /proc and not a zombie (one SIGKILLed and not yet reaped by init is gone but for its entry).
    const second = await submit(
      `p=$(cat ${pidFile}); if [ -e /proc/$p ] && ! grep -qE '^State:\\s+[ZX]' /proc/$p/status; ` +
        'then echo ALIVE $(grep ^State: /proc/$p/status); else echo GONE; fi',
    )
    expect((await client.wait(first, { timeoutMs: 10_000 })).state).toBe('SUCCEEDED')
    expect((await client.wait(second, { timeoutMs: 10_000 })).state).toBe('SUCCEEDED')
    // Before, the second job ran beside what the first left: ALIVE.
    expect(await stdout(client, second)).toEqual(['GONE'])
    expect(isAlive(Number(readFileSync(pidFile, 'utf8')))).toBe(false)
  })
})

test.skipIf(!linux)("a worker that stops ends its tasks' whole trees", async () => {
  const cluster = await LocalCluster.start({
    prefix: join(dir, 'stopping'),
    resources: { cpu: 1, memory: 8e9, gpu: 0 },
    killGraceMs: 500,
  })
  const client = cluster.client()
  try {
    const id = await client.submit({
      name: 'tree',
      command: ['sh', '-c', 'setsid sleep 1000 >/dev/null 2>&1 </dev/null & echo $!; sleep 1000'],
      env: { IRIS_TEST_TAG: tag },
    })
    const pid = await firstLine(client, id)
    expect(isAlive(pid)).toBe(true)
    client.close()
    await cluster.stop()
    expect(isAlive(pid)).toBe(false)
    expect(taggedProcesses(tag)).toEqual([])
  } finally {
    client.close()
    await cluster.stop().catch(() => {})
  }
})
