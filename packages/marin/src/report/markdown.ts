/**
 * @module `report.md`: the page's content in Markdown, with the graph and charts as SVG files beside it. Every
 * value read from the run (errors, names, metadata, dataset rows, eval samples) is escaped as the HTML page
 * escapes it: it renders as its text, never as a tag, a link or markup; the only links are the report's own,
 * relative ones.
 */
import {
  escapeCell as c,
  codeSpan as code,
  formatBytes,
  formatNumber,
  formatSeconds,
  formatValue,
  markdownLink as link,
  escapeMarkdown as t,
} from './format.js'
import { METADATA_DEPTH, METADATA_ROWS } from './html.js'
import { mixtureTable } from './mixture.js'
import { finalMetrics, logFile, provenanceOf, runLink, type SiteParts } from './site-parts.js'
import type { DatasetRows } from './types.js'

function table(head: readonly string[], rows: readonly (readonly string[])[]): string {
  return [
    `| ${head.map(c).join(' | ')} |`,
    `| ${head.map(() => '---').join(' | ')} |`,
    ...rows.map((r) => `| ${r.map(c).join(' | ')} |`),
  ].join('\n')
}

const isNested = (v: unknown): v is object => typeof v === 'object' && v !== null
const isRecord = (v: unknown): v is Readonly<Record<string, unknown>> => isNested(v) && !Array.isArray(v)
const scalar = (v: unknown) => (v === null || v === undefined ? 'none' : t(formatValue(v)))

/** An artifact's metadata in its table cell: plain values as `name: value`, nested ones named and shown below. */
const meta = (m: Readonly<Record<string, unknown>>) =>
  Object.entries(m)
    .map(([k, v]) => (isNested(v) ? `${t(k)}: (below)` : `${t(k)}: ${scalar(v)}`))
    .join(', ')

/** A record of plain values on one line, `a: 1, b: x`; nested values deeper than the page shows stay escaped text. */
const inline = (r: Readonly<Record<string, unknown>>) =>
  Object.entries(r)
    .map(([k, v]) => `${t(k)}: ${scalar(v)}`)
    .join(', ')

/**
 * One nested metadata value as Markdown, as the HTML page shows it as nested tables: objects as an indented list by
 * key, lists of records one record a line, lists of plain values inline (`inline`), each list capped at
 * `METADATA_ROWS` entries with the rest counted. Every key and value is escaped text.
 */
function metaMarkdown(v: object, depth: number): { inline: string } | { lines: string[] } {
  const pad = '  '.repeat(depth)
  const more = (n: number) => (n > METADATA_ROWS ? [`${pad}- … ${formatNumber(n - METADATA_ROWS)} more not shown`] : [])
  if (Array.isArray(v)) {
    if (v.length === 0) return { inline: 'none' }
    const shown = v.slice(0, METADATA_ROWS)
    if (!shown.every(isRecord)) {
      const text = shown.map((e) => (isNested(e) ? t(JSON.stringify(e)) : scalar(e))).join(', ')
      return { inline: v.length > METADATA_ROWS ? `${text}, … ${formatNumber(v.length - METADATA_ROWS)} more` : text }
    }
    return { lines: [...shown.map((r) => `${pad}- ${inline(r)}`), ...more(v.length)] }
  }
  const entries = Object.entries(v)
  if (entries.length === 0) return { inline: 'none' }
  return {
    lines: [...entries.slice(0, METADATA_ROWS).flatMap(([k, e]) => metaItem(k, e, depth)), ...more(entries.length)],
  }
}

/** `- key: value` at `depth`, a nested value as its own list below the key. */
function metaItem(k: string, v: unknown, depth: number): string[] {
  const pad = '  '.repeat(depth)
  if (!isNested(v)) return [`${pad}- ${t(k)}: ${scalar(v)}`]
  if (depth >= METADATA_DEPTH) return [`${pad}- ${t(k)}: ${t(JSON.stringify(v))}`]
  const m = metaMarkdown(v, depth + 1)
  return 'inline' in m ? [`${pad}- ${t(k)}: ${m.inline}`] : [`${pad}- ${t(k)}:`, ...m.lines]
}

/** The nested metadata of each artifact, under a heading naming it (the table's cells say "(below)"). */
function nestedMeta(artifacts: readonly { ref: string; metadata: Readonly<Record<string, unknown>> }[]): string[] {
  const out: string[] = []
  for (const a of artifacts) {
    const nested = Object.entries(a.metadata).filter(([, v]) => isNested(v))
    if (nested.length === 0) continue
    out.push(`#### Statistics of ${code(a.ref)}`, '', ...nested.flatMap(([k, v]) => metaItem(k, v, 0)), '')
  }
  return out
}

/** A dataset's first rows; the columns not shown are counted. */
function rowsText(a: { readonly ref: string }, r: DatasetRows): string[] {
  const more = r.omittedColumns
    ? ` (${r.omittedColumns} more column${r.omittedColumns === 1 ? '' : 's'} not shown)`
    : ''
  return [
    `First rows of ${code(a.ref)} (${code(r.file)})${more}:`,
    '',
    table(
      r.columns.map(t),
      r.rows.map((row) => row.map(t)),
    ),
    '',
  ]
}

/** Renders `report.md`; image links are relative (`step-graph.svg`, `charts/*.svg`). */
export function renderMarkdown(p: SiteParts): string {
  const { data, charts } = p
  const r = data.record
  const prov = provenanceOf(r.provenance)
  const out: string[] = [
    `# ${t(r.experiment)}`,
    '',
    `Run ${code(r.run)}: **${t(r.status)}**, ${t(r.startedAt)} → ${t(r.finishedAt)}. Record: ${code(data.recordUrl)}.`,
    '',
  ]
  const finals = finalMetrics(data.metrics)
  if (finals.length) out.push(finals.map(([k, v]) => `- ${k}: **${formatNumber(v)}**`).join('\n'), '')

  out.push('## Steps', '', '![step graph](step-graph.svg)', '')
  out.push(
    table(
      ['step', 'status', 'action', 'time', 'output folder', 'made by', 'logs'],
      data.steps.map((s) => [
        `${t(s.name)} (${code(s.nameHash)})`,
        t(s.status + (s.error ? `: ${s.error}` : '')),
        t(`${s.action}: ${s.reason}`),
        s.seconds !== undefined ? formatSeconds(s.seconds) : '',
        code(s.outputPath),
        s.madeBy ? link(t(s.madeBy.run), runLink(r, s.madeBy).replace(/index\.html$/, 'report.md')) : '',
        s.logs.map((l) => link(t(l.path), logFile(s.nameHash, l.path))).join(', '),
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
            link(code(a.ref), a.url),
            t(a.kind),
            t(a.step),
            formatNumber(a.files),
            formatBytes(a.bytes),
            meta(a.metadata),
            t(a.lineage.join(', ')),
          ]),
        )
      : '_No step listed a finestore artifact (artifacts.json)._',
    '',
    ...nestedMeta(datasets),
  )

  for (const a of datasets) if (a.rows) out.push(...rowsText(a, a.rows))

  out.push('## Training', '')
  if (charts.length === 0) out.push('_No training metrics (metrics.jsonl) in any step._', '')
  for (const ch of charts.filter((c) => c.x === 'step')) out.push(`!${link(t(ch.title), ch.file)}`, '')
  for (const m of data.mixtures ?? []) {
    const mt = mixtureTable(m)
    const rows = mt.rows.map((r) => r.map((cell, i) => (i === 1 ? code(cell) : t(cell))))
    out.push(`### Data mixture of ${t(m.step)}`, '', table(mt.head, rows), '')
  }
  if (checkpoints.length)
    out.push(
      '### Checkpoints',
      '',
      table(
        ['checkpoint', 'step', 'files', 'size', 'metadata'],
        checkpoints.map((a) => [
          link(code(a.ref), a.url),
          t(a.step),
          formatNumber(a.files),
          formatBytes(a.bytes),
          meta(a.metadata),
        ]),
      ),
      '',
      ...nestedMeta(checkpoints),
    )

  out.push(
    '## Evaluation',
    '',
    data.evals.length
      ? table(
          ['task', 'metric', 'value', '± stderr', 'step'],
          data.evals.map((e) => [
            t(e.task),
            t(e.metric),
            formatNumber(e.value),
            e.stderr !== undefined ? formatNumber(e.stderr) : '',
            t(e.source),
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
            t(s.prompt),
            t(s.completion),
            t(s.expected ?? ''),
            Object.entries(s.scores)
              .map(([k, v]) => `${t(k)} ${formatNumber(v)}`)
              .join(', '),
            t(s.source),
          ]),
        )
      : '_No sample generations (samples.jsonl) in any step._',
    '',
  )

  out.push(
    '## Provenance',
    '',
    `- git sha: ${code(prov.gitSha ?? 'unknown')}${prov.gitDirty ? ' (uncommitted changes)' : ''}`,
    `- host: ${t(prov.host ?? '')}, node ${t(prov.node ?? '')}, recorded ${t(prov.timestamp ?? '')}`,
    `- script: ${code(r.script ?? '')}, prefix ${code(r.prefix)}`,
    ...data.backends.map((b) =>
      t(
        `- backend (${b.step}): ${b.name}${b.simd ? ', SIMD' : ''}${b.threads ? `, ${b.threads} threads` : ''}` +
          `${b.gemm ? `; GEMM kernels: ${b.gemm}${b.native ? ` (${b.native})` : ''}` : ''}; ` +
          `adapter: ${b.adapter ?? 'none (CPU)'}`,
      ),
    ),
    '',
    table(
      ['package', 'version'],
      Object.entries(prov.packages).map(([k, v]) => [t(k), t(v)]),
    ),
    '',
    table(
      ['step', 'version hash', 'depends on'],
      data.steps.map((s) => [t(s.name), code(s.version), t(s.dependencies.join(', '))]),
    ),
    '',
    data.artifacts.length
      ? table(
          ['artifact', 'created', 'from'],
          data.artifacts.map((a) => [link(code(a.ref), a.url), t(a.createdAt), t(a.lineage.join(', '))]),
        )
      : '',
    '',
  )
  if (data.warnings.length) out.push('## Warnings', '', ...data.warnings.map((w) => `- ${t(w)}`), '')
  return out.join('\n')
}
