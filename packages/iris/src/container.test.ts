/**
 * The image path. No docker engine runs on this machine, so a stand-in `docker`
 * command plays the engine: it answers `info`, records its arguments, and runs
 * the command of `docker run` in the mounted directory.
 */
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, expect, test } from 'vitest'
import { dockerRunArgs, probeDocker } from './container.js'
import { Controller } from './controller.js'
import { inProcessLink } from './controller-link.js'
import { resolveJobRequest } from './job-spec.js'
import { Worker } from './worker.js'

let dir: string
let fakeDocker: string
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'iris-docker-'))
  fakeDocker = join(dir, 'docker')
  writeFileSync(
    fakeDocker,
    `#!${process.execPath}
const fs = require('fs'), { spawnSync } = require('child_process')
const args = process.argv.slice(2)
fs.appendFileSync(${JSON.stringify(join(dir, 'calls.jsonl'))}, JSON.stringify(args) + '\\n')
if (args[0] === 'info') { console.log('28.2.2'); process.exit(0) }
let i = 1, vol = '', env = { PATH: process.env.PATH }
while (args[i].startsWith('-')) {
  if (args[i] === '--rm' || args[i] === '--init') { i++; continue }
  const v = args[i + 1]
  if (args[i] === '-e') env[v.slice(0, v.indexOf('='))] = v.slice(v.indexOf('=') + 1)
  if (args[i] === '-v') vol = v.split(':')[0]
  i += 2
}
const r = spawnSync(args[i + 1], args.slice(i + 2), { cwd: vol, env: { ...env, IMAGE: args[i] }, stdio: 'inherit' })
process.exit(r.status ?? 1)
`,
  )
  chmodSync(fakeDocker, 0o755)
})
afterAll(() => rmSync(dir, { recursive: true, force: true }))

test('dockerRunArgs mounts the task directory and passes the environment', () => {
  expect(
    dockerRunArgs({
      image: 'python:3.12',
      name: 'iris-j-1',
      workDir: '/w/j/0-1/work',
      env: { IRIS_JOB_ID: 'j' },
      command: ['python', '-V'],
      gpus: [2, 3],
    }),
  ).toEqual([
    'docker',
    'run',
    '--rm',
    '--init',
    '--name',
    'iris-j-1',
    '-v',
    '/w/j/0-1/work:/workspace',
    '-w',
    '/workspace',
    '--network',
    'host',
    '--gpus',
    '"device=2,3"',
    '-e',
    'IRIS_JOB_ID=j',
    'python:3.12',
    'python',
    '-V',
  ])
})

test('where an engine answers, the task runs through docker run in its image', async () => {
  expect(await probeDocker({ binary: fakeDocker })).toEqual({ available: true })
  const controller = new Controller({ statePath: join(dir, 'iris.sqlite'), heartbeatMs: 200 })
  const worker = new Worker({
    link: inProcessLink(controller),
    controllerAddress: 'ctl:1',
    workDir: join(dir, 'work'),
    workerId: 'dw',
    resources: { cpu: 1, memory: 2 ** 30, gpu: 0 },
    dockerBinary: fakeDocker,
    retryDelayMs: 50,
  })
  await worker.start()
  try {
    const id = controller.submit(
      resolveJobRequest({
        name: 'boxed',
        image: 'python:3.12',
        env: { MODE: 'x' },
        command: ['sh', '-c', 'echo "$IMAGE $MODE $IRIS_JOB_ID $IRIS_TASK_DIR"'],
      }),
    )
    const job = await controller.waitForJob(id)
    expect(job.state).toBe('SUCCEEDED')
    expect(controller.readLogs(id).map((l) => l.line)).toEqual([`python:3.12 x ${id} /workspace`])
    const run = readFileSync(join(dir, 'calls.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as string[])
      .find((a) => a[0] === 'run')!
    expect(run).toContain(`${join(dir, 'work', id, '0-1', 'work')}:/workspace`)
    expect(run.slice(run.indexOf('python:3.12'))).toEqual([
      'python:3.12',
      'sh',
      '-c',
      'echo "$IMAGE $MODE $IRIS_JOB_ID $IRIS_TASK_DIR"',
    ])
  } finally {
    await worker.stop()
    controller.close()
  }
})
