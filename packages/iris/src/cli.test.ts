import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import pkg from '../package.json' with { type: 'json' }
import { runCli } from './cli.js'
import { startController, type ControllerServer } from './controller-server.js'

function capture(env: NodeJS.ProcessEnv = {}) {
  const out: string[] = []
  const err: string[] = []
  return {
    out,
    err,
    io: { out: (l: string) => out.push(l), err: (l: string) => err.push(l), env, stopped: Promise.resolve() },
  }
}

describe('bad usage exits 2 and names the problem', () => {
  test.each([
    [['submit', '--job-name', 'x', '--resources', 'cpu=0', '--', 'true'], /cpu="0" must be a positive number/],
    [['submit', '--job-name', 'x', '--replicas', '0', '--', 'true'], /--replicas.*expected a replica count/],
    [
      ['submit', '--job-name', 'x', '--priority', 'urgent', '--', 'true'],
      /Allowed choices are production, interactive, batch/,
    ],
    [['submit', '--job-name', 'x', '--env', 'NOEQUALS', '--', 'true'], /--env "NOEQUALS": expected KEY=VALUE/],
    [
      ['submit', '--job-name', 'x', '--mount', 'nopath', '--', 'true'],
      /mount "nopath": expected ARTIFACT\[@VERSION\]:path/,
    ],
    [['submit', '--job-name', 'bad name!', '--', 'true'], /field "name"/],
    [['submit', '--', 'true'], /required option '--job-name <name>'/],
    [['logs', 'job-1', '--since', 'yesterday'], /--since="yesterday" is not a duration/],
    [['list', '--state', 'DONE'], /Allowed choices are PENDING/],
    [['frobnicate'], /unknown command 'frobnicate'/],
    [['cluster', 'start'], /give --local .*--platform k8s --namespace NS/],
    [['controller', '--port', 'http'], /expected a port/],
  ])('%j', async (argv, message) => {
    const c = capture()
    expect(await runCli(argv, c.io)).toBe(2)
    expect(c.err.join('\n')).toMatch(message)
  })
})

test(
  'no arguments print help and exit 2; --version prints the ' +
    'package version; help names every command without loading it',
  async () => {
    const none = capture()
    expect(await runCli([], none.io)).toBe(2)
    expect(none.err.join('\n')).toMatch(/Usage: iris/)
    const v = capture()
    expect(await runCli(['--version'], v.io)).toBe(0)
    expect(v.out).toEqual([pkg.version])
    const h = capture()
    expect(await runCli(['--help'], h.io)).toBe(0)
    for (const name of [
      'submit',
      'status',
      'list',
      'logs',
      'kill',
      'workers',
      'job',
      'controller',
      'worker',
      'cluster',
    ])
      expect(h.out.join('\n')).toMatch(new RegExp(`\\n  ${name} `))
    const group = capture()
    expect(await runCli(['job'], group.io)).toBe(2)
    expect(group.err.join('\n')).toMatch(/run \[options\]/)
  },
)

describe('read commands against a controller', () => {
  let dir: string
  let server: ControllerServer
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'iris-cli-'))
    server = await startController({ statePath: join(dir, 'iris.sqlite') })
  })
  afterAll(async () => {
    await server.close()
    rmSync(dir, { recursive: true, force: true })
  })

  test('submit prints the id; status, list and workers take --json; kill kills', async () => {
    const env = { IRIS_CONTROLLER: server.address }
    const s = capture(env)
    expect(
      await runCli(
        [
          'submit',
          '--job-name',
          'queued',
          '--resources',
          'cpu=2,memory=1Gi',
          '--replicas',
          '2',
          '--env',
          'A=1',
          '--priority',
          'production',
          '--',
          'echo',
          'hi',
        ],
        s.io,
      ),
    ).toBe(0)
    const jobId = s.out[0]!
    expect(jobId).toMatch(/^queued-[0-9a-f]{8}$/)

    const st = capture(env)
    expect(await runCli(['status', jobId, '--json'], st.io)).toBe(0)
    const { job } = JSON.parse(st.out[0]!)
    // Env values stay on the controller: status shows the names.
    expect(job).toMatchObject({
      state: 'PENDING',
      priority: 'production',
      spec: {
        command: ['echo', 'hi'],
        env: { A: '[REDACTED]' },
        replicas: 2,
        resources: { cpu: 2, memory: 2 ** 30, gpu: 0 },
      },
    })

    const human = capture(env)
    expect(await runCli(['status', jobId], human.io)).toBe(0)
    expect(human.out[0]).toMatch(/state: +PENDING/)

    const ls = capture(env)
    expect(await runCli(['list', '--json', '--state', 'PENDING'], ls.io)).toBe(0)
    expect(JSON.parse(ls.out[0]!).map((j: { jobId: string }) => j.jobId)).toEqual([jobId])

    const ws = capture(env)
    expect(await runCli(['workers', '--json'], ws.io)).toBe(0)
    expect(JSON.parse(ws.out[0]!)).toEqual([])

    const k = capture(env)
    expect(await runCli(['job', 'stop', jobId], k.io)).toBe(0)
    expect(k.out).toEqual([`${jobId}: KILLED`])

    const missing = capture(env)
    expect(await runCli(['status', 'nope-1'], missing.io)).toBe(1)
    expect(missing.err.join('\n')).toMatch(/job "nope-1" does not exist; run "iris list"/)
  })

  test('an unreachable controller is a failure that says where it looked', async () => {
    const c = capture({ IRIS_CONTROLLER: '127.0.0.1:1' })
    expect(await runCli(['list'], c.io)).toBe(1)
    expect(c.err.join('\n')).toMatch(/controller at 127\.0\.0\.1:1 did not answer/)
  })
})
