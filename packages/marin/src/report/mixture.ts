/**
 * @module A mixture training step on the run page: its sources (token caches), the weight of each
 * in every stage, and what each gave: tokens consumed and its own held-out loss. Read from the
 * `mixture` a training step records in `artifacts.json` (see the training step's `MixtureSummary`);
 * both renderers show the same table.
 */
import { formatNumber } from './format.js'

/** One mixture training step as the report shows it. */
export type MixtureShown = {
  readonly step: string
  readonly sources: readonly {
    readonly name: string
    readonly cache: string
    readonly tokens: number | null
    readonly evalLoss: number | null
    readonly evalBpb: number | null
  }[]
  /** Stages in order; `untilStep` null for the last one (it runs to the end). */
  readonly stages: readonly { readonly untilStep: number | null; readonly weights: Readonly<Record<string, number>> }[]
}

const num = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) ? v : null)
const record = (v: unknown): Record<string, unknown> =>
  v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : {}

/** The mixture a training step's `artifacts.json` records, or undefined when it has none (or not in that shape). */
export function mixtureOf(step: string, o: unknown): MixtureShown | undefined {
  const m = record(o)
  const sources = record(m.sources)
  if (Object.keys(sources).length === 0 || !Array.isArray(m.stages)) return undefined
  const tokens = record(m.tokensPerSource)
  const loss = record(m.evalLossPerSource)
  const bpb = record(m.evalBpbPerSource)
  return {
    step,
    sources: Object.entries(sources).map(([name, cache]) => ({
      name,
      cache: String(cache),
      tokens: num(tokens[name]),
      evalLoss: num(loss[name]),
      evalBpb: num(bpb[name]),
    })),
    stages: m.stages.map((s) => {
      const stage = record(s)
      const weights = record(stage.weights)
      return {
        untilStep: num(stage.untilStep),
        weights: Object.fromEntries(Object.entries(weights).map(([k, v]) => [k, num(v) ?? 0])),
      }
    }),
  }
}

/** The steps a stage covers, as a column title: `weight (steps 0–999)`, `weight (steps 1000–end)`. */
function stageTitle(stages: MixtureShown['stages'], i: number): string {
  if (stages.length === 1) return 'weight'
  const from = i === 0 ? 0 : (stages[i - 1]!.untilStep ?? 0)
  const until = stages[i]!.untilStep
  return `weight (steps ${from}–${until === null ? 'end' : until - 1})`
}

/**
 * The mixture as a table of plain text (each renderer escapes it): a row per source with its cache, its weight in
 * every stage, the tokens it gave (and their share of all), and its held-out loss and bits per byte.
 */
export function mixtureTable(m: MixtureShown): { head: string[]; rows: string[][]; numeric: Set<number> } {
  const total = m.sources.reduce((n, s) => n + (s.tokens ?? 0), 0)
  const pct = (v: number) => `${(100 * v).toFixed(1)}%`
  const head = [
    'source',
    'token cache',
    ...m.stages.map((_, i) => stageTitle(m.stages, i)),
    'tokens consumed',
    'share of tokens',
    'eval loss',
    'eval bpb',
  ]
  const rows = m.sources.map((s) => [
    s.name,
    s.cache,
    ...m.stages.map((st) => pct(st.weights[s.name] ?? 0)),
    s.tokens === null ? '—' : formatNumber(s.tokens),
    s.tokens === null || total === 0 ? '—' : pct(s.tokens / total),
    s.evalLoss === null ? '—' : s.evalLoss.toFixed(4),
    s.evalBpb === null ? '—' : s.evalBpb.toFixed(4),
  ])
  const first = 2
  const numeric = new Set(Array.from({ length: head.length - first }, (_, i) => i + first))
  return { head, rows, numeric }
}
