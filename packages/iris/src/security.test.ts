/**
 * Who may call the controller: a local cluster's credential file, job-scoped
 * task tokens, env values kept on the controller, secrets resolved on the worker,
 * and an error that names flags the CLI has. Real controllers, workers and task
 * processes on loopback.
 */
import { spawnSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync, existsSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import type { Command } from 'commander'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { IrisClient } from './client.js'
import { buildProgram, runCli } from './cli.js'
import { isIrisError } from './errors.js'
import { grpcLink } from './grpc-link.js'
import { IRIS_BIN, runIrisHere, startIris } from './internal/test-processes.js'
import { LocalCluster } from './local-cluster.js'

let dir: string
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'iris-security-'))
})
afterAll(() => {
  rmSync(dir, { recursive: true, force: true })
})

function capture(env: NodeJS.ProcessEnv) {
  const out: string[] = []
  const err: string[] = []
  return {
    out,
    err,
    io: { out: (l: string) => out.push(l), err: (l: string) => err.push(l), env, stopped: Promise.resolve() },
  }
}

const everyCommand = await buildProgram(capture({}).io)

const TSX = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href
/** A child job's command: it leaves its token where the test reads it. */
const CHILD = 'printf %s "$IRIS_TOKEN" > "$IRIS_TASK_DIR/../../child-token.txt"'
/**
 * `iris ARGV` for each `[NAME, ARGV]` of argv[2] (JSON), one after another in one process, each as the binary runs
 * it (`cli-main.ts`: `runCli` with this process's I/O and environment); prints `NAME=EXIT_CODE` after each.
 */
const CALLS = `
const { runCli } = await import(${JSON.stringify(pathToFileURL(join(import.meta.dirname, 'cli.ts')).href)})
const io = {
  out: (l) => process.stdout.write(l + '\\n'),
  err: (l) => process.stderr.write(l + '\\n'),
  env: process.env,
  stopped: new Promise(() => {}),
}
for (const [name, argv] of JSON.parse(process.argv[2]))
  process.stdout.write(name + '=' + (await runCli(argv, io)) + '\\n')
process.stdout.write('', () => process.exit(0))
`

/** Every `--flag` a message names must be an option of `iris <command>`. */
function expectFlagsExist(message: string, command: string): void {
  const flags = [...message.matchAll(/--[a-z][a-z-]*/g)].map((m) => m[0])
  expect(flags.length).toBeGreaterThan(0)
  const program = everyCommand
  const cmd = program.commands.find((c: Command) => c.name() === command)!
  const known = new Set(cmd.options.map((o) => o.long))
  for (const f of flags) expect(known, `${f} in "${message}"`).toContain(f)
}

test('a local cluster is private: without its credential every call ' +
  'is UNAUTHENTICATED; the CLI and a worker of the same prefix ' +
  'find the 0600 credential without flags', async () => {
  const prefix = join(dir, 'private')
  const cluster = startIris(
    ['cluster', 'start', '--local', '--prefix', prefix, '--port', '0', '--resources', 'cpu=2,memory=2G'],
    { logDir: dir, name: 'private-cluster' },
  )
  const anon = { close() {} } as IrisClient
  let worker: ReturnType<typeof startIris> | undefined
  try {
    const address = (await cluster.waitFor(/local cluster on (\S+) /))[1]!
    const tokenFile = join(prefix, 'iris', 'token')
    expect(statSync(tokenFile).mode & 0o777).toBe(0o600)
    expect(statSync(join(prefix, 'iris')).mode & 0o077).toBe(0)

    const stranger = new IrisClient({ controller: address })
    Object.assign(anon, { close: () => stranger.close() })
    for (const call of [
      () => stranger.list(),
      () => stranger.submit({ name: 'x', command: ['true'] }),
      () => stranger.workers(),
      () => stranger.kill('any-1'),
    ]) {
      await expect(call()).rejects.toSatisfy((e) => isIrisError(e, 'UNAUTHENTICATED'))
    }
    const link = grpcLink(address)
    await expect(
      link.register({
        workerId: 'intruder',
        address: 'h',
        resources: { cpu: 1, memory: 2 ** 30, gpu: 0 },
        docker: false,
        attempts: [],
      }),
    ).rejects.toSatisfy((e) => isIrisError(e, 'UNAUTHENTICATED'))
    link.close()

    // Another prefix, no token: refused, and the message names flags that exist.
    const denied = await runIrisHere(['list'], { IRIS_CONTROLLER: address, MARIN_PREFIX: join(dir, 'elsewhere') })
    expect(denied.code).toBe(1)
    expect(denied.stderr).toMatch(/refused the call/)
    expectFlagsExist(denied.stderr.split('\n').find((l) => /refused/.test(l))!, 'list')

    // The same prefix: no flags needed.
    const sub = await runIrisHere(['submit', '--job-name', 'mine', '--wait', '--', 'true'], {
      IRIS_CONTROLLER: address,
      MARIN_PREFIX: prefix,
    })
    expect(sub.stderr).toMatch(/SUCCEEDED/)
    expect(sub.code).toBe(0)

    worker = startIris(
      [
        'worker',
        '--controller',
        address,
        '--worker-id',
        'extra',
        '--work-dir',
        join(dir, 'extra-work'),
        '--resources',
        'cpu=1,memory=1G',
        '--retry-delay',
        '100ms',
      ],
      {
        logDir: dir,
        name: 'private-worker',
        env: { MARIN_PREFIX: prefix },
      },
    )
    await worker.waitFor(/registered with/)
    const token = readFileSync(tokenFile, 'utf8').trim()
    const admin = new IrisClient({ controller: address, token })
    try {
      expect((await admin.workers()).map((w) => w.workerId).sort()).toEqual(['extra', 'local-0'])
      expect((await admin.list()).map((j) => j.name)).toEqual(['mine'])
    } finally {
      admin.close()
    }
  } finally {
    anon.close()
    worker?.child.kill('SIGTERM')
    if (worker) await worker.exited
    cluster.child.kill('SIGTERM')
    expect(await cluster.exited).toBe(0)
  }
}, 120_000)

describe('what a task may do with its credential', () => {
  const ADMIN = 'cluster-admin-token-0123456789'
  let cluster: LocalCluster
  let admin: IrisClient
  const saved = process.env.IRIS_TOKEN
  beforeAll(async () => {
    writeFileSync(join(dir, 'iris-calls.mjs'), CALLS)
    // The driver's own environment holds the admin token: tasks must not inherit it.
    process.env.IRIS_TOKEN = ADMIN
    cluster = await LocalCluster.start({
      prefix: join(dir, 'scoped'),
      token: ADMIN,
      resources: { cpu: 4, memory: 4 * 2 ** 30, gpu: 0 },
      heartbeatMs: 200,
    })
    admin = cluster.client()
  }, 60_000)
  afterAll(async () => {
    admin?.close()
    await cluster?.stop()
    if (saved === undefined) delete process.env.IRIS_TOKEN
    else process.env.IRIS_TOKEN = saved
  })

  const iris = `"${process.execPath}" "${IRIS_BIN}"`
  // A task's further `iris` calls, in one process (CALLS): a process start is most of a short command's cost.
  const calls = (list: [string, string[]][]) => {
    const argv = JSON.stringify(list).replaceAll("'", "'\\''")
    return `"${process.execPath}" --import ${TSX} "${join(dir, 'iris-calls.mjs')}" '${argv}'`
  }
  const linesOf = async (jobId: string) => {
    const out: string[] = []
    for await (const l of admin.logs(jobId)) out.push(l.line)
    return out
  }

  test('a task gets a token for its own job, not the admin credential: ' +
    'it reads its job, but not other jobs or workers, and submits ' +
    'children only when allowed', async () => {
    const other = await admin.submit({ name: 'other', command: ['true'] })
    expect((await admin.wait(other, { timeoutMs: 30_000 })).state).toBe('SUCCEEDED')
    const probe = [
      `printf %s "$IRIS_TOKEN" > token.txt`,
      `${iris} status "$IRIS_JOB_ID" --json > own.json; echo "own=$?"`,
      calls([
        ['status-other', ['status', other]],
        ['kill-other', ['kill', other]],
        ['workers', ['workers']],
        ['child', ['submit', '--job-name', 'child', '--wait', '--', 'sh', '-c', CHILD]],
      ]),
      `cp token.txt own.json ../../`,
    ].join('\n')
    const locked = await admin.submit({ name: 'locked', command: ['sh', '-c', probe] })
    expect((await admin.wait(locked, { timeoutMs: 90_000 })).state).toBe('SUCCEEDED')
    const out = await linesOf(locked)
    expect(out).toEqual(expect.arrayContaining(['own=0', 'status-other=1', 'kill-other=1', 'workers=1', 'child=1']))
    expect(out.join('\n')).toMatch(/PERMISSION_DENIED|may not/)
    const jobDir = join(cluster.prefix, 'iris', 'work', 'local-0', locked)
    const taskToken = readFileSync(join(jobDir, 'token.txt'), 'utf8')
    expect(taskToken).not.toBe('')
    expect(taskToken).not.toBe(ADMIN)
    expect(JSON.parse(readFileSync(join(jobDir, 'own.json'), 'utf8')).job.jobId).toBe(locked)
    // The other job is untouched and no child was made.
    expect((await admin.status(other)).state).toBe('SUCCEEDED')
    expect((await admin.list()).map((j) => j.name).sort()).toEqual(['locked', 'other'])

    // The token stops at its job: the admin's calls with it are refused too.
    const asTask = new IrisClient({ controller: cluster.address, token: taskToken })
    try {
      await expect(asTask.status(other)).rejects.toSatisfy((e) => isIrisError(e, 'PERMISSION_DENIED'))
      expect((await asTask.status(locked)).jobId).toBe(locked)
      expect((await asTask.list()).map((j) => j.jobId)).toEqual([locked])
    } finally {
      asTask.close()
    }

    const parent = await admin.submit({ name: 'parent', allowChildren: true, command: ['sh', '-c', probe] })
    expect((await admin.wait(parent, { timeoutMs: 90_000 })).state).toBe('SUCCEEDED')
    const pout = await linesOf(parent)
    expect(pout).toEqual(expect.arrayContaining(['own=0', 'status-other=1', 'kill-other=1', 'workers=1', 'child=0']))
    const child = (await admin.list()).find((j) => j.name === 'child')!
    expect(child.state).toBe('SUCCEEDED')
    expect(child.spec.parent).toBe(parent)
    const pDir = join(cluster.prefix, 'iris', 'work', 'local-0', parent)
    const parentToken = readFileSync(join(pDir, 'token.txt'), 'utf8')
    const childToken = readFileSync(
      join(cluster.prefix, 'iris', 'work', 'local-0', child.jobId, 'child-token.txt'),
      'utf8',
    )
    expect(new Set([parentToken, childToken, taskToken, ADMIN]).size).toBe(4)
    // A parent may see and kill its children.
    const asParent = new IrisClient({ controller: cluster.address, token: parentToken })
    try {
      expect((await asParent.status(child.jobId)).jobId).toBe(child.jobId)
      expect(await asParent.kill(child.jobId)).toBe('SUCCEEDED')
    } finally {
      asParent.close()
    }
  }, 180_000)

  test('status, list and logs carry env names, never values; secrets ' +
    'are specs resolved on the worker, and their values are scrubbed ' +
    'from task output', async () => {
    const hf = 'hf_Secret_Value_0123456789abcdef'
    const fileSecret = 'file-secret-value-fedcba9876543210'
    const plain = 'plain-env-value-31415926'
    process.env.IRIS_TEST_HF_TOKEN = hf
    const secretFile = join(dir, 'db-password')
    writeFileSync(secretFile, `${fileSecret}\n`, { mode: 0o600 })
    try {
      const env = { IRIS_CONTROLLER: cluster.address, IRIS_TOKEN: ADMIN }
      const sub = capture(env)
      const script =
        `printf '%s|%s|%s' "$PLAIN" "$HF_TOKEN" "$DB_PASSWORD" | ` +
        `sha256sum | cut -c1-64; echo "leak $HF_TOKEN $DB_PASSWORD"`
      const code = await runCli(
        [
          'submit',
          '--job-name',
          'secretive',
          '--env',
          `PLAIN=${plain}`,
          '--secret',
          'HF_TOKEN=env:IRIS_TEST_HF_TOKEN',
          '--secret',
          `DB_PASSWORD=file:${secretFile}`,
          '--wait',
          '--',
          'sh',
          '-c',
          script,
        ],
        sub.io,
      )
      expect(sub.err.join('\n')).toMatch(/SUCCEEDED/)
      expect(code).toBe(0)
      const jobId = sub.out[0]!
      const outputs: string[] = []
      for (const argv of [
        ['status', jobId, '--json'],
        ['status', jobId],
        ['list', '--json'],
        ['list'],
        ['logs', jobId],
        ['logs', jobId, '--json'],
      ]) {
        const c = capture(env)
        expect(await runCli(argv, c.io)).toBe(0)
        outputs.push(c.out.join('\n'))
      }
      const all = outputs.join('\n')
      for (const v of [hf, fileSecret, plain]) expect(all).not.toContain(v)
      const { job } = JSON.parse(outputs[0]!)
      expect(Object.keys(job.spec.env)).toEqual(['PLAIN'])
      expect(job.spec.secrets).toEqual({ HF_TOKEN: 'env:IRIS_TEST_HF_TOKEN', DB_PASSWORD: `file:${secretFile}` })
      // The task saw the real values.
      const expected = createHash('sha256').update(`${plain}|${hf}|${fileSecret}`).digest('hex')
      expect(outputs[4]!.split('\n')).toContain(expected)
      expect(outputs[4]).toMatch(/leak \[REDACTED\] \[REDACTED\]/)
      // Secret values never reach the controller's state.
      const state = join(cluster.prefix, 'iris', 'iris.sqlite')
      const stored = [state, `${state}-wal`]
        .filter((p) => existsSync(p))
        .map((p) => readFileSync(p).toString('latin1'))
        .join('')
      expect(stored).not.toContain(hf)
      expect(stored).not.toContain(fileSecret)
      expect(statSync(state).mode & 0o077).toBe(0)

      const literal = capture(env)
      expect(
        await runCli(['submit', '--job-name', 'x', '--secret', 'HF_TOKEN=hf_literal', '--', 'true'], literal.io),
      ).toBe(2)
      expect(literal.err.join('\n')).toMatch(/--secret "HF_TOKEN=hf_literal".*env:NAME or file:PATH/)
    } finally {
      delete process.env.IRIS_TEST_HF_TOKEN
    }
  }, 120_000)
})

test('TLS: a controller with --tls-cert/--tls-key serves workers, the ' +
  'CLI and tasks that pass --tls-ca (or IRIS_TLS_CA); plaintext ' +
  'and an unknown CA are refused', async () => {
  const tls = join(dir, 'tls')
  mkdirSync(tls)
  makeCertificates(tls)
  const state = join(dir, 'tls-state', 'iris.sqlite')
  const controller = startIris(
    [
      'controller',
      '--port',
      '0',
      '--state',
      state,
      '--heartbeat',
      '300ms',
      '--tls-cert',
      join(tls, 'server.pem'),
      '--tls-key',
      join(tls, 'server-key.pem'),
    ],
    { logDir: dir, name: 'tls-controller' },
  )
  let worker: ReturnType<typeof startIris> | undefined
  try {
    const address = (await controller.waitFor(/listening on (\S+)/))[1]!
    const tokenFile = join(dir, 'tls-state', 'token')
    expect(statSync(tokenFile).mode & 0o777).toBe(0o600)
    worker = startIris(
      [
        'worker',
        '--controller',
        address,
        '--token-file',
        tokenFile,
        '--tls-ca',
        join(tls, 'ca.pem'),
        '--worker-id',
        'tw',
        '--work-dir',
        join(dir, 'tls-work'),
        '--resources',
        'cpu=2,memory=1Gi',
        '--retry-delay',
        '100ms',
      ],
      {
        logDir: dir,
        name: 'tls-worker',
      },
    )
    await worker.waitFor(/registered with/)
    const env = { IRIS_CONTROLLER: address, IRIS_TOKEN_FILE: tokenFile }
    // The task calls back over TLS with what the worker handed it.
    const sub = await runIrisHere(
      [
        'submit',
        '--tls-ca',
        join(tls, 'ca.pem'),
        '--job-name',
        'over-tls',
        '--wait',
        '--',
        'sh',
        '-c',
        `"${process.execPath}" "${IRIS_BIN}" status "$IRIS_JOB_ID"`,
      ],
      env,
    )
    expect(sub.stderr).toMatch(/SUCCEEDED/)
    expect(sub.code).toBe(0)
    const viaEnv = await runIrisHere(['list', '--json'], { ...env, IRIS_TLS_CA: join(tls, 'ca.pem') })
    expect(viaEnv.code).toBe(0)
    expect(JSON.parse(viaEnv.stdout).map((j: { name: string }) => j.name)).toEqual(['over-tls'])

    const token = readFileSync(tokenFile, 'utf8').trim()
    const plaintext = new IrisClient({ controller: address, token, deadlineMs: 5000, submitRetryMs: 0 })
    const wrongCa = new IrisClient({
      controller: address,
      token,
      tls: { caFile: join(tls, 'other-ca.pem') },
      deadlineMs: 5000,
      submitRetryMs: 0,
    })
    try {
      await expect(plaintext.list()).rejects.toSatisfy((e) => isIrisError(e, 'CONTROLLER_UNAVAILABLE'))
      await expect(wrongCa.list()).rejects.toSatisfy((e) => isIrisError(e, 'CONTROLLER_UNAVAILABLE'))
    } finally {
      plaintext.close()
      wrongCa.close()
    }
  } finally {
    worker?.child.kill('SIGTERM')
    if (worker) await worker.exited
    controller.child.kill('SIGTERM')
    await controller.exited
  }
}, 120_000)

/** A CA, a server certificate for 127.0.0.1 signed by it, and an unrelated second CA, made with the openssl CLI. */
function makeCertificates(out: string): void {
  const ssl = (args: string[]) => {
    const r = spawnSync('openssl', args, { cwd: out, encoding: 'utf8' })
    if (r.error || r.status !== 0)
      throw new Error(
        `openssl ${args.join(' ')} failed (` +
          `${r.error?.message ?? r.stderr}); the TLS test needs the ` +
          `openssl CLI on PATH`,
      )
  }
  writeFileSync(join(out, 'san.cnf'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\n')
  for (const ca of ['ca', 'other-ca'])
    ssl([
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      `${ca}-key.pem`,
      '-out',
      `${ca}.pem`,
      '-days',
      '2',
      '-subj',
      `/CN=iris test ${ca}`,
    ])
  ssl([
    'req',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-keyout',
    'server-key.pem',
    '-out',
    'server.csr',
    '-subj',
    '/CN=127.0.0.1',
  ])
  ssl([
    'x509',
    '-req',
    '-in',
    'server.csr',
    '-CA',
    'ca.pem',
    '-CAkey',
    'ca-key.pem',
    '-CAcreateserial',
    '-out',
    'server.pem',
    '-days',
    '2',
    '-extfile',
    'san.cnf',
  ])
}
