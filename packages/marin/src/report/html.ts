/** @module `index.html`: one self-contained page (inline CSS and SVG, no script, no external resource). */
import { escapeXml as x, formatBytes, formatNumber, formatSeconds, formatValue } from './format.js'
import { STATUS_COLORS } from './step-graph.js'
import { finalMetrics, logFile, provenanceOf, type SiteParts } from './site-parts.js'

const CSS = `
body{font-family:sans-serif;margin:0 auto;max-width:1100px;padding:16px 24px;color:#222;line-height:1.4}
h1{margin-bottom:4px}h2{border-bottom:1px solid #ddd;padding-bottom:4px;margin-top:32px}
table{border-collapse:collapse;margin:8px 0;font-size:14px}
th,td{border:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f4f4f4}td.num{text-align:right;font-variant-numeric:tabular-nums}
code,pre{font-family:monospace;font-size:12px}pre{background:#f7f7f7;padding:8px;overflow:auto;max-height:260px}
.status{display:inline-block;padding:1px 6px;border-radius:4px;border:1px solid #999;font-size:12px}
.charts{display:flex;flex-wrap:wrap;gap:16px}.chart{border:1px solid #eee;padding:4px;margin:0}
.graph{overflow:auto;border:1px solid #eee;padding:4px}.muted{color:#666}.warn{color:#a40}
details{margin:4px 0}td pre{margin:0;padding:2px 4px;white-space:pre-wrap}`

function status(s: string): string {
  return `<span class="status" style="background:${STATUS_COLORS[s] ?? '#eee'}">${x(s)}</span>`
}

function table(
  head: readonly string[],
  rows: readonly (readonly string[])[],
  numeric: ReadonlySet<number> = new Set(),
): string {
  const th = head.map((h) => `<th>${x(h)}</th>`).join('')
  const tr = rows
    .map((r) => `<tr>${r.map((c, i) => `<td${numeric.has(i) ? ' class="num"' : ''}>${c}</td>`).join('')}</tr>`)
    .join('\n')
  return `<table><thead><tr>${th}</tr></thead><tbody>\n${tr}\n</tbody></table>`
}

/** Renders the page. Cell strings passed to `table` are HTML, so every value is escaped here. */
export function renderHtml(p: SiteParts): string {
  const { data, charts, graphSvg } = p
  const r = data.record
  const prov = provenanceOf(r.provenance)
  const finals = finalMetrics(data.metrics)
  const datasets = data.artifacts.filter((a) => a.kind !== 'checkpoints')
  const checkpoints = data.artifacts.filter((a) => a.kind === 'checkpoints')
  const out: string[] = []
  out.push(
    '<!doctype html><html lang="en"><head><meta charset="utf-8">',
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    `<title>${x(r.experiment)} · ${x(r.run)}</title><style>${CSS}</style></head><body>`,
    `<h1>${x(r.experiment)}</h1>`,
    `<p class="muted">run <code>${x(r.run)}</code> · ` +
      `${status(r.status)} · ${x(r.startedAt)} → ${x(r.finishedAt)} · ` +
      `record <code>${x(data.recordUrl)}</code></p>`,
  )
  if (finals.length) out.push(`<p>${finals.map(([k, v]) => `<b>${x(k)}</b> ${x(formatNumber(v))}`).join(' · ')}</p>`)

  out.push('<h2 id="steps">Steps</h2>', `<div class="graph">${graphSvg}</div>`)
  out.push(
    table(
      ['step', 'status', 'action', 'time', 'output', 'logs'],
      data.steps.map((s) => [
        `<b>${x(s.name)}</b><br><code class="muted">${x(s.nameHash)}</code>`,
        status(s.status) +
          (s.diskStatus && s.diskStatus !== s.status
            ? ` <span class="muted">(on disk: ${x(s.diskStatus)})</span>`
            : '') +
          (s.error ? `<br><span class="warn">${x(s.error)}</span>` : ''),
        `${x(s.action)}<br><span class="muted">${x(s.reason)}</span>`,
        s.seconds !== undefined ? x(formatSeconds(s.seconds)) : '',
        `<a href="${x(s.outputUrl)}">output folder</a>`,
        s.logs
          .map(
            (l) =>
              `<a href="${x(logFile(s.nameHash, l.path))}">${x(l.path)}</a> ` +
              `<span class="muted">${x(formatBytes(l.bytes))}</span>`,
          )
          .join('<br>'),
      ]),
      new Set([3]),
    ),
  )

  out.push('<h2 id="datasets">Datasets and artifacts</h2>')
  if (datasets.length === 0) out.push('<p class="muted">No step listed a finestore artifact (artifacts.json).</p>')
  else
    out.push(
      table(
        ['artifact', 'kind', 'step', 'files', 'size', 'statistics', 'lineage'],
        datasets.map((a) => [
          `<a href="${x(a.url)}"><code>${x(a.ref)}</code></a>`,
          x(a.kind),
          x(a.step),
          x(formatNumber(a.files)),
          x(formatBytes(a.bytes)),
          Object.entries(a.metadata)
            .map(([k, v]) => `${x(k)}: <b>${x(formatValue(v))}</b>`)
            .join('<br>'),
          a.lineage.map((l) => `<code>${x(l)}</code>`).join('<br>'),
        ]),
        new Set([3, 4]),
      ),
    )

  out.push('<h2 id="training">Training</h2>')
  if (charts.length === 0) out.push('<p class="muted">No training metrics (metrics.jsonl) in any step.</p>')
  else
    out.push(
      `<div class="charts">${charts
        .map(
          (c) =>
            `<figure class="chart" id="chart-${x(c.id)}">${c.svg}` +
            `<figcaption><a href="${x(c.file)}">${x(c.title)} (SVG)</a></figcaption></figure>`,
        )
        .join('\n')}</div>`,
    )
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
          Object.entries(a.metadata)
            .map(([k, v]) => `${x(k)}: <b>${x(formatValue(v))}</b>`)
            .join('<br>'),
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
        ['prompt', 'completion', 'expected', 'from'],
        data.samples.map((s) => [
          `<pre>${x(s.prompt)}</pre>`,
          `<pre>${x(s.completion)}</pre>`,
          s.expected !== undefined ? `<pre>${x(s.expected)}</pre>` : '',
          x(s.source),
        ]),
      ),
    )

  out.push('<h2 id="provenance">Provenance</h2>')
  out.push(
    table(
      ['', ''],
      [
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
      ],
    ),
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
  out.push('</body></html>')
  return out.join('\n')
}
