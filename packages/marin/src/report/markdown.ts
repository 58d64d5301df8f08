/** @module `report.md`: the page's content in Markdown, with the graph and charts as SVG files beside it. */
import { escapeCell as c, formatBytes, formatNumber, formatSeconds, formatValue } from './format.js'
import { finalMetrics, logFile, provenanceOf, runLink, type SiteParts } from './site-parts.js'

function table(head: readonly string[], rows: readonly (readonly string[])[]): string {
  return [
    `| ${head.map(c).join(' | ')} |`,
    `| ${head.map(() => '---').join(' | ')} |`,
    ...rows.map((r) => `| ${r.map(c).join(' | ')} |`),
  ].join('\n')
}

const meta = (m: Readonly<Record<string, unknown>>) =>
  Object.entries(m)
    .map(([k, v]) => `${k}: ${formatValue(v)}`)
    .join(', ')

/** Renders `report.md`; image links are relative (`step-graph.svg`, `charts/*.svg`). */
export function renderMarkdown(p: SiteParts): string {
  const { data, charts } = p
  const r = data.record
  const prov = provenanceOf(r.provenance)
  const out: string[] = [
    `# ${r.experiment}`,
    '',
    `Run \`${r.run}\`: **${r.status}**, ${r.startedAt} → ${r.finishedAt}. Record: \`${data.recordUrl}\`.`,
    '',
  ]
  const finals = finalMetrics(data.metrics)
  if (finals.length) out.push(finals.map(([k, v]) => `- ${k}: **${formatNumber(v)}**`).join('\n'), '')

  out.push('## Steps', '', '![step graph](step-graph.svg)', '')
  out.push(
    table(
      ['step', 'status', 'action', 'time', 'output folder', 'made by', 'logs'],
      data.steps.map((s) => [
        `${s.name} (\`${s.nameHash}\`)`,
        s.status + (s.error ? `: ${s.error}` : ''),
        `${s.action}: ${s.reason}`,
        s.seconds !== undefined ? formatSeconds(s.seconds) : '',
        `\`${s.outputPath}\``,
        s.madeBy ? `[${s.madeBy.run}](${runLink(r, s.madeBy).replace(/index\.html$/, 'report.md')})` : '',
        s.logs.map((l) => `[${l.path}](${logFile(s.nameHash, l.path)})`).join(', '),
      ]),
    ),
    '',
  )

  const datasets = data.artifacts.filter((a) => a.kind !== 'checkpoints')
  const checkpoints = data.artifacts.filter((a) => a.kind === 'checkpoints')
  out.push('## Datasets and artifacts', '')
  out.push(
    datasets.length
      ? table(
          ['artifact', 'kind', 'step', 'files', 'size', 'statistics', 'lineage'],
          datasets.map((a) => [
            `[\`${a.ref}\`](${a.url})`,
            a.kind,
            a.step,
            formatNumber(a.files),
            formatBytes(a.bytes),
            meta(a.metadata),
            a.lineage.join(', '),
          ]),
        )
      : '_No step listed a finestore artifact (artifacts.json)._',
    '',
  )

  for (const a of datasets)
    if (a.rows) out.push(`First rows of \`${a.ref}\` (\`${a.rows.file}\`):`, '', table(a.rows.columns, a.rows.rows), '')

  out.push('## Training', '')
  if (charts.length === 0) out.push('_No training metrics (metrics.jsonl) in any step._', '')
  for (const ch of charts.filter((c) => c.x === 'step')) out.push(`![${ch.title}](${ch.file})`, '')
  if (checkpoints.length)
    out.push(
      '### Checkpoints',
      '',
      table(
        ['checkpoint', 'step', 'files', 'size', 'metadata'],
        checkpoints.map((a) => [
          `[\`${a.ref}\`](${a.url})`,
          a.step,
          formatNumber(a.files),
          formatBytes(a.bytes),
          meta(a.metadata),
        ]),
      ),
      '',
    )

  out.push(
    '## Evaluation',
    '',
    data.evals.length
      ? table(
          ['task', 'metric', 'value', '± stderr', 'step'],
          data.evals.map((e) => [
            e.task,
            e.metric,
            formatNumber(e.value),
            e.stderr !== undefined ? formatNumber(e.stderr) : '',
            e.source,
          ]),
        )
      : '_No eval results (eval*.json) in any step._',
    '',
  )
  out.push(
    '## Sample generations',
    '',
    data.samples.length
      ? table(
          ['prompt', 'completion', 'expected', 'scores', 'from'],
          data.samples.map((s) => [
            s.prompt,
            s.completion,
            s.expected ?? '',
            Object.entries(s.scores)
              .map(([k, v]) => `${k} ${formatNumber(v)}`)
              .join(', '),
            s.source,
          ]),
        )
      : '_No sample generations (samples.jsonl) in any step._',
    '',
  )

  out.push(
    '## Provenance',
    '',
    `- git sha: \`${prov.gitSha ?? 'unknown'}\`${prov.gitDirty ? ' (uncommitted changes)' : ''}`,
    `- host: ${prov.host ?? ''}, node ${prov.node ?? ''}, recorded ${prov.timestamp ?? ''}`,
    `- script: \`${r.script ?? ''}\`, prefix \`${r.prefix}\``,
    ...data.backends.map(
      (b) =>
        `- backend (${b.step}): ${b.name}${b.simd ? ', SIMD' : ''}${b.threads ? `, ${b.threads} threads` : ''}` +
        `${b.gemm ? `; GEMM kernels: ${b.gemm}${b.native ? ` (${b.native})` : ''}` : ''}; ` +
        `adapter: ${b.adapter ?? 'none (CPU)'}`,
    ),
    '',
    table(['package', 'version'], Object.entries(prov.packages)),
    '',
    table(
      ['step', 'version hash', 'depends on'],
      data.steps.map((s) => [s.name, `\`${s.version}\``, s.dependencies.join(', ')]),
    ),
    '',
    data.artifacts.length
      ? table(
          ['artifact', 'created', 'from'],
          data.artifacts.map((a) => [`[\`${a.ref}\`](${a.url})`, a.createdAt, a.lineage.join(', ')]),
        )
      : '',
    '',
  )
  if (data.warnings.length) out.push('## Warnings', '', ...data.warnings.map((w) => `- ${w}`), '')
  return out.join('\n')
}
