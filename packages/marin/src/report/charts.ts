/**
 * @module Training curves as SVG, rendered at build time with vega-lite → vega (`renderer: 'none'`),
 * so the published page needs no script and no network to show them.
 */
import * as vega from 'vega'
import { compile, type TopLevelSpec } from 'vega-lite'
import type { MetricRow } from './types.js'

/** A rendered chart: a file name (`charts/<id>.svg`), a title and the SVG text. */
export type Chart = { readonly id: string; readonly title: string; readonly file: string; readonly svg: string }

/** Which metrics each chart plots; a chart is drawn when any of its keys has points. */
export const CHARTS: readonly { id: string; title: string; keys: readonly string[]; y: string; log?: boolean }[] = [
  { id: 'loss', title: 'Loss (train and eval)', keys: ['train/loss', 'eval/loss'], y: 'loss' },
  { id: 'eval-bpb', title: 'Eval bits per byte', keys: ['eval/bpb'], y: 'bits/byte' },
  { id: 'lr', title: 'Learning rate', keys: ['train/lr'], y: 'learning rate' },
  { id: 'tokens-per-sec', title: 'Throughput', keys: ['throughput/tokens_per_sec'], y: 'tokens/s' },
]

type Point = { step: number; value: number; series: string }

function points(rows: readonly MetricRow[], keys: readonly string[]): Point[] {
  const sources = new Set(rows.map((r) => r.source))
  const out: Point[] = []
  for (const r of rows) {
    for (const k of keys) {
      const v = r.values[k]
      // With several training steps in one report, each series is named after its step too.
      if (v !== undefined) out.push({ step: r.step, value: v, series: sources.size > 1 ? `${r.source}: ${k}` : k })
    }
  }
  return out
}

/** The vega-lite spec of one chart: a line per series, points on top so single values show. */
export function chartSpec(title: string, y: string, values: readonly Point[]): TopLevelSpec {
  return {
    width: 400,
    height: 200,
    title,
    data: { values: values as Point[] },
    config: { font: 'sans-serif', background: 'white' },
    encoding: {
      x: { field: 'step', type: 'quantitative', title: 'step' },
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

/** Every chart the metrics allow, in `CHARTS` order. */
export async function renderCharts(rows: readonly MetricRow[]): Promise<Chart[]> {
  const charts: Chart[] = []
  for (const c of CHARTS) {
    const values = points(rows, c.keys)
    if (values.length === 0) continue
    charts.push({
      id: c.id,
      title: c.title,
      file: `charts/${c.id}.svg`,
      svg: await renderSvg(chartSpec(c.title, c.y, values)),
    })
  }
  return charts
}
