import { describe, expect, test } from 'vitest'
import type { RiggingError } from '../errors.js'
import { MetricsRegistry, metrics } from './registry.js'
import { Reservoir, quantileKey } from './reservoir.js'

function thrown(fn: () => unknown): RiggingError {
  try {
    fn()
  } catch (err) {
    return err as RiggingError
  }
  throw new Error('expected a throw')
}

describe('counter', () => {
  test('counts per label set', () => {
    const c = new MetricsRegistry().counter('jobs_total', { help: 'jobs', labelNames: ['state'] })
    c.inc(1, { state: 'done' })
    c.inc(2, { state: 'done' })
    c.inc(1, { state: 'failed' })
    expect(c.value({ state: 'done' })).toBe(3)
    expect(c.value({ state: 'failed' })).toBe(1)
    expect(c.value({ state: 'never' })).toBe(0)
    expect(c.snapshot().samples).toHaveLength(2) // reading an unseen label set creates nothing
  })

  test('cannot go down, and takes only finite numbers', () => {
    const c = new MetricsRegistry().counter('x_total', { help: 'x' })
    expect(thrown(() => c.inc(-1)).message).toBe('metric x_total: a counter cannot decrease (got -1); use a gauge')
    expect(thrown(() => c.inc(Number.NaN)).code).toBe('TELEMETRY_INVALID')
    c.inc()
    expect(c.value()).toBe(1)
  })

  test('labels must be exactly the declared ones', () => {
    const c = new MetricsRegistry().counter('req_total', { help: 'r', labelNames: ['method', 'code'] })
    expect(thrown(() => c.inc(1, { method: 'GET' })).message).toBe(
      'metric req_total: got labels [method], but it was declared with [code, method]; pass exactly those',
    )
    expect(thrown(() => c.inc(1)).code).toBe('TELEMETRY_INVALID')
    c.inc(1, { code: 200, method: 'GET' })
    expect(c.value({ method: 'GET', code: '200' })).toBe(1) // numbers are label text
  })
})

test('gauge sets, adds and subtracts', () => {
  const g = new MetricsRegistry().gauge('queue_depth', { help: 'q' })
  g.set(10)
  g.inc(5)
  g.dec(7)
  expect(g.value()).toBe(8)
  g.set(-2.5)
  expect(g.snapshot().samples).toEqual([{ labels: {}, value: -2.5 }])
})

describe('histogram', () => {
  test('buckets are cumulative; sum, count, min and max are exact', () => {
    const h = new MetricsRegistry().histogram('lat_seconds', { help: 'l', buckets: [0.1, 1, 10] })
    for (const v of [0.05, 0.1, 0.5, 2, 20, 0.1]) h.observe(v)
    const [s] = h.snapshot().samples
    expect(s).toMatchObject({ count: 6, min: 0.05, max: 20, buckets: [3, 4, 5] })
    expect(s!.sum).toBeCloseTo(22.75, 12)
  })

  test('quantiles are exact within the reservoir (R-7 interpolation)', () => {
    const h = new MetricsRegistry().histogram('v', { help: 'v', quantiles: [0, 0.5, 0.9, 0.99, 1] })
    // Shuffled 1..100: order must not matter.
    const values = Array.from({ length: 100 }, (_, i) => ((i * 37) % 100) + 1)
    for (const v of values) h.observe(v)
    const [s] = h.snapshot().samples
    expect(s!.exactQuantiles).toBe(true)
    expect(s!.quantiles).toEqual({
      p0: 1,
      p50: 50.5,
      p90: expect.closeTo(90.1, 9),
      p99: expect.closeTo(99.01, 9),
      p100: 100,
    })
  })

  test('quantiles stay close past the reservoir, from a bounded sample', () => {
    const h = new MetricsRegistry().histogram('big', { help: 'b', reservoirSize: 512 })
    const n = 100_000
    for (let i = 0; i < n; i++) h.observe((i * 7919) % n) // every value 0..n-1 once, scrambled
    const [s] = h.snapshot().samples
    expect(s!.exactQuantiles).toBe(false)
    expect(s!.count).toBe(n)
    expect(Math.abs(s!.quantiles.p50! - n * 0.5)).toBeLessThan(n * 0.05)
    expect(Math.abs(s!.quantiles.p90! - n * 0.9)).toBeLessThan(n * 0.05)
    expect(s!.min).toBe(0)
    expect(s!.max).toBe(n - 1) // min and max stay exact
  })

  test('an empty series reports null quantiles, min and max', () => {
    const r = new Reservoir(4)
    expect(r.quantiles([0.5])).toEqual([null])
    expect(quantileKey(0.999)).toBe('p99.9')
  })

  test('the reservoir is reproducible for a seed', () => {
    const a = new Reservoir(8, 42)
    const b = new Reservoir(8, 42)
    for (let i = 0; i < 1000; i++) {
      a.add(i)
      b.add(i)
    }
    expect(a.quantiles([0.25, 0.5, 0.75])).toEqual(b.quantiles([0.25, 0.5, 0.75]))
  })

  test('bad buckets, quantiles and reserved labels are TELEMETRY_INVALID', () => {
    const reg = new MetricsRegistry()
    expect(thrown(() => reg.histogram('a', { help: 'a', buckets: [1, 1] })).message).toContain(
      'must be finite and strictly ascending',
    )
    expect(thrown(() => reg.histogram('b', { help: 'b', quantiles: [1.5] })).code).toBe('TELEMETRY_INVALID')
    expect(thrown(() => reg.histogram('c', { help: 'c', labelNames: ['le'] })).message).toContain(
      'label name "le" is not allowed',
    )
    expect(thrown(() => reg.histogram('d', { help: 'd' }).observe(Number.POSITIVE_INFINITY)).code).toBe(
      'TELEMETRY_INVALID',
    )
  })

  test('time() observes the duration of a call, also when it throws', async () => {
    const h = new MetricsRegistry().histogram('call_seconds', { help: 'c' })
    expect(await h.time(async () => 7)).toBe(7)
    await expect(h.time(() => Promise.reject(new Error('x')))).rejects.toThrow('x')
    const [s] = h.snapshot().samples
    expect(s!.count).toBe(2)
    expect(s!.min).toBeGreaterThanOrEqual(0)
  })
})

describe('bound series', () => {
  test('with(labels) checks labels once and records into that series', () => {
    const reg = new MetricsRegistry()
    const jobs = reg.counter('jobs_total', { help: 'j', labelNames: ['state'] })
    const done = jobs.with({ state: 'done' })
    done.inc()
    done.inc(2)
    jobs.inc(1, { state: 'done' })
    expect(done.value()).toBe(4)
    expect(jobs.value({ state: 'done' })).toBe(4)
    expect(thrown(() => done.inc(-1)).code).toBe('TELEMETRY_INVALID')
    expect(thrown(() => jobs.with({ status: 'done' })).code).toBe('TELEMETRY_INVALID')

    const depth = reg.gauge('depth', { help: 'd', labelNames: ['queue'] }).with({ queue: 'a' })
    depth.set(5)
    depth.inc(2)
    depth.dec()
    expect(depth.value()).toBe(6)
    expect(thrown(() => depth.set(Number.NaN)).code).toBe('TELEMETRY_INVALID')

    const lat = reg.histogram('lat', { help: 'l', labelNames: ['method'], buckets: [1] })
    const get = lat.with({ method: 'Get' })
    get.observe(0.5)
    get.observe(2)
    expect(lat.snapshot().samples).toEqual([
      expect.objectContaining({ labels: { method: 'Get' }, count: 2, sum: 2.5, buckets: [1] }),
    ])
    expect(thrown(() => get.observe(Number.NaN)).code).toBe('TELEMETRY_INVALID')
  })
})

describe('registry', () => {
  test('the same definition returns the same metric; a different one is an error', () => {
    const reg = new MetricsRegistry()
    const a = reg.counter('steps_total', { help: 's', labelNames: ['run'] })
    expect(reg.counter('steps_total', { help: 's', labelNames: ['run'] })).toBe(a)
    expect(thrown(() => reg.gauge('steps_total', { help: 's', labelNames: ['run'] })).message).toBe(
      'metric steps_total already exists as a counter with labels [run]; use another name or the same definition',
    )
    expect(thrown(() => reg.counter('steps_total', { help: 's' })).code).toBe('TELEMETRY_INVALID')
    expect(thrown(() => reg.counter('2bad', { help: 'x' })).message).toContain('metric name "2bad" is not valid')
    expect(reg.get('steps_total')).toBe(a)
  })

  test('snapshot is plain data with an ISO time', () => {
    const reg = new MetricsRegistry()
    reg.counter('a_total', { help: 'a' }).inc(3)
    reg.gauge('b', { help: 'b', labelNames: ['k'] }).set(1, { k: 'v' })
    reg.histogram('c', { help: 'c', buckets: [1] }).observe(0.5)
    const snap = reg.snapshot()
    expect(new Date(snap.time).toISOString()).toBe(snap.time)
    expect(JSON.parse(JSON.stringify(snap))).toEqual(snap)
    expect(snap.metrics.map((m) => [m.name, m.type])).toEqual([
      ['a_total', 'counter'],
      ['b', 'gauge'],
      ['c', 'histogram'],
    ])
  })

  test('metrics() is one registry per process', () => {
    expect(metrics()).toBe(metrics())
  })
})
