/** The run page of a mixture training step: its sources, the weights of each stage and the tokens and eval loss of
 * each source, in the HTML page and its Markdown twin, read from the step's `artifacts.json`. */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { openStore, storeUrl } from '@marin/finestore'
import { Executor } from '../executor/executor.js'
import { Experiment } from '../executor/experiment.js'
import { step } from '../executor/step.js'
import { buildReport } from './build.js'
import { mixtureOf, mixtureTable } from './mixture.js'
import { runFolder } from './site-parts.js'
import type { ReportData } from './types.js'

// What trainStep records for a mixture (MixtureSummary); the source names are data, escaped like any other.
const MIXTURE = {
  sources: { web: 'token-caches/web-tokens@2', '<b>wiki</b>': 'token-caches/brown-bpe@1' },
  stages: [
    { untilStep: 100, weights: { web: 0.2, '<b>wiki</b>': 0.8 } },
    { untilStep: null, weights: { web: 0.5, '<b>wiki</b>': 0.5 } },
  ],
  repeat: false,
  tokensPerSource: { web: 24_576, '<b>wiki</b>': 57_344 },
  evalLossPerSource: { web: 4.25, '<b>wiki</b>': 3.5 },
  evalBpbPerSource: { web: 1.5, '<b>wiki</b>': null },
}

let dir: string
let html: string
let md: string
let data: ReportData
let site: ReadonlyMap<string, string>

/** A small committed artifact, so that a step's artifacts.json lists one. */
async function commit(prefix: string, name: string): Promise<string> {
  const store = await openStore({ url: storeUrl(prefix), fsync: false })
  try {
    const txn = await store.begin(name, { metadata: {} })
    await txn.put('config.json', '{}')
    return `${name}@${(await txn.commit()).version}`
  } finally {
    store.close()
  }
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'marin-report-mixture-'))
  const prefix = join(dir, 'prefix')
  const listed = (name: string, mixture: unknown) => async (_c: unknown, ctx: { outputPath: string }) => {
    const artifacts = [await commit(prefix, `models/${name}`)]
    writeFileSync(join(ctx.outputPath, 'artifacts.json'), JSON.stringify({ artifacts, mixture }))
  }
  const train = step({
    name: 'gpt-mix',
    config: {},
    fn: async (c, ctx) => {
      await listed('gpt-mix', MIXTURE)(c, ctx)
      // per-source metrics as levanter's pipeline logs them for a mixture
      const rows = [1, 2].map((s) => ({
        step: s,
        'train/loss': 5 - s,
        'data/web/tokens': 100 * s,
        'data/<b>wiki</b>/tokens': 300 * s,
        'eval/web/loss': 4.5 - s / 4,
        'eval/<b>wiki</b>/loss': 3.9 - s / 5,
      }))
      writeFileSync(join(ctx.outputPath, 'metrics.jsonl'), rows.map((r) => JSON.stringify(r)).join('\n'))
    },
  })
  const odd = step({
    name: 'odd',
    config: {},
    fn: listed('odd', 'web'),
  })
  const record = await new Executor({ prefix, leaseTtlMs: 2000 }).run(
    new Experiment({ name: 'mix', steps: [train, odd] }),
  )
  expect(record.status, JSON.stringify(record.steps.map((s) => s.error))).toBe('SUCCESS')
  const built = await buildReport('mix', prefix)
  data = built.data
  site = built.site
  html = built.site.get(`${runFolder(record)}/index.html`)!
  md = built.site.get(`${runFolder(record)}/report.md`)!
}, 60_000)
afterAll(() => rmSync(dir, { recursive: true, force: true }))

describe('the run page of a mixture training step', () => {
  it('collects the mixture from artifacts.json, and warns about one it cannot read', () => {
    expect(data.mixtures).toHaveLength(1)
    expect(data.mixtures![0]!.sources.map((s) => [s.name, s.cache, s.tokens])).toEqual([
      ['web', 'token-caches/web-tokens@2', 24_576],
      ['<b>wiki</b>', 'token-caches/brown-bpe@1', 57_344],
    ])
    expect(data.warnings).toContain('odd: artifacts.json has a mixture the report cannot read (no sources or stages)')
  })

  it('shows a row per source: cache, weight by stage, tokens consumed and their share, eval loss', () => {
    const t = mixtureTable(mixtureOf('gpt-mix', MIXTURE)!)
    expect(t.head).toEqual([
      'source',
      'token cache',
      'weight (steps 0–99)',
      'weight (steps 100–end)',
      'tokens consumed',
      'share of tokens',
      'eval loss',
      'eval bpb',
    ])
    expect(t.rows).toEqual([
      ['web', 'token-caches/web-tokens@2', '20.0%', '50.0%', '24,576', '30.0%', '4.2500', '1.5000'],
      ['<b>wiki</b>', 'token-caches/brown-bpe@1', '80.0%', '50.0%', '57,344', '70.0%', '3.5000', '—'],
    ])
    // one set of weights for the whole run: one column
    const single = mixtureOf('s', { ...MIXTURE, stages: [{ untilStep: null, weights: { web: 1 } }] })!
    expect(mixtureTable(single).head.filter((h) => h.startsWith('weight'))).toEqual(['weight'])
  })

  it('charts eval loss and tokens consumed per source, a series a source', () => {
    const files = [...site.keys()].filter((f) => f.includes('/charts/')).map((f) => f.split('/charts/')[1])
    expect(files).toEqual(expect.arrayContaining(['eval-loss-per-source.svg', 'tokens-per-source.svg']))
    const svg = site.get([...site.keys()].find((f) => f.endsWith('/charts/tokens-per-source.svg'))!)!
    expect(svg).toContain('data/web/tokens')
    expect(svg).toContain('data/&lt;b&gt;wiki&lt;/b&gt;/tokens')
    expect(html).toContain('Tokens consumed per source')
    expect(md).toContain('![Eval loss per source](charts/eval-loss-per-source.svg)')
  })

  it('is on the HTML page and in report.md, the names escaped', () => {
    expect(html).toContain('<h3 id="mixture-gpt-mix">Data mixture of gpt-mix</h3>')
    expect(html).toContain('<th>weight (steps 100–end)</th>')
    expect(html).toContain('<td>&lt;b&gt;wiki&lt;/b&gt;</td><td><code>token-caches/brown-bpe@1</code></td>')
    expect(html).toContain('<td class="num">57,344</td><td class="num">70.0%</td><td class="num">3.5000</td>')
    expect(html).not.toContain('<b>wiki</b>')
    expect(md).toContain('### Data mixture of gpt-mix')
    expect(md).toContain('| web | `token-caches/web-tokens@2` | 20.0% | 50.0% | 24,576 | 30.0% | 4.2500 | 1.5000 |')
    expect(md).toContain('| &lt;b&gt;wiki&lt;/b&gt; | `token-caches/brown-bpe@1` | 80.0% | 50.0% | 57,344 |')
  })
})
