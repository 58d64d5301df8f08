/**
 * Text a run carries (step errors, artifact metadata, dataset rows, eval samples) is data: the Markdown twin
 * escapes it as the HTML page does, links only where the report links, a row of 20,000 keys shows a screen of
 * columns, a dataset's first rows cost the bytes shown, not the shard, and nested metadata (a curation step's
 * counts) shows as escaped nested tables, not JSON.
 */
import { readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { gzipSync } from 'node:zlib'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { openStore, storeUrl } from '@marin/finestore'
import { Executor } from '../executor/executor.js'
import { Experiment } from '../executor/experiment.js'
import { step } from '../executor/step.js'
import { buildReport } from './build.js'
import { MAX_COLUMNS, ROWS_MAX_BYTES } from './first-rows.js'
import { METADATA_ROWS } from './html.js'
import { runFolder } from './site-parts.js'

const HOSTILE = '<script>alert(1)</script> <img src=x onerror=alert(2)> [click](javascript:alert(3)) `x` *y* | z'
const WIDE = Object.fromEntries(Array.from({ length: 20_000 }, (_, i) => [`k${i}`, i]))
/** A curation step's counts as its dataset's metadata carries them (nested, with lists and data-made keys). */
const CURATED = {
  documentsIn: 9,
  web: {
    pagesRead: 9,
    kept: 8,
    byLanguage: { en: 7, [HOSTILE]: 1 },
    skips: Array.from({ length: METADATA_ROWS + 5 }, (_, i) => ({ reason: 'corrupt', file: 'a.warc.gz', offset: i })),
  },
  quality: { classifier: 'classifiers/quality-hq@1', threshold: 0.5, kept: 3, tags: ['en', HOSTILE] },
  decontamination: { n: 13, perTask: { brown_cloze: { documents: 1, ngrams: 4 } }, examples: [] },
}

let dir: string
let md: string
let html: string
let warnings: readonly string[]

async function commit(prefix: string, name: string, files: Record<string, string | Uint8Array>, meta = {}) {
  const store = await openStore({ url: storeUrl(prefix), fsync: false })
  try {
    const txn = await store.begin(name, { metadata: meta })
    for (const [p, body] of Object.entries(files)) await txn.put(p, body)
    const { version } = await txn.commit()
    const view = await store.open(`${name}@${version}`)
    return { version, blobs: view.files().map((f) => view.entry(f).blob) }
  } finally {
    store.close()
  }
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'marin-report-twins-'))
  const prefix = join(dir, 'prefix')
  let bigBlob = ''
  const data = step({
    name: 'hostile',
    config: {},
    fn: async (_c, ctx) => {
      const rows = [{ id: HOSTILE, text: HOSTILE }, WIDE, { id: 3, text: 'plain' }]
      const hostile = await commit(
        prefix,
        'datasets/hostile',
        { 'part-0.jsonl': rows.map((r) => JSON.stringify(r)).join('\n') },
        { note: HOSTILE },
      )
      // A first shard larger than what is read for rows: its tail is damaged below, which only a full read sees.
      const filler = `${JSON.stringify({ text: 'f'.repeat(1000) })}\n`.repeat(Math.ceil((ROWS_MAX_BYTES * 2) / 1000))
      const big = await commit(prefix, 'datasets/big', {
        'part-0.jsonl': `${JSON.stringify({ id: 'first', text: 'shown' })}\n${filler}`,
      })
      bigBlob = big.blobs[0]!
      const gz = await commit(prefix, 'datasets/gz', {
        'part-0.jsonl.gz': gzipSync(`${JSON.stringify({ id: 'gz', text: 'from a gzip shard' })}\n`),
      })
      const curated = await commit(
        prefix,
        'datasets/curated',
        { 'part-0.jsonl': `${JSON.stringify({ id: 'c', text: 'kept' })}\n` },
        CURATED,
      )
      const evals = await commit(prefix, 'evals/hostile', {
        'samples/task.jsonl': `${JSON.stringify({ prompt: HOSTILE, completion: HOSTILE, answer: HOSTILE })}\n`,
      })
      writeFileSync(
        join(ctx.outputPath, 'artifacts.json'),
        JSON.stringify([
          `datasets/hostile@${hostile.version}`,
          `datasets/big@${big.version}`,
          `datasets/gz@${gz.version}`,
          `datasets/curated@${curated.version}`,
          `evals/hostile@${evals.version}`,
        ]),
      )
    },
  })
  const fails = step({
    name: 'fails',
    config: { input: data.output() },
    fn: async () => {
      throw new Error(HOSTILE)
    },
  })
  const record = await new Executor({ prefix, leaseTtlMs: 2000 }).run(
    new Experiment({ name: 'twins', steps: [data, fails] }),
  )
  expect(record.status).toBe('FAILED')
  const blob = join(prefix, 'store', 'blobs', 'sha256', bigBlob.slice(0, 2), bigBlob)
  const bytes = readFileSync(blob)
  bytes.fill(0x20, bytes.length - 100)
  rmSync(blob, { force: true })
  writeFileSync(blob, bytes)
  const built = await buildReport('twins', prefix)
  md = built.site.get(`${runFolder(record)}/report.md`)!
  html = built.site.get(`${runFolder(record)}/index.html`)!
  warnings = built.data.warnings
}, 60_000)
afterAll(() => rmSync(dir, { recursive: true, force: true }))

describe('report.md', () => {
  it('carries no tag, no handler and no link the report did not make', () => {
    expect(md).toContain('alert') // the text is there, as text
    expect(md).not.toMatch(/<[a-z!/]/i)
    expect(md).toContain('&lt;script&gt;alert\\(1\\)&lt;/script&gt;')
    expect(md).toContain('\\[click\\]\\(javascript:alert\\(3\\)\\)')
    for (const [, dest] of md.matchAll(/\]\(([^)]*)\)/g)) expect(dest, dest).toMatch(/^(?![a-z][a-z0-9+.-]*:|\/)/i)
    // Every table row keeps its cells: the `|` in the data is escaped.
    const sample = md.split('\n').find((l) => l.includes('&lt;img') && l.includes('task'))!
    expect(sample.split(/(?<!\\)\|/).length).toBe(7)
  })

  it('the HTML page still escapes them all', () => {
    expect(html).not.toContain('<script>alert')
    expect(html).not.toContain('<img src=x')
    expect(html).toContain('&lt;script&gt;alert(1)&lt;/script&gt;')
  })
})

describe('dataset rows', () => {
  it(`show at most ${MAX_COLUMNS} columns of a 20,000-key row and say how many were left out`, () => {
    const at = html.indexOf('<h3><code>datasets/hostile@')
    const table = html.slice(at, html.indexOf('</table>', at))
    expect((table.match(/<th>/g) ?? []).length).toBe(MAX_COLUMNS)
    expect(table).toContain(`${20_002 - MAX_COLUMNS} more columns not shown`)
    expect(md).toContain(`(${20_002 - MAX_COLUMNS} more columns not shown)`)
    const mdRow = md.split('\n').find((l) => l.startsWith('| id | text | k0 | k1 |'))!
    expect(mdRow.split(' | ').length).toBe(MAX_COLUMNS)
  })

  it('read only the first lines of a large shard (its damaged tail is never read), and of a gzip shard', () => {
    expect(warnings.filter((w) => w.includes('datasets/big'))).toEqual([])
    expect(html).toMatch(/datasets\/big@1[\s\S]*?<td>first<\/td><td>shown<\/td>/)
    expect(html).toMatch(/datasets\/gz@1[\s\S]*?<td>gz<\/td><td>from a gzip shard<\/td>/)
    expect(readdirSync(dir)).toEqual(['prefix'])
  })
})

describe('nested metadata', () => {
  /** The datasets section (the log lines further down keep their raw JSON on purpose, under "raw JSON"). */
  const section = () => html.slice(html.indexOf('<h2 id="datasets">'), html.indexOf('<h2 id="training">'))
  const cell = () => {
    const s = section()
    const at = s.indexOf('<code>datasets/curated@')
    return s.slice(at, s.indexOf('</td></tr>\n', at))
  }

  it('shows as nested tables of escaped keys and values, never as JSON', () => {
    expect(section()).toContain('<code>datasets/curated@')
    expect(section()).not.toContain('{"')
    expect(section()).not.toContain('{&quot;')
    const c = cell()
    expect(c).toContain('<div>documentsIn: <b>9</b></div>')
    expect(c).toContain('<div>web:<table class="meta"><tr><th>pagesRead</th><td class="num">9</td></tr>')
    expect(c).toContain(
      '<tr><th>byLanguage</th><td><table class="meta"><tr><th>en</th><td class="num">7</td></tr>' +
        '<tr><th>&lt;script&gt;alert(1)&lt;/script&gt; &lt;img src=x onerror=alert(2)&gt;',
    )
    expect(c).toContain(
      '<tr><th>skips</th><td><table class="meta"><tr><th>reason</th><th>file</th><th>offset</th></tr>' +
        '<tr><td>corrupt</td><td>a.warc.gz</td><td class="num">0</td></tr>',
    )
    expect(c).toContain(`<td class="num">${METADATA_ROWS - 1}</td></tr><tr><td colspan="3" class="muted">… 5 more`)
    expect(c).not.toContain(`<td class="num">${METADATA_ROWS}</td>`)
    expect(c).toContain('<tr><th>tags</th><td>en, &lt;script&gt;alert(1)')
    expect(c).toContain('<th>classifier</th><td>classifiers/quality-hq@1</td>')
    expect(c).toContain(
      '<div>decontamination:<table class="meta"><tr><th>n</th><td class="num">13</td></tr>' +
        '<tr><th>perTask</th><td><table class="meta"><tr><th>brown_cloze</th><td><table class="meta">' +
        '<tr><th>documents</th><td class="num">1</td></tr><tr><th>ngrams</th><td class="num">4</td></tr></table>',
    )
    expect(c).toContain('<tr><th>examples</th><td><span class="muted">none</span></td></tr>')
  })
})

describe('nested metadata in report.md', () => {
  /** The Markdown from the curated artifact's statistics heading to the next heading. */
  const block = () => {
    const at = md.indexOf('#### Statistics of `datasets/curated@')
    return md.slice(at, md.indexOf('\n#', at + 1))
  }

  it('shows as an indented list of escaped keys and values, never as JSON', () => {
    const row = md.split('\n').find((l) => l.includes('`datasets/curated@'))!
    expect(row).toContain('documentsIn: 9, web: (below), quality: (below), decontamination: (below)')
    const b = block()
    expect(b).not.toContain('{"')
    expect(b).not.toMatch(/<[a-z!/]/i)
    expect(b).toContain('- web:\n  - pagesRead: 9\n  - kept: 8\n  - byLanguage:\n    - en: 7\n    - &lt;script&gt;')
    expect(b).toContain('  - skips:\n    - reason: corrupt, file: a.warc.gz, offset: 0\n')
    expect(b).toContain(
      `    - reason: corrupt, file: a.warc.gz, offset: ${METADATA_ROWS - 1}\n    - … 5 more not shown`,
    )
    expect(b).not.toContain(`offset: ${METADATA_ROWS}\n`)
    expect(b).toContain('  - tags: en, &lt;script&gt;alert\\(1\\)')
    expect(b).toContain('  - classifier: classifiers/quality-hq@1\n')
    expect(b).toContain(
      '- decontamination:\n  - n: 13\n  - perTask:\n    - brown\\_cloze:\n      - documents: 1\n      - ngrams: 4\n' +
        '  - examples: none',
    )
  })
})
