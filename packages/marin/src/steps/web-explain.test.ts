/**
 * A web step's threshold is part of its version: run on the zephyr WARC fixtures, a language filter rerun with a
 * lower threshold is a new version that keeps what the new threshold keeps, the dry run says its config changed,
 * and `marin explain` names `threshold` as the field that changed (the WARC ingest, unchanged, is skipped).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { configureLogging } from '@marin/rigging'
import { runCli } from '../cli/program.js'
import { Executor } from '../executor/executor.js'
import { Experiment } from '../executor/experiment.js'
import { languageFilterStep, warcIngestStep } from './web-steps.js'

const warc = resolve(import.meta.dirname, '../../../zephyr/test-fixtures/warc')
let prefix: string
beforeAll(() => {
  prefix = mkdtempSync(join(tmpdir(), 'marin-web-explain-'))
  configureLogging({ destination: { write: () => {} }, pretty: false })
})
afterAll(() => rmSync(prefix, { recursive: true, force: true }))

/** WARC pages → English at `threshold`; the same ingest step (same version) each time. */
function experiment(threshold: number) {
  const pages = warcIngestStep({
    name: 'web',
    source: ['example.warc.gz', 'example-iana.org-chunked.warc', 'real-pages.warc.gz'].map((f) => join(warc, f)),
  })
  const en = languageFilterStep(pages, { name: 'web-en', languages: ['en'], threshold })
  return new Experiment({ name: 'web-explain', steps: [en] })
}

async function run(threshold: number, dryRun = false) {
  const lines: string[] = []
  const record = await new Executor({ prefix, leaseTtlMs: 2000, dryRun, out: (l) => lines.push(l) }).run(
    experiment(threshold),
  )
  return { record, plan: lines.join('\n') }
}

async function explain(...argv: string[]) {
  const out: string[] = []
  const err: string[] = []
  const code = await runCli(['explain', ...argv], {
    out: (l) => out.push(l),
    err: (l) => err.push(l),
    env: { MARIN_PREFIX: prefix },
  })
  return { code, out: out.join('\n'), err: err.join('\n') }
}

const records = (r: Awaited<ReturnType<typeof run>>) => {
  const s = r.record.steps.find((x) => x.name === 'web-en')!
  return (JSON.parse(readFileSync(join(s.outputPath, 'artifacts.json'), 'utf8')) as { records: number }).records
}

describe('marin explain on a web step', () => {
  test('a changed language threshold is a new version, and explain names threshold as what changed', async () => {
    const first = await run(0.5)
    expect(first.record.status).toBe('SUCCESS')
    // example.com and iana.org pass en at 0.5; the UTF-16 page of real-pages.warc.gz is en only at 0.34
    expect(records(first)).toBe(2)

    const dry = await run(0.3, true)
    expect(dry.plan).toMatch(/skip {2}web_[0-9a-f]{8} +done at /)
    expect(dry.plan).toMatch(/run {3}web-en_[0-9a-f]{8} +config changed .*see `marin explain web-en`/)

    const second = await run(0.3)
    expect(second.record.steps.map((s) => [s.name, s.status])).toEqual([
      ['web', 'SKIPPED'],
      ['web-en', 'SUCCESS'],
    ])
    const [a, b] = [first, second].map((r) => r.record.steps.find((s) => s.name === 'web-en')!.nameHash)
    expect(b).not.toBe(a)
    expect(records(second)).toBe(3)

    const text = await explain('web-en')
    expect(text, text.err).toMatchObject({ code: 0 })
    expect(text.out).toContain(`web-en: current version ${b} (SUCCESS at `)
    expect(text.out).toContain(`last completed other version: ${a}`)
    expect(text.out).toContain('changed  threshold: 0.5 -> 0.3')
    expect(text.out).not.toMatch(/languages|output|input|dependency/)
    const json = JSON.parse((await explain('web-en', '--json')).out) as { fields: unknown[] }
    expect(json.fields).toEqual([{ field: 'threshold', kind: 'changed', before: '0.5', after: '0.3' }])
    // the ingest ran once: nothing to compare
    expect((await explain('web')).out).toMatch(/this is the only completed version/)
  }, 120_000)
})
