/**
 * A secret a step read (in a process of its own) and wrote into its dataset and eval samples: the report built
 * and published by another process, which never read it, holds it in no file; the step's fingerprints do not either.
 */
import { randomBytes } from 'node:crypto'
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { writeSecretFile } from '@marin/rigging'
import { start } from '../fixtures/processes.js'
import { buildReport } from './build.js'
import { publishSite } from './publish.js'

const script = join(import.meta.dirname, '..', 'fixtures', 'secret-data.ts')
// Unknown to this process: only the driver that runs the step reads the file.
const secret = `sk-live-${randomBytes(12).toString('hex')}`
let root: string

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'marin-secret-data-'))
  writeSecretFile(join(root, 'secrets', 'api_key'), secret)
})
afterAll(() => rmSync(root, { recursive: true, force: true }))

const walk = (dir: string): string[] =>
  readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? walk(join(dir, e.name)) : e.isFile() ? [join(dir, e.name)] : [],
  )

describe('secrets a step wrote into its data', () => {
  test('are scrubbed from every file of the published site', async () => {
    const prefix = join(root, 'prefix')
    const r = await start(['--import', 'tsx', script, '--local'], {
      MARIN_PREFIX: prefix,
      FIX_SECRET_FILE: join(root, 'secrets', 'api_key'),
    }).done
    expect(r.code, r.err).toBe(0)
    // The data holds it (that is the step's doing), the executor's files only its fingerprints.
    const info = readdirSync(prefix).find((d) => d.startsWith('leak_'))!
    const executorInfo = readFileSync(join(prefix, info, '.executor_info'), 'utf8')
    expect(JSON.parse(executorInfo).secrets.values.length).toBeGreaterThan(0)
    expect(executorInfo).not.toContain(secret)

    const { site, data } = await buildReport(join(prefix, 'experiments', 'leaks_data'), prefix)
    const target = join(root, 'site')
    await publishSite(site, target)
    const files = walk(target)
    expect(files.length).toBeGreaterThan(5)
    expect(files.filter((f) => readFileSync(f, 'utf8').includes(secret))).toEqual([])
    // Nor a piece of it: the cell that a shortened cut would end inside the secret is scrubbed first.
    expect(files.filter((f) => readFileSync(f, 'utf8').includes(secret.slice(0, 12)))).toEqual([])
    const rows = data.artifacts.find((a) => a.artifact === 'datasets/leaky')!.rows!
    expect(rows.rows[0]).toContain('the key is [REDACTED]')
    expect(data.samples[0]).toMatchObject({ prompt: 'use [REDACTED]', completion: '[REDACTED]' })
  }, 60_000)
})
