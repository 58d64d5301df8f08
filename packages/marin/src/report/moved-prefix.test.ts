/**
 * A prefix moved after its run (a folder renamed, a bucket copied): its records still name the old
 * place, and the report reads the run from where the record was found.
 */
import { cpSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { afterAll, expect, test } from 'vitest'
import { Executor } from '../executor/executor.js'
import { buildReport } from './build.js'
import { relocated } from './source.js'
import { reportFixture } from './test-fixture-experiment.js'

const dir = mkdtempSync(join(tmpdir(), 'marin-moved-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

test('a moved prefix is read where it is now: steps, artifacts and paths from the new place', async () => {
  const before = join(dir, 'before')
  const after = join(dir, 'after')
  const record = await new Executor({ prefix: before, leaseTtlMs: 2000 }).run(reportFixture(before))
  expect(record.status).toBe('SUCCESS')
  cpSync(before, after, { recursive: true })
  rmSync(before, { recursive: true, force: true })

  const { data, site } = await buildReport('tiny-report', after)
  expect(data.record.prefix).toBe(pathToFileURL(after).href)
  expect(data.steps.map((s) => s.status)).toEqual(['SUCCESS', 'SUCCESS', 'SUCCESS', 'SUCCESS'])
  expect(data.steps.every((s) => s.outputPath.startsWith(`${after}/`))).toBe(true)
  expect(data.artifacts.map((a) => a.ref)).toContain('checkpoints/tiny@1')
  // what the report says of the run names the new place; only the steps' own log lines (quoted as they were
  // written) may mention the old one
  expect(JSON.stringify(data.steps.map((s) => s.config))).not.toContain(before)
  for (const [path, body] of site) {
    // the run's page and its Markdown twin (data.json and the log files carry the logs as written)
    if (!/\/(index\.html|report\.md)$/.test(path)) continue
    const shown = String(body)
      .replace(/<table class="[^"]*log[^"]*">[\s\S]*?<\/table>/g, '')
      .replace(/<pre[^>]*>[\s\S]*?<\/pre>/g, '')
      .replace(/```[\s\S]*?```/g, '')
    const at = shown.indexOf(before)
    expect(at < 0 ? '' : shown.slice(Math.max(0, at - 200), at + 100), path).toBe('')
  }
}, 60_000)

test('a record found outside a prefix, or in its own, is left as it is', () => {
  const r = {
    experiment: 'x',
    run: 'r1',
    prefix: 'file:///data/p',
    steps: [{ outputPath: '/data/p/step_1' }],
  } as unknown as Parameters<typeof relocated>[0]
  expect(relocated(r, 'file:///elsewhere/r1.json')).toBe(r)
  expect(relocated(r, 'file:///data/p/experiments/x/r1.json')).toBe(r)
  expect(relocated(r, 'file:///new/p/experiments/x/r1.json')).toMatchObject({
    prefix: 'file:///new/p',
    steps: [{ outputPath: '/new/p/step_1' }],
  })
})
