import { describe, expect, test } from 'vitest'
import { renderIndex, summaryOf } from './site-index.js'
import type { RunSummary } from './site-index.js'
import type { ReportData } from './types.js'

const run = (name: string, startedAt: string, evals?: [string, number][]): RunSummary => ({
  experiment: 'tiny',
  run: name,
  status: 'SUCCEEDED',
  startedAt,
  finishedAt: startedAt,
  seconds: 1,
  steps: { total: 1, ran: 1, skipped: 0, failed: 0 },
  madeBy: [],
  headline: [],
  gitSha: null,
  gitDirty: null,
  loss: [],
  ...(evals ? { evals } : {}),
})

describe('eval results across runs on the site index', () => {
  test('summaryOf keeps each task and metric of the run', () => {
    const data = {
      record: { experiment: 'tiny', run: 'r1', status: 'SUCCEEDED', startedAt: 'a', finishedAt: 'b', provenance: {} },
      steps: [],
      metrics: [],
      evals: [
        { source: 'eval', task: 'arc_easy', metric: 'acc', value: 0.5, stderr: 0.1 },
        { source: 'eval', task: 'lambada_openai', metric: 'perplexity', value: 12.5 },
      ],
    } as unknown as ReportData
    expect(summaryOf(data).evals).toEqual([
      ['arc_easy acc', 0.5],
      ['lambada_openai perplexity', 12.5],
    ])
  })

  test('one table per experiment: a row per run, a column per task and metric, blank where a run lacks it', () => {
    const html = renderIndex([
      run('r2', '2026-01-02T00:00:00Z', [
        ['arc_easy acc', 0.625],
        ['piqa acc', 0.5],
      ]),
      run('r1', '2026-01-01T00:00:00Z', [['arc_easy acc', 0.25]]),
      run('r0', '2025-12-31T00:00:00Z'),
    ])
    const table = html.slice(html.indexOf('<h3>Evaluation across its runs</h3>'))
    expect(table).toContain('<th>arc_easy acc</th><th>piqa acc</th>')
    expect(table).toMatch(/r2<\/code><\/a><\/td><td class="num">0\.6250<\/td><td class="num">0\.5000<\/td>/)
    expect(table).toMatch(/r1<\/code><\/a><\/td><td class="num">0\.2500<\/td><td class="num"><\/td>/)
    expect(table.split('</table>')[0]).not.toContain('r0') // a run without evals has no row
  })
})
