import { spawnSync } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { afterAll, describe, expect, test } from 'vitest'

const root = resolve(import.meta.dirname, '..')
const prefix = mkdtempSync(join(tmpdir(), 'quickstart-'))
afterAll(() => rmSync(prefix, { recursive: true, force: true }))

function runQuickstart(args: string[]) {
  const run = spawnSync(process.execPath, [...args, 'experiments/quickstart.ts'], {
    cwd: root,
    encoding: 'utf8',
    env: { ...process.env, QUICKSTART_SCALE: 'tiny', MARIN_PREFIX: prefix, LOG_LEVEL: 'warn' },
  })
  if (run.status !== 0) throw new Error(`quickstart exited ${run.status}: ${run.stderr}`)
  return run.stdout.split('\n')[0]!
}

describe('the quickstart experiment', () => {
  test('runs the same with tsx and with ts-node', () => {
    const withTsx = runQuickstart(['--import', 'tsx'])
    const withTsNode = runQuickstart(['--no-warnings', '--loader', 'ts-node/esm'])
    expect(withTsx).toMatch(/^quickstart \(tiny\): 20 documents, \d+ paragraphs, \d+ words; \d+ duplicate paragraphs/)
    expect(withTsNode).toBe(withTsx)

    const records = readdirSync(join(prefix, 'experiments/quickstart'))
    expect(records).toHaveLength(2)
    const rec = JSON.parse(readFileSync(join(prefix, 'experiments/quickstart', records[0]!), 'utf8'))
    expect(rec.corpus.documents).toBe(20)
    // A unigram model of English words carries roughly 9–11 bits per word.
    expect(rec.unigram.bitsPerWord).toBeGreaterThan(7)
    expect(rec.unigram.bitsPerWord).toBeLessThan(12)
    expect(rec.provenance.node).toBe(process.version)
  }, 120_000)
})
