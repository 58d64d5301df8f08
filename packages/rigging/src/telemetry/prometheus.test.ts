import { createRequire } from 'node:module'
import { describe, expect, test } from 'vitest'
import { escapeHelp, escapeLabelValue, formatPromValue } from './prometheus.js'
import { MetricsRegistry } from './registry.js'

// An independent parser of the exposition format, to check what we write against.
type Family = {
  name: string
  help: string
  type: string
  metrics: {
    value?: string
    labels?: Record<string, string>
    buckets?: Record<string, string>
    quantiles?: Record<string, string>
    count?: string
    sum?: string
  }[]
}
const parse = createRequire(import.meta.url)('parse-prometheus-text-format') as (text: string) => Family[]

// The grammar of exposition format 0.0.4, line by line.
const NAME = '[a-zA-Z_:][a-zA-Z0-9_:]*'
const LABEL = '[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\\\\n]|\\\\[\\\\"n])*"'
const VALUE = '(?:[+-]?Inf|NaN|[+-]?\\d+(?:\\.\\d+)?(?:e[+-]?\\d+)?|[+-]?\\.\\d+(?:e[+-]?\\d+)?)'
const HELP_LINE = new RegExp(`^# HELP (${NAME}) (?:[^\\\\\\n]|\\\\[\\\\n])*$`)
const TYPE_LINE = new RegExp(`^# TYPE (${NAME}) (counter|gauge|histogram|summary|untyped)$`)
const SAMPLE_LINE = new RegExp(`^(${NAME})(?:\\{(?:${LABEL})(?:,${LABEL})*\\})? ${VALUE}$`)

/** Checks the structure rules of the format and returns the problems found. */
function lint(text: string): string[] {
  const problems: string[] = []
  if (!text.endsWith('\n')) problems.push('no final newline')
  const types = new Map<string, string>()
  let current: string | undefined
  for (const line of text.slice(0, -1).split('\n')) {
    const help = HELP_LINE.exec(line)
    const type = TYPE_LINE.exec(line)
    const sample = SAMPLE_LINE.exec(line)
    if (help) current = help[1]
    else if (type) {
      if (types.has(type[1]!)) problems.push(`second TYPE for ${type[1]}`)
      if (type[1] !== current) problems.push(`TYPE ${type[1]} not right after its HELP`)
      current = type[1]
      types.set(type[1]!, type[2]!)
    } else if (sample) {
      const name = sample[1]!
      const t = current === undefined ? undefined : types.get(current)
      const allowed =
        t === 'histogram'
          ? [`${current}_bucket`, `${current}_sum`, `${current}_count`]
          : t === 'summary'
            ? [current, `${current}_sum`, `${current}_count`]
            : [current]
      if (!allowed.includes(name)) problems.push(`sample ${name} outside its family (${current})`)
    } else problems.push(`not valid: ${JSON.stringify(line)}`)
  }
  return problems
}

function registry() {
  const reg = new MetricsRegistry()
  const c = reg.counter('zephyr_records_total', {
    help: 'Records read.\nPer stage, with a \\ in help and "quotes".',
    labelNames: ['stage', 'path'],
  })
  c.inc(3, { stage: 'map', path: 'C:\\data\\"x".jsonl\nline2' })
  c.inc(1, { stage: 'filter', path: 'a' })
  reg.gauge('iris_queue_depth', { help: 'Jobs waiting.' }).set(4)
  const h = reg.histogram('ducky_call_seconds', {
    help: 'RPC latency.',
    labelNames: ['method'],
    buckets: [0.01, 0.1, 1],
  })
  for (const v of [0.005, 0.05, 0.05, 0.5, 5]) h.observe(v, { method: 'Get' })
  const s = reg.histogram('levanter_step_seconds', {
    help: 'Step time.',
    exposition: 'summary',
    quantiles: [0.5, 0.99],
  })
  for (let i = 0; i <= 100; i++) s.observe(i)
  reg.histogram('empty_seconds', { help: 'Nothing yet.', exposition: 'summary' }).observe(1, {})
  return reg
}

describe('prometheus exposition', () => {
  test('the exact text', () => {
    const text = registry().toPrometheus()
    expect(text.split('\n').slice(0, 21)).toEqual([
      '# HELP zephyr_records_total Records read.\\nPer stage, with a \\\\ in help and "quotes".',
      '# TYPE zephyr_records_total counter',
      'zephyr_records_total{path="C:\\\\data\\\\\\"x\\".jsonl\\nline2",stage="map"} 3',
      'zephyr_records_total{path="a",stage="filter"} 1',
      '# HELP iris_queue_depth Jobs waiting.',
      '# TYPE iris_queue_depth gauge',
      'iris_queue_depth 4',
      '# HELP ducky_call_seconds RPC latency.',
      '# TYPE ducky_call_seconds histogram',
      'ducky_call_seconds_bucket{method="Get",le="0.01"} 1',
      'ducky_call_seconds_bucket{method="Get",le="0.1"} 3',
      'ducky_call_seconds_bucket{method="Get",le="1"} 4',
      'ducky_call_seconds_bucket{method="Get",le="+Inf"} 5',
      'ducky_call_seconds_sum{method="Get"} 5.605',
      'ducky_call_seconds_count{method="Get"} 5',
      '# HELP levanter_step_seconds Step time.',
      '# TYPE levanter_step_seconds summary',
      'levanter_step_seconds{quantile="0.5"} 50',
      'levanter_step_seconds{quantile="0.99"} 99',
      'levanter_step_seconds_sum 5050',
      'levanter_step_seconds_count 101',
    ])
  })

  test('follows the line grammar and family rules', () => {
    expect(lint(registry().toPrometheus())).toEqual([])
    // and the linter does catch mistakes
    expect(lint('# TYPE a counter\nb 1\n')).toEqual([
      'TYPE a not right after its HELP',
      'sample b outside its family (a)',
    ])
    expect(lint('a{x="unescaped"quote"} 1\n')).toHaveLength(1)
  })

  test('an independent parser reads back every value and label', () => {
    const families = parse(registry().toPrometheus())
    const byName = new Map(families.map((f) => [f.name, f]))
    const counter = byName.get('zephyr_records_total')!
    expect(counter.type).toBe('COUNTER')
    expect(counter.help).toBe('Records read.\nPer stage, with a \\ in help and "quotes".')
    expect(counter.metrics).toEqual([
      { value: '3', labels: { path: 'C:\\data\\"x".jsonl\nline2', stage: 'map' } },
      { value: '1', labels: { path: 'a', stage: 'filter' } },
    ])
    expect(byName.get('ducky_call_seconds')!.type).toBe('HISTOGRAM')
    const summary = byName.get('levanter_step_seconds')!
    expect(summary.type).toBe('SUMMARY')
    expect(summary.metrics[0]).toMatchObject({ quantiles: { '0.5': '50', '0.99': '99' }, count: '101', sum: '5050' })
    expect(byName.get('iris_queue_depth')!.metrics).toEqual([{ value: '4' }])
    // This parser folds only unlabelled histograms; read the labelled one sample by sample.
    const untyped = new Map(
      parse(
        registry()
          .toPrometheus()
          .replace(/^# TYPE .*\n/gm, ''),
      ).map((f) => [f.name, f]),
    )
    expect(untyped.get('ducky_call_seconds_bucket')!.metrics).toEqual([
      { labels: { method: 'Get', le: '0.01' }, value: '1' },
      { labels: { method: 'Get', le: '0.1' }, value: '3' },
      { labels: { method: 'Get', le: '1' }, value: '4' },
      { labels: { method: 'Get', le: '+Inf' }, value: '5' },
    ])
    expect(untyped.get('ducky_call_seconds_sum')!.metrics).toEqual([{ labels: { method: 'Get' }, value: '5.605' }])
    expect(untyped.get('ducky_call_seconds_count')!.metrics).toEqual([{ labels: { method: 'Get' }, value: '5' }])
  })

  test('an unlabelled histogram reads back as one histogram', () => {
    const reg = new MetricsRegistry()
    const h = reg.histogram('h_seconds', { help: 'h', buckets: [0.5, 1] })
    for (const v of [0.25, 0.75, 2]) h.observe(v)
    expect(parse(reg.toPrometheus())).toEqual([
      {
        name: 'h_seconds',
        help: 'h',
        type: 'HISTOGRAM',
        metrics: [{ buckets: { '0.5': '1', '1': '2', '+Inf': '3' }, count: '3', sum: '3' }],
      },
    ])
  })

  test('buckets are cumulative and end at +Inf = count', () => {
    const reg = new MetricsRegistry()
    const h = reg.histogram('h', { help: 'h', buckets: [1, 2, 3] })
    for (const v of [0, 1, 1.5, 2.5, 3, 99, -5]) h.observe(v)
    const buckets = parse(reg.toPrometheus())[0]!.metrics[0]!.buckets!
    const counts = Object.values(buckets).map(Number)
    expect(counts).toEqual([3, 4, 6, 7])
    expect(counts.every((c, i) => i === 0 || c >= counts[i - 1]!)).toBe(true)
  })

  test('special values and escapes', () => {
    expect([Infinity, -Infinity, Number.NaN, null, 1e-7, 42].map(formatPromValue)).toEqual([
      '+Inf',
      '-Inf',
      'NaN',
      'NaN',
      '1e-7',
      '42',
    ])
    expect(escapeLabelValue('a\\b"c\nd')).toBe('a\\\\b\\"c\\nd')
    expect(escapeHelp('say "hi"\\\n')).toBe('say "hi"\\\\\\n')
    expect(new MetricsRegistry().toPrometheus()).toBe('')
  })
})
