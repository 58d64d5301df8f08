/**
 * Secrets a step reads through `SecretStore` and then fails with: the driver (a real process)
 * runs the step as an iris job in a child process, or in itself with `--local`; the secret
 * must appear in nothing the run persisted or printed, and what the executor wrote must be
 * readable by its owner only.
 */
import { randomBytes } from 'node:crypto'
import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, relative } from 'node:path'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { configureLogging, writeSecretFile } from '@marin/rigging'
import { buildReport } from '../report/build.js'
import { publishSite } from '../report/publish.js'
import { start } from '../fixtures/processes.js'

const script = join(import.meta.dirname, '..', 'fixtures', 'leaks-secret.ts')
let root: string
let secretFile: string
// Unknown to this process: only the processes that read the file know it.
const secret = `sk-live-${randomBytes(12).toString('hex')}`

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'marin-secret-'))
  secretFile = join(root, 'secrets', 'api_key')
  writeSecretFile(secretFile, secret)
  configureLogging({ destination: { write: () => {} }, pretty: false })
})
afterAll(() => rmSync(root, { recursive: true, force: true }))

/** Every file under `dir`, with its mode; and every folder. */
function walk(dir: string, files: string[] = [], dirs: string[] = []): { files: string[]; dirs: string[] } {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name)
    if (e.isDirectory()) {
      dirs.push(p)
      walk(p, files, dirs)
    } else if (e.isFile()) files.push(p)
  }
  return { files, dirs }
}

async function runAndCheck(prefix: string, args: string[]): Promise<void> {
  const r = await start(['--import', 'tsx', script, ...args], {
    MARIN_PREFIX: prefix,
    FIX_SECRET_FILE: secretFile,
    LOG_LEVEL: 'info',
  }).done
  expect(r.code, r.err).toBe(1)
  // The failure is reported, with the secret's place marked.
  expect(r.out).toMatch(/FAILED login_\w{8}/)
  expect(r.out).toContain('login refused for key [REDACTED]')
  expect(r.out).not.toContain(secret)
  expect(r.err).not.toContain(secret)

  const step = readdirSync(prefix).find((d) => d.startsWith('login_'))!
  const info = readFileSync(join(prefix, step, '.executor_info'), 'utf8')
  expect(JSON.parse(info)).toMatchObject({
    status: 'FAILED',
    error: expect.stringContaining('login refused for key [REDACTED]'),
  })
  // What the step printed and logged was kept, scrubbed: in the job log when it ran as a job.
  const logs = readdirSync(join(prefix, step, 'logs'))
  const kept = logs.map((f) => readFileSync(join(prefix, step, 'logs', f), 'utf8')).join('') + r.out + r.err
  expect(kept).toContain('connecting with [REDACTED]')
  expect(kept).toContain('logging in with [REDACTED]')
  const runs = readdirSync(join(prefix, 'experiments', 'leaks_secret'))
  expect(runs).toHaveLength(1)
  const record = JSON.parse(readFileSync(join(prefix, 'experiments', 'leaks_secret', runs[0]!), 'utf8'))
  expect(record.steps[0]).toMatchObject({
    status: 'FAILED',
    error: expect.stringContaining('login refused for key [REDACTED]'),
  })

  // The report of the failed run and the site published from it.
  const site = join(root, `${relative(root, prefix)}-site`)
  const { site: files } = await buildReport(join(prefix, 'experiments', 'leaks_secret'), prefix)
  await publishSite(files, site)

  // No file anywhere (status, info, logs, job logs, history, record, iris state, site) holds it.
  const all = [...walk(prefix).files, ...walk(site).files]
  expect(all.length).toBeGreaterThan(5)
  const leaking = all.filter((f) => readFileSync(f).includes(secret))
  expect(leaking).toEqual([])

  // What the executor wrote is its owner's alone.
  const { files: written, dirs } = walk(prefix)
  const executorFiles = written.filter((f) => !relative(prefix, f).startsWith('iris/'))
  expect(executorFiles).toContain(join(prefix, step, '.executor_info'))
  const open = (p: string) => `${relative(prefix, p)} ${(statSync(p).mode & 0o777).toString(8)}`
  expect(executorFiles.filter((f) => (statSync(f).mode & 0o077) !== 0).map(open)).toEqual([])
  const executorDirs = [
    join(prefix, step),
    join(prefix, step, 'logs'),
    join(prefix, 'experiments'),
    join(prefix, 'experiments', 'leaks_secret'),
    ...dirs.filter((d) => d.includes('.executor_history')),
  ]
  expect(executorDirs.filter((d) => (statSync(d).mode & 0o077) !== 0).map(open)).toEqual([])
}

describe('secrets read by a step', () => {
  test('a step run as an iris job fails with a secret: redacted in ' +
    'every file and in the driver output, files owner-only', async () => {
    await runAndCheck(join(root, 'jobs'), [])
  }, 120_000)

  test('the same with --local (the step runs in the driver)', async () => {
    await runAndCheck(join(root, 'local'), ['--local'])
  }, 120_000)
})
