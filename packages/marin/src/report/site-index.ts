/**
 * @module The site's front page: every run published to it (`runs.json`, one summary per run),
 * grouped by experiment, newest first, with date, status, duration, headline metrics and git
 * commit, and per experiment the loss curves of its runs overlaid (a checkbox per run chooses
 * which; without scripts all are drawn) and a table of its runs' eval results (a column per task
 * and metric).
 */
import { z } from 'zod'
import { DOCS_INDEX } from './docs-site.js'
import { escapeXml as x, formatNumber, formatSeconds } from './format.js'
import { finalMetrics, provenanceOf, runFolder } from './site-parts.js'
import { isSiteSegment } from './site-paths.js'
import type { ReportData, RunRef } from './types.js'

/** The site's list of runs, kept at its root and merged by each publish. */
export const RUNS_FILE = 'runs.json'

/** What the index shows of one run. */
export type RunSummary = RunRef & {
  readonly status: string
  readonly startedAt: string
  readonly finishedAt: string
  readonly seconds: number
  readonly steps: { readonly total: number; readonly ran: number; readonly skipped: number; readonly failed: number }
  /** For steps that did not run: the runs that made them. */
  readonly madeBy: readonly RunRef[]
  readonly headline: readonly (readonly [string, number])[]
  readonly gitSha: string | null
  readonly gitDirty: boolean | null
  /** `train/loss` by step, when this run trained (a skipped training step's curve belongs to the run that made it). */
  readonly loss: readonly (readonly [number, number])[]
  /** `"task metric"` → value of each eval result of the run (absent in summaries written before evals were kept). */
  readonly evals?: readonly (readonly [string, number])[]
}

const MAX_CURVE_POINTS = 300

/** The summary of a run for the index. */
export function summaryOf(data: ReportData): RunSummary {
  const r = data.record
  const prov = provenanceOf(r.provenance)
  const ran = new Set(data.steps.filter((s) => s.action === 'run').map((s) => s.name))
  const curve = data.metrics
    .filter((m) => ran.has(m.source) && m.values['train/loss'] !== undefined)
    .map((m) => [m.step, m.values['train/loss']!] as const)
  const every = Math.max(1, Math.ceil(curve.length / MAX_CURVE_POINTS))
  const madeBy = new Map<string, RunRef>()
  for (const s of data.steps) if (s.madeBy) madeBy.set(runFolder(s.madeBy), s.madeBy)
  return {
    experiment: r.experiment,
    run: r.run,
    status: r.status,
    startedAt: r.startedAt,
    finishedAt: r.finishedAt,
    seconds: Math.max(0, (Date.parse(r.finishedAt) - Date.parse(r.startedAt)) / 1000) || 0,
    steps: {
      total: data.steps.length,
      ran: ran.size,
      skipped: data.steps.filter((s) => s.status === 'SKIPPED').length,
      failed: data.steps.filter((s) => s.status === 'FAILED' || s.status === 'DEP_FAILED').length,
    },
    madeBy: [...madeBy.values()],
    headline: finalMetrics(data.metrics).map(([k, v]) => [k.replace(/^final /, '').replace(/ \(step \d+\)$/, ''), v]),
    gitSha: prov.gitSha,
    gitDirty: prov.gitDirty,
    loss: curve.filter((_, i) => i % every === 0 || i === curve.length - 1),
    evals: data.evals.map((e) => [`${e.task} ${e.metric}`, e.value] as const),
  }
}

const Name = z.string().refine(isSiteSegment, 'not a folder name (a "/", "..", "%" or a control character)')
const Pair = <A extends z.ZodType, B extends z.ZodType>(a: A, b: B) => z.tuple([a, b]).readonly()
const RunRefSchema = z.object({ experiment: Name, run: Name })
const Count = z.number().int().nonnegative()
// In the order `summaryOf` writes them: a summary read back is written out the same.
const fields = {
  experiment: Name,
  run: Name,
  status: z.string(),
  startedAt: z.string(),
  finishedAt: z.string(),
  seconds: z.number(),
  steps: z.object({ total: Count, ran: Count, skipped: Count, failed: Count }),
  madeBy: z.array(RunRefSchema),
  headline: z.array(Pair(z.string(), z.number())),
  gitSha: z.string().nullable(),
  gitDirty: z.boolean().nullable(),
  loss: z.array(Pair(z.number(), z.number())),
  evals: z.array(Pair(z.string(), z.number())).optional(),
}
const RunSummarySchema = z.object(fields)
// A summary missing other fields than its run and start time (the index's order), written by hand or by an older
// marin, is shown with what it has.
const RepairedSummary = z.object({
  ...fields,
  status: fields.status.catch('UNKNOWN'),
  finishedAt: fields.finishedAt.catch(''),
  seconds: fields.seconds.catch(0),
  steps: fields.steps.catch({ total: 0, ran: 0, skipped: 0, failed: 0 }),
  madeBy: fields.madeBy.catch([]),
  headline: fields.headline.catch([]),
  gitSha: fields.gitSha.catch(null),
  gitDirty: fields.gitDirty.catch(null),
  loss: fields.loss.catch([]),
  evals: fields.evals.catch(undefined),
})

const issuesText = (e: z.ZodError) =>
  e.issues
    .slice(0, 3)
    .map((i) => `${i.path.length ? `"${i.path.join('.')}"` : 'the entry'}: ${i.message}`)
    .join('; ')

/**
 * The runs listed in a `runs.json` (`where` names it in warnings). Text that is not a JSON array counts
 * as no runs; an entry lacking its experiment, run or start time is skipped, one lacking other fields
 * is shown without them, each with a warning naming the entry; the file written next holds only what
 * is listed, so one odd entry never breaks the publishes after it.
 */
export function parseRuns(
  text: string | undefined,
  warn: (w: string) => void = () => {},
  where = RUNS_FILE,
): RunSummary[] {
  if (!text) return []
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch (err) {
    warn(`${where} is not JSON (${(err as Error).message}); it is rewritten with the runs published now`)
    return []
  }
  if (!Array.isArray(parsed)) {
    warn(`${where} is not a JSON array; it is rewritten with the runs published now`)
    return []
  }
  const runs: RunSummary[] = []
  parsed.forEach((entry: unknown, i) => {
    const full = RunSummarySchema.safeParse(entry)
    if (full.success) return void runs.push(full.data as RunSummary)
    const o = (entry && typeof entry === 'object' ? entry : {}) as Record<string, unknown>
    const name =
      typeof o.experiment === 'string' && typeof o.run === 'string'
        ? ` (${JSON.stringify(`${o.experiment}/${o.run}`)})`
        : ''
    const repaired = RepairedSummary.safeParse(entry)
    if (repaired.success) {
      runs.push(repaired.data as RunSummary)
      warn(`${where} entry ${i}${name}: ${issuesText(full.error)}; listed without those fields`)
    } else warn(`${where} entry ${i}${name}: ${issuesText(repaired.error)}; left out of the list of runs`)
  })
  return runs
}

/** The text of a `runs.json`. */
export function formatRuns(runs: readonly RunSummary[]): string {
  return `${JSON.stringify(runs, null, 2)}\n`
}

/** `old` with `added` put in (a run published again replaces its entry), newest first. */
export function mergeRuns(old: readonly RunSummary[], added: readonly RunSummary[]): RunSummary[] {
  const byKey = new Map(old.map((r) => [runFolder(r), r]))
  for (const r of added) byKey.set(runFolder(r), r)
  return [...byKey.values()].sort(
    (a, b) =>
      b.startedAt.localeCompare(a.startedAt) || b.run.localeCompare(a.run) || a.experiment.localeCompare(b.experiment),
  )
}

const CSS = `
body{font-family:sans-serif;margin:0 auto;max-width:1100px;padding:16px 24px;color:#222;line-height:1.4}
h2{border-bottom:1px solid #ddd;padding-bottom:4px;margin-top:32px}
table{border-collapse:collapse;margin:8px 0;font-size:14px;max-width:100%}
th,td{border:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top;overflow-wrap:anywhere}
th{background:#f4f4f4}td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
code{font-size:12px}td a code{white-space:nowrap}
.muted{color:#666}.choose label{margin-right:12px;font-size:13px;white-space:nowrap}
svg.overlay{max-width:100%;height:auto}`

const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#17becf', '#8c564b', '#e377c2', '#7f7f7f']

/** The loss curves of `runs` on shared axes, one path per run. */
function overlaySvg(runs: readonly RunSummary[]): string {
  const W = 720
  const H = 280
  const L = 56
  const R = 16
  const T = 12
  const B = 36
  const pts = runs.flatMap((r) => r.loss)
  const [x0, x1] = [Math.min(...pts.map((p) => p[0])), Math.max(...pts.map((p) => p[0]))]
  const [y0, y1] = [Math.min(...pts.map((p) => p[1])), Math.max(...pts.map((p) => p[1]))]
  const sx = (v: number) => L + ((v - x0) / (x1 - x0 || 1)) * (W - L - R)
  const sy = (v: number) => T + (1 - (v - y0) / (y1 - y0 || 1)) * (H - T - B)
  const out = [
    `<svg xmlns="http://www.w3.org/2000/svg" class="overlay" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" ` +
      `font-family="sans-serif" font-size="11">`,
    `<rect x="${L}" y="${T}" width="${W - L - R}" height="${H - T - B}" fill="none" stroke="#ccc"/>`,
  ]
  for (const v of [y0, (y0 + y1) / 2, y1])
    out.push(`<text x="${L - 4}" y="${sy(v) + 4}" text-anchor="end">${x(formatNumber(v))}</text>`)
  for (const v of [x0, Math.round((x0 + x1) / 2), x1])
    out.push(`<text x="${sx(v)}" y="${H - B + 14}" text-anchor="middle">${x(formatNumber(v))}</text>`)
  out.push(
    `<text x="${(L + W - R) / 2}" y="${H - 4}" text-anchor="middle">step</text>`,
    `<text x="12" y="${(T + H - B) / 2}" transform="rotate(-90 12 ${(T + H - B) / 2})" ` +
      'text-anchor="middle">train loss</text>',
  )
  runs.forEach((r, i) => {
    const d = r.loss.map(([s, v], j) => `${j ? 'L' : 'M'}${sx(s).toFixed(1)},${sy(v).toFixed(1)}`).join('')
    out.push(
      `<path class="run-curve" data-run="${x(r.run)}" d="${d}" fill="none" stroke="${COLORS[i % COLORS.length]}" ` +
        `stroke-width="2"><title>${x(r.run)}</title></path>`,
    )
  })
  out.push('</svg>')
  return out.join('\n')
}

// Shows the run choices (hidden without scripts, where every curve is drawn) and hides the curves unchosen.
const SCRIPT = `<script>
for (const box of document.querySelectorAll('input[data-run]')) {
  box.closest('.choose').hidden = false
  box.addEventListener('change', () => {
    for (const p of document.querySelectorAll('path.run-curve'))
      if (p.dataset.run === box.dataset.run && p.closest('section') === box.closest('section'))
        p.style.display = box.checked ? '' : 'none'
  })
}
</script>`

function stepsCell(r: RunSummary): string {
  const s = r.steps
  if (s.total > 0 && s.ran === 0 && s.skipped === s.total) {
    const made = r.madeBy.map((m) => `<a href="${x(`${runFolder(m)}/index.html`)}">${x(m.run)}</a>`).join(', ')
    return `all ${s.total} steps already done${made ? ` (made by ${made})` : ''}`
  }
  return `${s.ran} ran, ${s.skipped} skipped${s.failed ? `, ${s.failed} failed` : ''} of ${s.total}`
}

/** The front page for `runs` (newest first). Links are relative to the site's root. */
export function renderIndex(runs: readonly RunSummary[], o: { docs?: boolean } = {}): string {
  const byExperiment = new Map<string, RunSummary[]>()
  for (const r of runs)
    (byExperiment.get(r.experiment) ?? byExperiment.set(r.experiment, []).get(r.experiment)!).push(r)
  const out = [
    '<!doctype html><html lang="en"><head><meta charset="utf-8">',
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    `<title>Runs</title><style>${CSS}</style></head><body>`,
    '<h1>Runs</h1>',
    `<p class="muted">${runs.length} run${runs.length === 1 ? '' : 's'} of ${byExperiment.size} ` +
      `experiment${byExperiment.size === 1 ? '' : 's'}, newest first. Each run has a page of its own.` +
      `${o.docs ? ` The project's <a href="${DOCS_INDEX}">docs</a>: guides and API reference.` : ''}</p>`,
  ]
  for (const [experiment, list] of [...byExperiment].sort(([a], [b]) => a.localeCompare(b))) {
    out.push(`<section><h2 id="${x(experiment)}">${x(experiment)}</h2>`)
    const heads = [...new Set(list.flatMap((r) => r.headline.map(([k]) => k)))]
    out.push(
      '<table><thead><tr><th>run</th><th>date</th><th>status</th><th>duration</th><th>steps</th>' +
        `${heads.map((h) => `<th>${x(h)}</th>`).join('')}<th>git commit</th></tr></thead><tbody>`,
    )
    for (const r of list) {
      const metric = (h: string) => r.headline.find(([k]) => k === h)?.[1]
      out.push(
        `<tr><td><a href="${x(`${runFolder(r)}/index.html`)}"><code>${x(r.run)}</code></a></td>` +
          `<td>${x(r.startedAt.replace('T', ' ').replace(/\.\d+Z$/, 'Z'))}</td><td>${x(r.status)}</td>` +
          `<td class="num">${x(formatSeconds(r.seconds))}</td><td>${stepsCell(r)}</td>` +
          heads
            .map((h) => {
              const v = metric(h)
              return `<td class="num">${v === undefined ? '' : x(formatNumber(v))}</td>`
            })
            .join('') +
          `<td><code>${x(r.gitSha?.slice(0, 12) ?? 'unknown')}</code>` +
          `${r.gitDirty ? ' (uncommitted changes)' : ''}</td></tr>`,
      )
    }
    out.push('</tbody></table>')
    const scored = list.filter((r) => (r.evals?.length ?? 0) > 0)
    if (scored.length > 0) {
      const cols = [...new Set(scored.flatMap((r) => r.evals!.map(([k]) => k)))]
      out.push(
        '<h3>Evaluation across its runs</h3>',
        `<table><thead><tr><th>run</th>${cols.map((c) => `<th>${x(c)}</th>`).join('')}</tr></thead><tbody>`,
      )
      for (const r of scored) {
        const cell = (c: string) => {
          const v = r.evals!.find(([k]) => k === c)?.[1]
          return `<td class="num">${v === undefined ? '' : x(formatNumber(v))}</td>`
        }
        out.push(
          `<tr><td><a href="${x(`${runFolder(r)}/index.html`)}"><code>${x(r.run)}</code></a></td>` +
            `${cols.map(cell).join('')}</tr>`,
        )
      }
      out.push('</tbody></table>')
    }
    const curves = list.filter((r) => r.loss.length > 0)
    if (curves.length > 0) {
      out.push(
        '<h3>Training loss of its runs</h3>',
        `<p class="choose" hidden>${curves
          .map(
            (r, i) =>
              `<label style="color:${COLORS[i % COLORS.length]}">` +
              `<input type="checkbox" data-run="${x(r.run)}" checked> ` +
              `${x(r.run)}</label>`,
          )
          .join('')}</p>`,
        overlaySvg(curves),
      )
    }
    out.push('</section>')
  }
  out.push(SCRIPT, '</body></html>')
  return out.join('\n')
}
