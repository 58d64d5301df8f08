import { spawnSync } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { afterEach, beforeEach, expect, test, vi } from 'vitest'
import type { RiggingError } from '../errors.js'
import { JsonlSink } from './jsonl-sink.js'
import type { RegistrySnapshot } from './registry.js'
import { MetricsRegistry } from './registry.js'

let dir: string
const sinks: JsonlSink[] = []
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'rigging-sink-'))
})
afterEach(() => {
  for (const s of sinks.splice(0)) s.close()
})
const lines = (path: string) =>
  existsSync(path)
    ? readFileSync(path, 'utf8')
        .split('\n')
        .filter((l) => l !== '')
        .map((l) => JSON.parse(l) as RegistrySnapshot)
    : []

test('flushes snapshots periodically, one JSON line each', async () => {
  const reg = new MetricsRegistry()
  const steps = reg.counter('steps_total', { help: 's' })
  const path = join(dir, 'nested', 'metrics.jsonl')
  const sink = new JsonlSink(reg, { path, intervalMs: 10, flushOnExit: false })
  sinks.push(sink)
  steps.inc(1)
  await vi.waitFor(() => expect(lines(path).length).toBeGreaterThanOrEqual(1), { timeout: 10_000, interval: 5 })
  steps.inc(4)
  await vi.waitFor(() => expect(lines(path).at(-1)!.metrics[0]).toMatchObject({ samples: [{ value: 5 }] }), {
    timeout: 10_000,
    interval: 5,
  })
  const all = lines(path)
  expect(all.length).toBeGreaterThanOrEqual(2)
  for (const l of all) expect(l.metrics[0]).toMatchObject({ type: 'counter', name: 'steps_total', help: 's' })
})

test('flush on demand and a final line on close', () => {
  const reg = new MetricsRegistry()
  reg.histogram('lat', { help: 'l', buckets: [1] }).observe(0.5)
  const path = join(dir, 'm.jsonl')
  const sink = new JsonlSink(reg, { path, intervalMs: 0, flushOnExit: false })
  sink.flush()
  reg.gauge('g', { help: 'g' }).set(2)
  sink.close()
  sink.close() // closing twice does nothing
  const all = lines(path)
  expect(all).toHaveLength(2)
  expect(all[0]!.metrics.map((m) => m.name)).toEqual(['lat'])
  expect(all[1]!.metrics.map((m) => m.name)).toEqual(['lat', 'g'])
  expect(all[0]!.metrics[0]).toMatchObject({ samples: [{ count: 1, quantiles: { p50: 0.5 } }] })
  const err = (() => {
    try {
      sink.flush()
    } catch (e) {
      return e as RiggingError
    }
  })()
  expect(err?.code).toBe('TELEMETRY_IO')
})

test('an unwritable path is TELEMETRY_IO naming the path', () => {
  writeFileSync(join(dir, 'file'), 'x')
  const path = join(dir, 'file', 'metrics.jsonl')
  expect(() => new JsonlSink(new MetricsRegistry(), { path, flushOnExit: false })).toThrow(
    expect.objectContaining({
      code: 'TELEMETRY_IO',
      message: expect.stringContaining(`cannot write metrics to ${path}`),
    }),
  )
})

test('the last snapshot is written when the process exits', () => {
  const path = join(dir, 'exit.jsonl')
  const script = join(dir, 'run.ts')
  writeFileSync(
    script,
    `import { MetricsRegistry } from ${JSON.stringify(resolve(import.meta.dirname, 'registry.ts'))}\n` +
      `import { JsonlSink } from ${JSON.stringify(resolve(import.meta.dirname, 'jsonl-sink.ts'))}\n` +
      `const reg = new MetricsRegistry()\n` +
      `new JsonlSink(reg, { path: ${JSON.stringify(path)}, intervalMs: 60_000 })\n` +
      `reg.counter('done_total', { help: 'd' }).inc(7)\n`,
  )
  const r = spawnSync(process.execPath, ['--import', 'tsx', script], {
    cwd: resolve(import.meta.dirname, '../../../..'),
    encoding: 'utf8',
  })
  expect(r.stderr).toBe('')
  expect(r.status).toBe(0) // the unref'd timer did not keep it alive for a minute
  expect(lines(path).map((l) => l.metrics)).toEqual([
    [{ type: 'counter', name: 'done_total', help: 'd', samples: [{ labels: {}, value: 7 }] }],
  ])
})
