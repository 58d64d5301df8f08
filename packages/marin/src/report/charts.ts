/**
 * @module Training curves as SVG, rendered at build time with vega-lite → vega (`renderer: 'none'`),
 * so the published page needs no script and no network to show them. Each chart is drawn against
 * the optimizer step and, where the training config gives the tokens per step, against tokens seen
 * and against training time; the page shows one x-axis at a time.
 */
import * as vega from 'vega'
import { compile, type TopLevelSpec } from 'vega-lite'
import type { MetricRow } from './types.js'

/** What a chart's x-axis counts. */
export type XAxis = 'step' | 'tokens' | 'time'
export const X_AXES: readonly XAxis[] = ['step', 'tokens', 'time']
const X_TITLES: Readonly<Record<XAxis, string>> = {
  step: 'step',
  tokens: 'tokens',
  time: 'training time (s, from tokens/s)',
}

/** A rendered chart: a file name (`charts/<id>.svg`, `charts/<id>-tokens.svg`, …), a title, its x-axis, the SVG. */
export type Chart = {
  readonly id: string
  readonly title: string
  readonly x: XAxis
  readonly file: string
  readonly svg: string
}

/**
 * Which metrics each chart plots: its keys, and any key `match` matches (a mixture's per-source metrics, one series
 * a source); a chart is drawn when any of them has points.
 */
export const CHARTS: readonly {
  id: string
  title: string
  keys: readonly string[]
  match?: RegExp
  y: string
  log?: boolean
}[] = [
  { id: 'loss', title: 'Loss (train and eval)', keys: ['train/loss', 'eval/loss'], y: 'loss' },
  { id: 'eval-bpb', title: 'Eval bits per byte', keys: ['eval/bpb'], y: 'bits/byte' },
  { id: 'eval-loss-per-source', title: 'Eval loss per source', keys: [], match: /^eval\/.+\/loss$/, y: 'loss' },
  {
    id: 'tokens-per-source',
    title: 'Tokens consumed per source',
    keys: [],
    match: /^data\/.+\/tokens$/,
    y: 'tokens',
  },
  { id: 'lr', title: 'Learning rate', keys: ['train/lr'], y: 'learning rate' },
  { id: 'tokens-per-sec', title: 'Throughput', keys: ['throughput/tokens_per_sec'], y: 'tokens/s' },
]

type Point = { x: number; value: number; series: string }

/**
 * Training time at each logged step of one training step's rows: the steps since the previous
 * logged one, times its tokens per step, divided by the throughput logged there (the compute
 * time of the optimizer steps; evaluation and checkpoints are not counted).
 */
function timeAt(rows: readonly MetricRow[], tokensPerStep: number): Map<number, number> {
  const at = new Map<number, number>()
  let t = 0
  let prev = 0
  let rate: number | undefined
  for (const r of rows) {
    const tps = r.values['throughput/tokens_per_sec']
    if (tps !== undefined && tps > 0) rate = tps
    if (r.step > prev && rate !== undefined) {
      t += ((r.step - prev) * tokensPerStep) / rate
      prev = r.step
    }
    if (rate !== undefined) at.set(r.step, t)
  }
  return at
}

function points(
  rows: readonly MetricRow[],
  keys: readonly string[],
  x: XAxis,
  tokensPerStep: Readonly<Record<string, number>>,
  match?: RegExp,
): Point[] {
  const sources = [...new Set(rows.map((r) => r.source))]
  const out: Point[] = []
  for (const source of sources) {
    const mine = rows.filter((r) => r.source === source)
    const perStep = tokensPerStep[source]
    if (x !== 'step' && perStep === undefined) continue
    const times = x === 'time' ? timeAt(mine, perStep!) : undefined
    for (const r of mine) {
      const xv = x === 'step' ? r.step : x === 'tokens' ? r.step * perStep! : times!.get(r.step)
      if (xv === undefined) continue
      const shown = match ? [...keys, ...Object.keys(r.values).filter((k) => match.test(k))] : keys
      for (const k of shown) {
        const v = r.values[k]
        // With several training steps in one report, each series is named after its step too.
        if (v !== undefined) out.push({ x: xv, value: v, series: sources.length > 1 ? `${source}: ${k}` : k })
      }
    }
  }
  return out
}

/** The vega-lite spec of one chart: a line per series, points on top so single values (and eval points) show. */
export function chartSpec(title: string, y: string, values: readonly Point[], x: XAxis = 'step'): TopLevelSpec {
  return {
    width: 400,
    height: 200,
    title,
    data: { values: values as Point[] },
    config: { font: 'sans-serif', background: 'white' },
    encoding: {
      x: { field: 'x', type: 'quantitative', title: X_TITLES[x] },
      y: { field: 'value', type: 'quantitative', title: y, scale: { zero: false } },
      color: { field: 'series', type: 'nominal', title: null, legend: { orient: 'bottom', labelLimit: 400 } },
    },
    layer: [{ mark: { type: 'line', strokeWidth: 2 } }, { mark: { type: 'point', filled: true, size: 18 } }],
  }
}

/** Renders a vega-lite spec to SVG text without a browser. */
export async function renderSvg(spec: TopLevelSpec): Promise<string> {
  const view = new vega.View(vega.parse(compile(spec).spec), { renderer: 'none' })
  try {
    return await view.toSVG()
  } finally {
    view.finalize()
  }
}

/**
 * Every chart the metrics allow, in `CHARTS` order, against each x-axis the data allows (tokens
 * and time need the tokens per step of the training step that logged the metrics).
 */
export async function renderCharts(
  rows: readonly MetricRow[],
  tokensPerStep: Readonly<Record<string, number>> = {},
): Promise<Chart[]> {
  const charts: Chart[] = []
  for (const x of X_AXES) {
    for (const c of CHARTS) {
      const values = points(rows, c.keys, x, tokensPerStep, c.match)
      if (values.length === 0) continue
      charts.push({
        id: c.id,
        title: c.title,
        x,
        file: `charts/${c.id}${x === 'step' ? '' : `-${x}`}.svg`,
        svg: await renderSvg(chartSpec(c.title, c.y, values, x)),
      })
    }
  }
  return charts
}
