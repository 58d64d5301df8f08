/**
 * @module A run's page (`runs/<experiment>/<run>/index.html`): one self-contained page (inline CSS
 * and SVG, nothing fetched) that reads fully without scripts; one small inline script only lets the
 * reader switch the charts' x-axis (step, tokens, time). Every link is relative.
 */
import { isArtifactRef } from '../executor/artifacts.js'
import { X_AXES, type Chart } from './charts.js'
import { DOCS_INDEX } from './docs-site.js'
import { escapeXml as x, formatBytes, formatNumber, formatSeconds, formatValue } from './format.js'
import { mixtureTable } from './mixture.js'
import { STATUS_COLORS } from './step-graph.js'
import { finalMetrics, logFile, provenanceOf, runLink, type SiteParts } from './site-parts.js'
import type { BackendShown, DatasetRows, ReportStep, StepLogFile } from './types.js'

/** Lines of each log shown on the page (the whole tail is in the log's file). */
export const LOG_LINES_SHOWN = 40

const CSS = `
body{font-family:sans-serif;margin:0 auto;max-width:1100px;padding:16px 24px;color:#222;line-height:1.4}
h1{margin-bottom:4px}h2{border-bottom:1px solid #ddd;padding-bottom:4px;margin-top:32px}h3{margin:20px 0 4px}
table{border-collapse:collapse;margin:8px 0;font-size:14px;max-width:100%}
th,td{border:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top;overflow-wrap:anywhere}
th{background:#f4f4f4;overflow-wrap:normal}td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
table.kv th{width:170px;font-weight:normal}table.log{font-size:12px;width:100%}
table.log td:first-child,table.log td:nth-child(2){white-space:nowrap;overflow-wrap:normal}
code,pre{font-family:monospace;font-size:12px}
pre{background:#f7f7f7;padding:8px;overflow:auto;max-height:260px;white-space:pre-wrap;overflow-wrap:anywhere}
.status{display:inline-block;padding:1px 6px;border-radius:4px;border:1px solid #999;font-size:12px;white-space:nowrap}
.charts{display:flex;flex-wrap:wrap;gap:16px}.chart{border:1px solid #eee;padding:4px;margin:0}
.chart svg{max-width:100%;height:auto}
.graph{border:1px solid #eee;padding:4px}.muted{color:#666}.warn{color:#a40}
.lv-warn{color:#a60}.lv-error,.lv-fatal{color:#b00;font-weight:bold}
table.meta{margin:2px 0;font-size:13px}table.meta th{font-weight:normal}
details{margin:4px 0}td pre{margin:0;padding:2px 4px}fieldset.xaxis{border:1px solid #ddd;display:inline-block}`

// Shows the x-axis choice (hidden without scripts, where the charts by step show) and switches the charts.
const SCRIPT = `<script>
(() => {
  const choice = document.querySelector('fieldset.xaxis')
  if (!choice) return
  choice.hidden = false
  choice.addEventListener('change', (e) => {
    for (const f of document.querySelectorAll('figure.chart')) f.hidden = f.dataset.x !== e.target.value
  })
})()
</script>`

function status(s: string): string {
  return `<span class="status" style="background:${STATUS_COLORS[s] ?? '#eee'}">${x(s)}</span>`
}

function table(
  head: readonly string[],
  rows: readonly (readonly string[])[],
  numeric: ReadonlySet<number> = new Set(),
  cls = '',
): string {
  const th = head.map((h) => `<th>${x(h)}</th>`).join('')
  const tr = rows
    .map((r) => `<tr>${r.map((c, i) => `<td${numeric.has(i) ? ' class="num"' : ''}>${c}</td>`).join('')}</tr>`)
    .join('\n')
  return `<table${cls ? ` class="${cls}"` : ''}><thead><tr>${th}</tr></thead><tbody>\n${tr}\n</tbody></table>`
}

/** A two-column table of names and values, the names as row headers (no empty header row). */
function keyValues(rows: readonly (readonly [string, string])[]): string {
  const tr = rows.map(([k, v]) => `<tr><th>${x(k)}</th><td>${v}</td></tr>`).join('\n')
  return `<table class="kv"><tbody>\n${tr}\n</tbody></table>`
}

/** A config as `a.b.c → value` pairs; artifact references as `name@version`, lists of plain values inline. */
export function flattenConfig(v: unknown, prefix = ''): [string, string][] {
  if (isArtifactRef(v)) return [[prefix, `${v.name}@${v.version}`]]
  if (v === null || typeof v !== 'object') return [[prefix, typeof v === 'string' ? v : (JSON.stringify(v) ?? '')]]
  if (Array.isArray(v) && v.every((e) => e === null || typeof e !== 'object')) return [[prefix, JSON.stringify(v)]]
  const entries = Array.isArray(v) ? v.map((e, i) => [String(i), e] as const) : Object.entries(v)
  if (entries.length === 0) return [[prefix, Array.isArray(v) ? '[]' : '{}']]
  return entries.flatMap(([k, e]) => flattenConfig(e, prefix ? `${prefix}.${k}` : k))
}

const LEVELS: Readonly<Record<number, string>> = {
  10: 'trace',
  20: 'debug',
  30: 'info',
  40: 'warn',
  50: 'error',
  60: 'fatal',
}
const HIDDEN_FIELDS = new Set(['level', 'time', 'msg', 'pid', 'hostname', 'pkg', 'step', 'name', 'v'])

/** One log line as time (UTC, of day), level and message with its other fields; plain text lines as they are. */
export function logRow(line: string): { time: string; level: string; message: string; fields: string } {
  let o: Record<string, unknown> | undefined
  try {
    const parsed = JSON.parse(line) as unknown
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) o = parsed as Record<string, unknown>
  } catch {
    o = undefined
  }
  if (!o) return { time: '', level: '', message: line, fields: '' }
  const t = typeof o.time === 'number' ? new Date(o.time) : typeof o.time === 'string' ? new Date(o.time) : undefined
  const time = t && !Number.isNaN(t.getTime()) ? t.toISOString().slice(11, 23) : ''
  const level =
    typeof o.level === 'number' ? (LEVELS[o.level] ?? String(o.level)) : typeof o.level === 'string' ? o.level : ''
  const fields = Object.entries(o)
    .filter(([k]) => !HIDDEN_FIELDS.has(k))
    .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`)
    .join(' ')
  return { time, level, message: typeof o.msg === 'string' ? o.msg : '', fields }
}

function logSection(s: ReportStep, l: StepLogFile): string {
  const lines = l.tail.split('\n').filter((t) => t.trim())
  const shown = lines.slice(-LOG_LINES_SHOWN)
  const rows = shown.map((line) => {
    const r = logRow(line)
    return [
      x(r.time),
      r.level ? `<span class="lv-${x(r.level)}">${x(r.level)}</span>` : '',
      `${x(r.message)}${r.fields ? ` <span class="muted">${x(r.fields)}</span>` : ''}`,
    ]
  })
  return [
    `<p><a href="${x(logFile(s.nameHash, l.path))}">${x(l.path)}</a> <span class="muted">${x(formatBytes(l.bytes))}` +
      `${lines.length > shown.length ? `, last ${shown.length} of ${lines.length} lines kept here` : ''}</span></p>`,
    shown.length ? table(['time (UTC)', 'level', 'message'], rows, new Set(), 'log') : '<p class="muted">empty</p>',
    shown.length ? `<details><summary>raw JSON</summary><pre>${x(shown.join('\n'))}</pre></details>` : '',
  ].join('\n')
}

function rowsTable(r: DatasetRows): string {
  return (
    `<p class="muted">first ${r.rows.length} rows of <code>${x(r.file)}</code>` +
    `${r.omittedColumns ? `; ${r.omittedColumns} more column${r.omittedColumns === 1 ? '' : 's'} not shown` : ''}</p>` +
    table(
      r.columns,
      r.rows.map((row) => row.map((c) => x(c))),
    )
  )
}

/** Rows of a list shown in a metadata cell, and how deep objects nest before the rest shows as text. */
export const METADATA_ROWS = 20
export const METADATA_DEPTH = 5

const isRecord = (v: unknown): v is Readonly<Record<string, unknown>> =>
  typeof v === 'object' && v !== null && !Array.isArray(v)

/** A plain value, escaped (a missing one as "none"). */
function metaScalar(v: unknown): string {
  return v === null || v === undefined ? '<span class="muted">none</span>' : x(formatValue(v))
}

/** One metadata value as HTML: objects as nested key/value tables, lists of objects as tables by key. */
function metaValue(v: unknown, depth: number): string {
  if (!(typeof v === 'object' && v !== null)) return metaScalar(v)
  if (depth > METADATA_DEPTH) return `<code>${x(JSON.stringify(v))}</code>`
  const cell = (e: unknown) => `<td${typeof e === 'number' ? ' class="num"' : ''}>${metaValue(e, depth + 1)}</td>`
  const more = (n: number, cols: number) =>
    n > METADATA_ROWS
      ? `<tr><td colspan="${cols}" class="muted">… ${formatNumber(n - METADATA_ROWS)} more not shown</td></tr>`
      : ''
  if (Array.isArray(v)) {
    if (v.length === 0) return '<span class="muted">none</span>'
    const shown = v.slice(0, METADATA_ROWS)
    if (!shown.every(isRecord)) {
      const text = shown.map((e) => metaValue(e, depth + 1)).join(', ')
      return v.length > METADATA_ROWS ? `${text}, … ${formatNumber(v.length - METADATA_ROWS)} more` : text
    }
    const cols = [...new Set(shown.flatMap((e) => Object.keys(e)))]
    const head = `<tr>${cols.map((c) => `<th>${x(c)}</th>`).join('')}</tr>`
    const rows = shown.map((e) => `<tr>${cols.map((c) => cell(e[c])).join('')}</tr>`).join('')
    return `<table class="meta">${head}${rows}${more(v.length, cols.length)}</table>`
  }
  const entries = Object.entries(v)
  if (entries.length === 0) return '<span class="muted">none</span>'
  const rows = entries
    .slice(0, METADATA_ROWS)
    .map(([k, e]) => `<tr><th>${x(k)}</th>${cell(e)}</tr>`)
    .join('')
  return `<table class="meta">${rows}${more(entries.length, 2)}</table>`
}

/**
 * An artifact's metadata for a table cell: plain values as `name: value`, objects and lists (a web step's pages
 * by language, decontamination per task) as nested tables. Every key and value is escaped: metadata is data.
 */
export function metadataHtml(metadata: Readonly<Record<string, unknown>>): string {
  return Object.entries(metadata)
    .map(([k, v]) =>
      typeof v === 'object' && v !== null
        ? `<div>${x(k)}:${metaValue(v, 1)}</div>`
        : `<div>${x(k)}: <b>${metaScalar(v)}</b></div>`,
    )
    .join('')
}

const GEMM: Readonly<Record<string, string>> = {
  native: "levanter's GEMM, native (C++ AVX2/FMA addon)",
  fma: "levanter's GEMM, WebAssembly relaxed SIMD (fma)",
  simd: "levanter's GEMM, WebAssembly SIMD128",
  xnnpack: "the wasm backend's XNNPACK",
}

/** What runs a backend's matrix products. */
function gemmText(b: BackendShown): string {
  if (b.gemm === 'native' && b.native) return `levanter's GEMM, native (C++, ${b.native})`
  if (b.gemm) return GEMM[b.gemm] ?? b.gemm
  return b.name === 'tensorflow' ? "TensorFlow's" : `the ${b.name} backend's own`
}

function backendRows(backends: readonly BackendShown[]): [string, string][] {
  if (backends.length === 0)
    return [['backend', '<span class="muted">not recorded (no training step in this run)</span>']]
  const where = (b: BackendShown) => (backends.length > 1 ? ` <span class="muted">(${x(b.step)})</span>` : '')
  return [
    [
      'backend',
      backends
        .map(
          (b) =>
            `${x(b.name)}${b.simd ? ', SIMD' : ''}` +
            `${b.threads ? `, ${b.threads} thread${b.threads === 1 ? '' : 's'}` : ''}` +
            where(b),
        )
        .join('<br>'),
    ],
    [
      'adapter',
      backends
        .map(
          (b) =>
            x(b.adapter ?? (b.name === 'tensorflow' ? 'TensorFlow (libtensorflow)' : 'none: CPU, no GPU adapter')) +
            where(b),
        )
        .join('<br>'),
    ],
    [
      'kernels',
      backends
        .map((b) => `${x(gemmText(b))} matrix products, levanter's fused kernels and gradients${where(b)}`)
        .join('<br>'),
    ],
  ]
}

/** The charts: by step, and by tokens and time where the data allows; one x-axis shown at a time. */
function chartsHtml(charts: readonly Chart[]): string {
  const axes = X_AXES.filter((a) => charts.some((c) => c.x === a))
  const choice =
    axes.length > 1
      ? `<fieldset class="xaxis" hidden><legend>x axis</legend>${axes
          .map(
            (a) =>
              `<label><input type="radio" name="xaxis" value="${a}"${a === 'step' ? ' checked' : ''}> ${a}</label> `,
          )
          .join('')}</fieldset>`
      : ''
  const figures = charts
    .map(
      (c) =>
        `<figure class="chart" id="chart-${x(c.id)}${c.x === 'step' ? '' : `-${c.x}`}" data-x="${c.x}"` +
        `${c.x === 'step' ? '' : ' hidden'}>${c.svg}` +
        `<figcaption><a href="${x(c.file)}">${x(c.title)} by ${x(c.x)} (SVG)</a></figcaption></figure>`,
    )
    .join('\n')
  return `${choice}<div class="charts">${figures}</div>`
}

/** Renders the run's page. Cell strings passed to `table` are HTML, so every value is escaped here. */
export function renderHtml(p: SiteParts): string {
  const { data, charts, graphSvg } = p
  const r = data.record
  const prov = provenanceOf(r.provenance)
  const finals = finalMetrics(data.metrics)
  const datasets = data.artifacts.filter((a) => a.kind !== 'checkpoints')
  const checkpoints = data.artifacts.filter((a) => a.kind === 'checkpoints')
  const here = { experiment: r.experiment, run: r.run }
  const madeByLink = (s: ReportStep) =>
    s.madeBy
      ? `<a href="${x(runLink(here, s.madeBy))}">` +
        `${x(s.madeBy.experiment === r.experiment ? s.madeBy.run : `${s.madeBy.experiment} ${s.madeBy.run}`)}</a>`
      : ''
  const seconds = (Date.parse(r.finishedAt) - Date.parse(r.startedAt)) / 1000
  const out: string[] = []
  out.push(
    '<!doctype html><html lang="en"><head><meta charset="utf-8">',
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    `<title>${x(r.experiment)} · ${x(r.run)}</title><style>${CSS}</style></head><body>`,
    `<p class="muted"><a href="../../../index.html">all runs</a></p>`,
    `<h1>${x(r.experiment)}</h1>`,
    `<p class="muted">run <code>${x(r.run)}</code> · ` +
      `${status(r.status)} · ${x(r.startedAt)} → ${x(r.finishedAt)}` +
      `${Number.isFinite(seconds) ? ` (${x(formatSeconds(Math.max(0, seconds)))})` : ''} · ` +
      `record <code>${x(data.recordUrl)}</code></p>`,
  )
  const notRun = data.steps.filter((s) => s.action !== 'run')
  if (data.steps.length > 0 && notRun.length === data.steps.length) {
    const makers = [...new Map(notRun.filter((s) => s.madeBy).map((s) => [madeByLink(s), s])).keys()]
    out.push(
      `<p>Every step was already done, so nothing ran in this run` +
        `${makers.length ? `: made by ${makers.join(', ')}` : ''}. ` +
        'Times and logs below are those of the runs that made them.</p>',
    )
  }
  if (finals.length) out.push(`<p>${finals.map(([k, v]) => `<b>${x(k)}</b> ${x(formatNumber(v))}`).join(' · ')}</p>`)

  out.push('<h2 id="steps">Steps</h2>', `<div class="graph">${graphSvg}</div>`)
  out.push(
    table(
      ['step', 'status', 'action', 'time', 'output folder', 'made by', 'logs'],
      data.steps.map((s) => [
        `<b>${x(s.name)}</b><br><code class="muted">${x(s.nameHash)}</code>`,
        status(s.status) +
          (s.diskStatus && s.diskStatus !== s.status
            ? ` <span class="muted">(on disk: ${x(s.diskStatus)})</span>`
            : '') +
          (s.error ? `<br><span class="warn">${x(s.error)}</span>` : ''),
        `${x(s.action)}<br><span class="muted">${x(s.reason)}</span>`,
        s.seconds !== undefined ? x(formatSeconds(s.seconds)) : '',
        `<code>${x(s.outputPath)}</code>`,
        s.madeBy ? madeByLink(s) : s.action === 'run' ? 'this run' : '',
        s.logs.length
          ? `<a href="#logs-${x(s.nameHash)}">${s.logs.length} file${s.logs.length === 1 ? '' : 's'}</a>`
          : '',
      ]),
      new Set([3]),
    ),
  )

  out.push('<h2 id="config">Configuration</h2>')
  if (r.config !== undefined && r.config !== null)
    out.push(
      '<h3>experiment</h3>',
      table(
        ['field', 'value'],
        flattenConfig(r.config).map(([k, v]) => [`<code>${x(k)}</code>`, x(v)]),
      ),
    )
  for (const s of data.steps) {
    out.push(`<h3>${x(s.name)} <code class="muted">${x(s.nameHash)}</code></h3>`)
    out.push(
      s.config === undefined
        ? '<p class="muted">no resolved config recorded (.executor_info)</p>'
        : table(
            ['field', 'value'],
            flattenConfig(s.config).map(([k, v]) => [`<code>${x(k || '(value)')}</code>`, x(v)]),
          ),
    )
  }

  out.push('<h2 id="datasets">Datasets and artifacts</h2>')
  if (datasets.length === 0) out.push('<p class="muted">No step listed a finestore artifact (artifacts.json).</p>')
  else {
    out.push(
      table(
        ['artifact', 'kind', 'step', 'files', 'size', 'statistics', 'lineage'],
        datasets.map((a) => [
          `<a href="${x(a.url)}"><code>${x(a.ref)}</code></a>`,
          x(a.kind),
          x(a.step),
          x(formatNumber(a.files)),
          x(formatBytes(a.bytes)),
          metadataHtml(a.metadata),
          a.lineage.map((l) => `<code>${x(l)}</code>`).join('<br>'),
        ]),
        new Set([3, 4]),
      ),
    )
    for (const a of datasets) if (a.rows) out.push(`<h3><code>${x(a.ref)}</code></h3>`, rowsTable(a.rows))
  }

  out.push('<h2 id="training">Training</h2>')
  if (charts.length === 0) out.push('<p class="muted">No training metrics (metrics.jsonl) in any step.</p>')
  else out.push(chartsHtml(charts))
  for (const m of data.mixtures ?? []) {
    const t = mixtureTable(m)
    out.push(
      `<h3 id="mixture-${x(m.step)}">Data mixture of ${x(m.step)}</h3>`,
      table(
        t.head,
        t.rows.map((r) => r.map((cell, i) => (i === 1 ? `<code>${x(cell)}</code>` : x(cell)))),
        t.numeric,
      ),
    )
  }
  if (checkpoints.length) {
    out.push(
      '<h3>Checkpoints</h3>',
      table(
        ['checkpoint', 'step', 'files', 'size', 'metadata'],
        checkpoints.map((a) => [
          `<a href="${x(a.url)}"><code>${x(a.ref)}</code></a>`,
          x(a.step),
          x(formatNumber(a.files)),
          x(formatBytes(a.bytes)),
          metadataHtml(a.metadata),
        ]),
        new Set([2, 3]),
      ),
    )
  }

  out.push('<h2 id="evals">Evaluation</h2>')
  if (data.evals.length === 0) out.push('<p class="muted">No eval results (eval*.json) in any step.</p>')
  else
    out.push(
      table(
        ['task', 'metric', 'value', '± stderr', 'step'],
        data.evals.map((e) => [
          x(e.task),
          x(e.metric),
          x(formatNumber(e.value)),
          e.stderr !== undefined ? x(formatNumber(e.stderr)) : '',
          x(e.source),
        ]),
        new Set([2, 3]),
      ),
    )

  out.push('<h2 id="samples">Sample generations</h2>')
  if (data.samples.length === 0) out.push('<p class="muted">No sample generations (samples.jsonl) in any step.</p>')
  else
    out.push(
      table(
        ['prompt', 'completion', 'expected', 'scores', 'from'],
        data.samples.map((s) => [
          `<pre>${x(s.prompt)}</pre>`,
          `<pre>${x(s.completion)}</pre>`,
          s.expected !== undefined ? `<pre>${x(s.expected)}</pre>` : '',
          Object.entries(s.scores)
            .map(([k, v]) => `${x(k)} <b>${x(formatNumber(v))}</b>`)
            .join('<br>'),
          x(s.source),
        ]),
      ),
    )

  out.push('<h2 id="logs">Logs</h2>')
  if (data.steps.every((s) => s.logs.length === 0)) out.push('<p class="muted">No step kept logs.</p>')
  for (const s of data.steps) {
    if (s.logs.length === 0) continue
    out.push(`<h3 id="logs-${x(s.nameHash)}">${x(s.name)}</h3>`, ...s.logs.map((l) => logSection(s, l)))
  }

  out.push('<h2 id="provenance">Provenance</h2>')
  out.push(
    keyValues([
      [
        'git sha',
        `<code>${x(prov.gitSha ?? 'unknown')}</code>` +
          `${prov.gitDirty ? ' <span class="warn">(uncommitted changes)</span>' : ''}`,
      ],
      ['host', x(prov.host ?? '')],
      ['node', x(prov.node ?? '')],
      ['recorded', x(prov.timestamp ?? '')],
      ['script', `<code>${x(r.script ?? '')}</code>`],
      ['prefix', `<code>${x(r.prefix)}</code>`],
      ...backendRows(data.backends),
    ]),
    '<h3>Package versions</h3>',
    table(
      ['package', 'version'],
      Object.entries(prov.packages).map(([k, v]) => [`<code>${x(k)}</code>`, x(v)]),
    ),
    '<h3>Step versions</h3>',
    table(
      ['step', 'version hash', 'depends on'],
      data.steps.map((s) => [
        x(s.name),
        `<code>${x(s.version)}</code>`,
        s.dependencies.map((d) => `<code>${x(d)}</code>`).join('<br>'),
      ]),
    ),
    '<h3>Artifact versions</h3>',
    data.artifacts.length
      ? table(
          ['artifact', 'created', 'from'],
          data.artifacts.map((a) => [
            `<a href="${x(a.url)}"><code>${x(a.ref)}</code></a>`,
            x(a.createdAt),
            a.lineage.map((l) => `<code>${x(l)}</code>`).join(', '),
          ]),
        )
      : '<p class="muted">none</p>',
    '<p><a href="report.md">report.md</a> · <a href="data.json">data.json</a> (everything above as JSON)</p>',
  )
  if (data.warnings.length)
    out.push(
      '<h2 id="warnings">Warnings</h2>',
      `<ul>${data.warnings.map((w) => `<li class="warn">${x(w)}</li>`).join('')}</ul>`,
    )
  if (charts.some((c) => c.x !== 'step')) out.push(SCRIPT)
  // A link when this site holds the docs (published with --docs), else how to build them.
  out.push(
    p.docs
      ? `<p class="muted">Made with marin-ts: <a href="../../../${DOCS_INDEX}">its docs</a> (guides, API).</p>`
      : '<p class="muted">Made with marin-ts; its docs (guides, API reference) build from the repository with ' +
          '<code>pnpm run docs</code>, starting at <code>docs/index.md</code>.</p>',
  )
  out.push('</body></html>')
  return out.join('\n')
}
