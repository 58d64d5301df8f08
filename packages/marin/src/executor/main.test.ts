/** `runIfMain` and `experiment.main()` in a script run as a program: real processes. */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { start } from '../fixtures/processes.js'

const script = join(import.meta.dirname, '..', 'fixtures', 'run-if-main.ts')
let prefix: string
beforeAll(() => {
  prefix = mkdtempSync(join(tmpdir(), 'marin-main-'))
})
afterAll(() => rmSync(prefix, { recursive: true, force: true }))

describe('runIfMain', () => {
  test('resolves with the run record when the script is the program', async () => {
    const r = await start(['--import', 'tsx', script, '--local'], { MARIN_PREFIX: prefix }).done
    expect(r.code, r.err).toBe(0)
    expect(r.out).toContain('record: {"experiment":"run_if_main","status":"SUCCESS","steps":["SUCCESS"]}')
  }, 60_000)

  test('resolves with nothing, and exits 2, on bad usage', async () => {
    const r = await start(['--import', 'tsx', script, '--max-concurrent', '0'], { MARIN_PREFIX: prefix }).done
    expect(r.code).toBe(2)
    expect(r.err).toMatch(/--max-concurrent/)
    expect(r.out).toContain('record: null')
  }, 60_000)
})
