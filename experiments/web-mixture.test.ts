import { spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { afterAll, describe, expect, test } from 'vitest'

const root = resolve(import.meta.dirname, '..')
const prefix = mkdtempSync(join(tmpdir(), 'web-mixture-'))
const site = join(prefix, 'site')
afterAll(() => rmSync(prefix, { recursive: true, force: true }))

const STEPS = [
  'warc-sample',
  'web',
  'web-en',
  'quality-examples',
  'quality-hq',
  'web-hq',
  'web-dedup',
  'web-decontam',
  'brown-text',
  'brown',
  'brown-dedup',
  'brown-bpe',
  'web-tokens',
  'gpt-web-mixture',
  'eval-web-mixture',
]

function run(...flags: string[]) {
  const r = spawnSync(process.execPath, ['--import', 'tsx', 'experiments/web-mixture.ts', ...flags], {
    cwd: root,
    encoding: 'utf8',
    env: { ...process.env, WEB_MIXTURE_SCALE: 'tiny', MARIN_PREFIX: prefix, WEB_MIXTURE_SITE: site, LOG_LEVEL: 'warn' },
  })
  if (r.status !== 0) throw new Error(`web-mixture exited ${r.status}:\n${r.stdout}\n${r.stderr}`)
  return r.stdout
}

type Artifacts = Record<string, unknown> & { artifacts: { name: string; version: number }[] }

describe('the web-mixture experiment, tiny scale', () => {
  test('WARC pages → English → quality → dedup → decontamination → { web, brown } mixture, published', () => {
    // One step at a time: the local cluster keeps one warm runner (and one pool of zephyr workers) for all 15
    // steps, not one on each of its two workers for the two branches (6 processes, not 10).
    const out = run('--max-concurrent', '1')
    for (const s of STEPS) expect(out).toMatch(new RegExp(`SUCCESS ${s}_[0-9a-f]{8} `))
    const dir = join(prefix, 'experiments/web-mixture-tiny')
    const record = JSON.parse(readFileSync(join(dir, readdirSync(dir)[0]!), 'utf8'))
    const arts = (name: string): Artifacts => {
      const s = record.steps.find((x: { name: string }) => x.name === name)
      return JSON.parse(readFileSync(join(s.outputPath, 'artifacts.json'), 'utf8'))
    }
    // The sample's nine HTML responses (example.com, iana.org and real-pages.warc.gz's seven: its Atom feed is not
    // HTML): the GB2312 navigation box has no main text; of the eight pages, three are tagged en (the UTF-16 page,
    // mostly Plane 1 scripts, only at 0.34), two de and three Japanese (CLD3 reads the CP932 blog page, whose first
    // 2000 bytes are mostly kanji tables, as zh); only example.com and iana.org pass en at 0.5.
    const web = arts('web').web as { pagesRead: number; noMainText: number; byLanguage: Record<string, number> }
    expect(web).toMatchObject({ pagesRead: 9, noMainText: 1, byLanguage: { en: 3, de: 2, ja: 2, zh: 1 } })
    expect(arts('web-en').records).toBe(2)
    const quality = arts('web-hq').report as { documentsIn: number; scored: number; cut: number }
    expect(quality).toMatchObject({ documentsIn: 2, scored: 2, cut: 0.5 })
    // Decontamination counted per task of the quickstart's evaluation.
    const decon = arts('web-decontam').report as { perTask: { task: string; evalDocuments: number }[] }
    expect(decon.perTask.map((p) => p.task)).toEqual(['brown_cloze', 'brown_last_word', 'brown_bpb'])
    for (const p of decon.perTask) expect(p.evalDocuments).toBeGreaterThan(0)
    // The web tokens are in Brown's vocabulary; the mixture consumed both in the stage weights' proportions.
    expect(arts('web-tokens').vocabSize).toBe(arts('brown-bpe').vocabSize)
    const trained = arts('gpt-web-mixture') as Artifacts & {
      steps: number
      tokensTrained: number
      mixture: {
        sources: Record<string, string>
        tokensPerSource: Record<string, number>
        evalLossPerSource: Record<string, number | null>
      }
    }
    expect(trained.steps).toBe(20)
    const m = trained.mixture
    expect(Object.keys(m.sources)).toEqual(['web', 'brown'])
    expect(m.tokensPerSource.web! + m.tokensPerSource.brown!).toBe(trained.tokensTrained)
    // 10 steps at 10 % web, 10 at 30 %: 20 % of the rows, give or take a row a step
    const webShare = m.tokensPerSource.web! / trained.tokensTrained
    expect(webShare).toBeGreaterThan(0.2 - 20 / (20 * 8))
    expect(webShare).toBeLessThan(0.2 + 20 / (20 * 8))
    expect(m.evalLossPerSource.web).toBeGreaterThan(0)
    expect(m.evalLossPerSource.brown).toBeGreaterThan(0)
    const results = JSON.parse(
      readFileSync(
        join(record.steps.find((x: { name: string }) => x.name === 'eval-web-mixture').outputPath, 'results.json'),
        'utf8',
      ),
    )
    expect(Object.keys(results.tasks)).toEqual(['brown_cloze', 'brown_last_word', 'brown_bpb'])
    // Published: the run's page shows the mixture, with the tokens each source gave.
    const page = readFileSync(join(site, 'runs', 'web-mixture-tiny', record.run, 'index.html'), 'utf8')
    expect(page).toContain('Data mixture of gpt-web-mixture')
    expect(page).toContain(`<td class="num">${m.tokensPerSource.web!.toLocaleString('en-US')}</td>`)
    expect(page).toContain('charts/tokens-per-source.svg')
    expect(page).toContain('charts/eval-loss-per-source.svg')
    // ...and each curation step's counts: pages by language, the quality cut, decontamination per task
    expect(page).toContain(
      'web:<table class="meta"><tr><th>pagesRead</th><td class="num">9</td></tr>' +
        '<tr><th>kept</th><td class="num">8</td></tr><tr><th>noMainText</th><td class="num">1</td></tr>',
    )
    expect(page).toMatch(/quality:<table class="meta"><tr><th>classifier<\/th><td>classifiers\/quality-hq@\d+<\/td>/)
    expect(page).toContain(
      'decontamination:<table class="meta"><tr><th>n</th><td class="num">13</td></tr>' +
        '<tr><th>mode</th><td>remove</td></tr><tr><th>documentsIn</th><td class="num">2</td></tr>',
    )
    expect(page).toContain(
      '<tr><th>perTask</th><td><table class="meta"><tr><th>brown_cloze</th><td><table class="meta">' +
        '<tr><th>documents</th><td class="num">0</td></tr>',
    )
    expect(page).not.toContain('{&quot;pagesRead')
    const md = readFileSync(join(site, 'runs', 'web-mixture-tiny', record.run, 'report.md'), 'utf8')
    expect(md).toContain('| web | `token-caches/web-tokens@')

    // Every step is content-addressed: run again, it would do nothing. The plan of a second process is enough to
    // show it (each step's version and done status read back); that a planned skip runs nothing, the quickstart's
    // rerun shows (quickstart.test.ts), so this saves a second run's report.
    const again = run('--dry-run')
    expect(again).toContain(`plan web-mixture-tiny: ${STEPS.length} steps under `)
    for (const s of STEPS) expect(again).toMatch(new RegExp(`skip {2}${s}_[0-9a-f]{8}`))
    expect(again.match(/^ {2}skip {2}/gm)).toHaveLength(STEPS.length)
  }, 120_000)
})
