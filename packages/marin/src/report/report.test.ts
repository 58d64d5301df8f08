import { copyFileSync, existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import packagedChromium from '@sparticuz/chromium'
import { chromium } from 'playwright-core'
import { Executor, type ExperimentRecord } from '../executor/executor.js'
import { Experiment } from '../executor/experiment.js'
import { ingestStep } from '../steps/datakit-steps.js'
import { runCli } from '../cli/program.js'
import { isMarinError } from '../errors.js'
import { buildReport } from './build.js'
import { LOG_TAIL_BYTES } from './collect.js'
import { MANIFEST_FILE, publishSite } from './publish.js'
import { RUNS_FILE } from './site-index.js'
import { runFolder } from './site-parts.js'
import { chainFixture, reportFixture } from './test-fixture-experiment.js'

// The Chromium build that the `@sparticuz/chromium` package ships (unpacked into the temp folder
// on first use): the test needs no browser installed on the machine and downloads nothing.
const CHROMIUM_ARGS = [
  ...packagedChromium.args,
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
]

let dir: string
let prefix: string
let record: ExperimentRecord
/** The run page's folder inside the site: `runs/<experiment>/<run>`. */
let page: string

/** Every href and src of a page. */
const linksOf = (html: string) => [...html.matchAll(/\s(?:href|src)="([^"]*)"/g)].map((m) => m[1]!)
/** A link that works wherever the site is copied: no scheme, no leading slash, no protocol-relative form. */
const isRelative = (u: string) => !/^[a-z][a-z0-9+.-]*:/i.test(u) && !u.startsWith('/')
/** The part of a page under `<h2 id="ID">`, up to the next h2. */
function section(html: string, id: string): string {
  const at = html.indexOf(`<h2 id="${id}">`)
  expect(at, `section #${id}`).toBeGreaterThanOrEqual(0)
  const end = html.indexOf('<h2', at + 4)
  return html.slice(at, end < 0 ? undefined : end)
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'marin-report-'))
  prefix = join(dir, 'prefix')
  record = await new Executor({ prefix, leaseTtlMs: 2000 }).run(reportFixture(prefix))
  expect(record.status).toBe('SUCCESS')
  page = runFolder(record)
}, 60_000)

afterAll(() => rmSync(dir, { recursive: true, force: true }))

describe('buildReport', () => {
  it('gathers steps, artifacts, metrics, evals and samples from a real run', async () => {
    const { data, site } = await buildReport('tiny-report', prefix)
    expect(data.record.run).toBe(record.run)
    expect(data.steps.map((s) => [s.name, s.status])).toEqual([
      ['ingest', 'SUCCESS'],
      ['dedup', 'SUCCESS'],
      ['train', 'SUCCESS'],
      ['eval', 'SUCCESS'],
    ])
    expect(data.steps.every((s) => s.logs.length > 0 && s.seconds !== undefined)).toBe(true)
    expect(data.artifacts.map((a) => a.ref)).toEqual([
      'datasets/raw@1',
      'datasets/dedup@1',
      'checkpoints/tiny@1',
      'eval/tiny@1',
    ])
    expect(data.artifacts[1]!.metadata).toMatchObject({ documentsIn: 5, documentsOut: 4, duplicatesRemoved: 1 })
    // The site links to its own copies of the manifests; the step folders are named, not linked.
    for (const a of data.artifacts) expect(site.has(`${page}/${a.url}`), a.url).toBe(true)
    expect(data.metrics.filter((m) => m.values['train/loss'] !== undefined)).toHaveLength(20)
    expect(data.evals).toContainEqual({ source: 'eval', task: 'cloze<brown>', metric: 'accuracy', value: 0.25 })
    expect(data.evals).toContainEqual({
      source: 'eval',
      task: 'next-word',
      metric: 'exact_match',
      value: 0.5,
      stderr: 0.1,
    })
    expect(data.samples[0]).toEqual({ source: 'eval', prompt: 'the cat', completion: ' sat on the <mat>', scores: {} })
    // Generation records of the eval artifact, at most SAMPLES_PER_TASK of them, with their scores.
    expect(data.samples.slice(1)).toHaveLength(5)
    expect(data.samples[1]).toEqual({
      source: 'eval: next-word',
      prompt: 'the dog sat',
      completion: ' on the',
      expected: 'on',
      scores: { exact_match: 0 },
    })
    expect(data.warnings).toEqual([])
    expect([...site.keys()].sort()).toEqual(
      expect.arrayContaining([
        'index.html',
        RUNS_FILE,
        ...[
          'index.html',
          'report.md',
          'step-graph.svg',
          'charts/loss.svg',
          'charts/loss-tokens.svg',
          'charts/loss-time.svg',
          'charts/lr.svg',
          'charts/tokens-per-sec.svg',
          'charts/eval-bpb.svg',
          'data.json',
          'summary.json',
        ].map((f) => `${page}/${f}`),
      ]),
    )
    const html = site.get(`${page}/index.html`)!
    // Self-contained: no stylesheet link, external image or font, no script that fetches anything.
    expect(html).not.toMatch(/<link|<img|@import|url\(http|src="http|fetch\(|XMLHttpRequest|import\(/i)
    expect(html).toContain('cloze&lt;brown&gt;')
    expect(html).toContain(record.steps[0]!.nameHash)
    expect(html).toContain('duplicatesRemoved')
    // Every step's resolved config.
    const config = section(html, 'config')
    for (const s of record.steps) expect(config).toContain(s.nameHash)
    expect(config).toMatch(/corpus<\/code><\/td><td[^>]*>four-sentences/)
    expect(config).toMatch(/trainer\.batchSize<\/code><\/td><td[^>]*>4</)
    expect(config).toMatch(/lr<\/code><\/td><td[^>]*>0\.003/)
    // The first rows of each dataset, long text shortened.
    const rows = section(html, 'datasets')
    expect(rows).toContain('the cat sat on the mat')
    expect(rows).toContain('a bird flew over the house')
    expect(rows).toContain('a long story begins here and goes on')
    expect(rows).not.toContain('until the very end')
    expect(rows).toMatch(/…/)
    // Samples: prompt, completion, expected, scores.
    const samples = section(html, 'samples')
    expect(samples).toMatch(/the dog sat[\s\S]*on the[\s\S]*exact_match[\s\S]*0/)
    // Logs as time, level and message, the raw JSON on request.
    const logs = section(html, 'logs')
    expect(logs).toMatch(
      /<td[^>]*>\d{2}:\d{2}:\d{2}\.\d{3}<\/td><td[^>]*>(<span[^>]*>)?info(<\/span>)?<\/td><td[^>]*>ingested/,
    )
    expect(logs).toMatch(/<details[^>]*><summary>raw JSON<\/summary><pre>\{&quot;level&quot;:30/)
    // Provenance: a table without an empty header row, with the backend and kernels levanter used.
    const prov = section(html, 'provenance')
    expect(prov).not.toMatch(/<th>\s*<\/th>/)
    expect(prov).toMatch(/backend<\/th><td>wasm/)
    expect(prov).toMatch(/kernels<\/th><td>[^<]*native \(C\+\+, AVX-512, 2 threads\)/)
    expect(prov).toMatch(/adapter<\/th><td>/)
    // Every row of the eval table has as many cells as its header (byte_perplexity included).
    const evals = section(html, 'evals')
    const header = (evals.match(/<th>/g) ?? []).length
    for (const row of evals.split('<tr>').slice(2)) expect((row.match(/<td/g) ?? []).length).toBe(header)
    expect(evals).toContain('byte_perplexity')
    // Links: relative, and to files the site holds.
    for (const u of linksOf(html)) {
      expect(isRelative(u), u).toBe(true)
      if (!u.startsWith('#')) expect(site.has(join(page, u.split('#')[0]!)), u).toBe(true)
    }
    const md = site.get(`${page}/report.md`)!
    expect(md).toContain('![Loss \\(train and eval\\)](charts/loss.svg)')
    expect(md).toContain('| cloze&lt;brown&gt; | accuracy | 0.2500 |  | eval |')
    expect(md).toContain('| next-word | exact\\_match | 0.5000 | 0.1000 | eval |')
    expect(md).not.toMatch(/\]\((file:|\/)/)
    expect(site.get(`${page}/charts/loss.svg`)).toMatch(/^<svg[^>]*width="\d+"[\s\S]*<path/)
    expect(site.get(`${page}/charts/loss-tokens.svg`)).toContain('tokens')
  })

  it('names the problem when the source is not a run', async () => {
    await expect(buildReport('no-such-experiment', prefix)).rejects.toSatisfy(
      (e) =>
        isMarinError(e, 'EXPERIMENT_NOT_FOUND') &&
        /no experiment "no-such-experiment".*tiny-report/.test((e as Error).message),
    )
    const bad = join(dir, 'bad.json')
    writeFileSync(bad, '{"hello": 1}')
    await expect(buildReport(bad, prefix)).rejects.toSatisfy(
      (e) => isMarinError(e, 'REPORT_SOURCE_INVALID') && (e as Error).message.includes('bad.json'),
    )
    await expect(buildReport('a/b/c', prefix)).rejects.toSatisfy((e) => isMarinError(e, 'BAD_USAGE'))
  })

  it('accepts the prefix, the experiment folder and the record file as source', async () => {
    const recordFile = join(prefix, 'experiments', 'tiny-report', `${record.run}.json`)
    for (const source of [
      prefix,
      join(prefix, 'experiments', 'tiny-report'),
      recordFile,
      pathToFileURL(prefix).href,
      pathToFileURL(recordFile).href,
    ]) {
      expect((await buildReport(source, '/nonexistent')).data.record.run).toBe(record.run)
    }
    expect((await buildReport(`tiny-report/${record.run}`, prefix)).data.record.run).toBe(record.run)
  })
})

describe('dataset rows', () => {
  it('shows the first rows of a Parquet dataset that ingestStep committed, text shortened', async () => {
    const own = join(dir, 'parquet-prefix')
    const src = join(dir, 'paragraphs.txt')
    const long = `The harbor ferry ${'crosses the river again and '.repeat(20)}ends here.`
    writeFileSync(src, ['First paragraph about the bridge.', 'Second one on the mill.', long].join('\n\n'))
    const ingest = ingestStep({ name: 'paragraphs', source: src, format: 'text', textUnit: 'paragraph' })
    const run = await new Executor({ prefix: own, leaseTtlMs: 2000 }).run(
      new Experiment({ name: 'parquet-rows', steps: [ingest] }),
    )
    expect(run.status).toBe('SUCCESS')
    const { data, site } = await buildReport('parquet-rows', own)
    const rows = data.artifacts.find((a) => a.artifact === 'datasets/paragraphs')!.rows!
    expect(rows.file).toMatch(/^part-\d+-of-\d+\.parquet$/)
    expect(rows.columns.slice(0, 2)).toEqual(['id', 'text'])
    const texts = rows.rows.map((r) => r[1])
    expect(texts).toContain('First paragraph about the bridge.')
    const cut = texts.find((t) => t!.startsWith('The harbor ferry'))!
    expect(cut.length).toBeLessThanOrEqual(160)
    expect(cut.endsWith('…')).toBe(true)
    expect(section(site.get(`${runFolder(run)}/index.html`)!, 'datasets')).toContain('Second one on the mill.')
  }, 120_000)
})

describe('a second run', () => {
  it('shows every step SKIPPED, linked to the run that made it; the site keeps both runs', async () => {
    const target = join(dir, 'site-two-runs')
    const first = await buildReport(`tiny-report/${record.run}`, prefix)
    await publishSite(first.site, target)
    const firstPage = new Map(
      readdirSync(join(target, page), { recursive: true, withFileTypes: true })
        .filter((e) => e.isFile())
        .map((e) => {
          const f = join(e.parentPath, e.name)
          return [f, readFileSync(f, 'utf8')] as const
        }),
    )
    expect(firstPage.size).toBeGreaterThan(5)

    const again = await new Executor({ prefix, leaseTtlMs: 2000 }).run(reportFixture(prefix))
    try {
      expect(again.run).not.toBe(record.run)
      const { data, site } = await buildReport('tiny-report', prefix)
      expect(data.record.run).toBe(again.run)
      expect(data.steps.map((s) => s.status)).toEqual(['SKIPPED', 'SKIPPED', 'SKIPPED', 'SKIPPED'])
      expect(data.steps.map((s) => s.diskStatus)).toEqual(['SUCCESS', 'SUCCESS', 'SUCCESS', 'SUCCESS'])
      // Each skipped step names the run whose output it reused.
      expect(data.steps.map((s) => s.madeBy)).toEqual(Array(4).fill({ experiment: 'tiny-report', run: record.run }))
      expect(data.artifacts.map((a) => a.ref)).toEqual([
        'datasets/raw@1',
        'datasets/dedup@1',
        'checkpoints/tiny@1',
        'eval/tiny@1',
      ])
      expect(data.metrics.length).toBeGreaterThan(0)
      const second = runFolder(again)
      expect(site.get(`${second}/step-graph.svg`)!.match(/data-status="SKIPPED"/g)).toHaveLength(4)

      const res = await publishSite(site, target)
      expect(res.deleted).toEqual([])
      // The first run's page is intact, file for file.
      for (const [f, body] of firstPage) expect(readFileSync(f, 'utf8'), f).toBe(body)
      // The index lists both runs, newest first, each linking to its page.
      const index = readFileSync(join(target, 'index.html'), 'utf8')
      const links = linksOf(index).filter((u) => u.endsWith('/index.html'))
      expect(links.slice(0, 2)).toEqual([`${second}/index.html`, `${page}/index.html`])
      for (const u of linksOf(index)) expect(isRelative(u), u).toBe(true)
      expect(index).toMatch(/all 4 steps already done/)
      const runs = JSON.parse(readFileSync(join(target, RUNS_FILE), 'utf8')) as { run: string }[]
      expect(runs.map((r) => r.run)).toEqual([again.run, record.run])
      // The all-skipped run links to the run that made its steps, and that page exists.
      const secondHtml = readFileSync(join(target, second, 'index.html'), 'utf8')
      const back = `../${record.run}/index.html`
      expect(secondHtml).toContain(`href="${back}"`)
      expect(existsSync(join(target, second, back))).toBe(true)
    } finally {
      rmSync(join(prefix, 'experiments', 'tiny-report', `${again.run}.json`))
    }
  })
})

describe('a failed run', () => {
  it('shows the failure, its dependents and the metrics logged before it', async () => {
    const failed = await new Executor({ prefix, leaseTtlMs: 2000 }).run(reportFixture(prefix, 'tiny-fail', 12, 7))
    expect(failed.status).toBe('FAILED')
    const { data, site } = await buildReport('tiny-fail', prefix)
    expect(data.steps.map((s) => s.status)).toEqual(['SKIPPED', 'SKIPPED', 'FAILED', 'DEP_FAILED'])
    expect(data.metrics.filter((m) => m.values['train/loss'] !== undefined)).toHaveLength(7)
    const at = runFolder(failed)
    const html = site.get(`${at}/index.html`)!
    expect(html).toContain('loss diverged at step 7')
    expect(site.get(`${at}/step-graph.svg`)).toContain('data-status="FAILED"')
    expect(site.has(`${at}/charts/loss.svg`)).toBe(true)
  })
})

describe('publishSite', () => {
  it('writes a folder and re-uploads only what changed', async () => {
    const target = join(dir, 'site-dir')
    const { site } = await buildReport('tiny-report', prefix)
    const first = await publishSite(site, target)
    expect(first.uploaded.length).toBe(site.size)
    for (const [p, body] of site) expect(readFileSync(join(target, p), 'utf8')).toBe(body)
    expect(JSON.parse(readFileSync(join(target, MANIFEST_FILE), 'utf8')).files['index.html']).toMatch(/^[0-9a-f]{64}$/)

    const again = await publishSite(site, target)
    expect(again.uploaded).toEqual([])
    expect(again.unchanged.length).toBe(site.size)

    // Publishing the run again replaces its own files: changed ones are sent, dropped ones deleted.
    const changed = new Map(site)
    changed.set(`${page}/report.md`, `${site.get(`${page}/report.md`)}\nedited\n`)
    changed.delete(`${page}/charts/eval-bpb.svg`)
    rmSync(join(target, page, 'charts/lr.svg'))
    const third = await publishSite(changed, target)
    expect([...third.uploaded].sort()).toEqual([`${page}/charts/lr.svg`, `${page}/report.md`])
    expect(third.deleted).toEqual([`${page}/charts/eval-bpb.svg`])
    expect(existsSync(join(target, page, 'charts/eval-bpb.svg'))).toBe(false)
  })

  it('merges into a target: another run or a site without a run never deletes what is there', async () => {
    const target = join(dir, 'site-merge')
    const { site } = await buildReport('tiny-report', prefix)
    await publishSite(site, target)
    writeFileSync(join(target, 'README.txt'), 'kept')
    const other = await new Executor({ prefix, leaseTtlMs: 2000 }).run(chainFixture(3, 'other-experiment'))
    const built = await buildReport('other-experiment', prefix)
    const res = await publishSite(built.site, target)
    expect(res.deleted).toEqual([])
    for (const [p, body] of site) if (p.startsWith(`${page}/`)) expect(readFileSync(join(target, p), 'utf8')).toBe(body)
    expect(readFileSync(join(target, 'README.txt'), 'utf8')).toBe('kept')
    const index = readFileSync(join(target, 'index.html'), 'utf8')
    expect(index).toContain(`${page}/index.html`)
    expect(index).toContain(`${runFolder(other)}/index.html`)
    // A bare site (no run in it) adds its files and removes nothing either.
    const bare = await publishSite(new Map([['notes.txt', 'hello']]), target)
    expect(bare.deleted).toEqual([])
    expect(existsSync(join(target, page, 'index.html'))).toBe(true)
  })

  it('PUTs to an http server and sends only changed files the second time', async () => {
    const stored = new Map<string, string>()
    const methods: string[] = []
    const server: Server = createServer((req, res) => {
      const path = decodeURIComponent(new URL(req.url!, 'http://x').pathname).replace(/^\/reports\//, '')
      methods.push(`${req.method} ${path}`)
      const chunks: Buffer[] = []
      req.on('data', (c: Buffer) => chunks.push(c))
      req.on('end', () => {
        if (req.method === 'PUT') {
          stored.set(path, Buffer.concat(chunks).toString('utf8'))
          res.writeHead(201).end()
        } else if (req.method === 'GET') {
          const body = stored.get(path)
          if (body === undefined) res.writeHead(404).end()
          else res.writeHead(200).end(body)
        } else if (req.method === 'DELETE') {
          res.writeHead(stored.delete(path) ? 204 : 404).end()
        } else res.writeHead(405).end()
      })
    })
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/reports/`
      const { site } = await buildReport('tiny-report', prefix)
      const first = await publishSite(site, url)
      expect(first.uploaded.length).toBe(site.size)
      for (const [p, body] of site) expect(stored.get(p)).toBe(body)
      methods.length = 0
      const again = await publishSite(site, url)
      expect(again.uploaded).toEqual([])
      expect(methods).toEqual([`GET ${MANIFEST_FILE}`, `GET ${RUNS_FILE}`, `PUT ${MANIFEST_FILE}`])
    } finally {
      await new Promise<void>((r) => server.close(() => r()))
    }
  })

  it('fails with PUBLISH_FAILED when the server refuses', async () => {
    const server = createServer((req, res) => res.writeHead(req.method === 'GET' ? 404 : 403).end())
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`
      await expect(publishSite(new Map([['index.html', 'x']]), url)).rejects.toSatisfy(
        (e) => isMarinError(e, 'PUBLISH_FAILED') && /PUT .*index\.html failed \(HTTP 403\)/.test((e as Error).message),
      )
    } finally {
      await new Promise<void>((r) => server.close(() => r()))
    }
  })
})

describe('marin publish-report', () => {
  const cli = async (argv: string[], env: NodeJS.ProcessEnv) => {
    const out: string[] = []
    const err: string[] = []
    const code = await runCli(argv, { out: (l) => out.push(l), err: (l) => err.push(l), env })
    return { code, out, err }
  }

  it('publishes a run by name and exits 2 on bad usage', async () => {
    const target = join(dir, 'site-cli')
    const ok = await cli(['publish-report', '--source', 'tiny-report', '--target', target], { MARIN_PREFIX: prefix })
    expect(ok.err).toEqual([])
    expect(ok.code).toBe(0)
    expect(ok.out[0]).toMatch(/report of tiny-report run .*: \d+ files uploaded, 0 unchanged, 0 deleted/)
    expect(existsSync(join(target, 'index.html'))).toBe(true)
    expect(ok.out).toContain(`run page: ${join(target, page, 'index.html')}`)
    // A second publish into the same target merges: both runs stay.
    const more = await cli(['publish-report', '--source', 'tiny-fail', '--target', target], { MARIN_PREFIX: prefix })
    expect(more.code).toBe(0)
    expect(more.out[0]).toMatch(/, 0 deleted/)
    expect(existsSync(join(target, page, 'index.html'))).toBe(true)
    const index = readFileSync(join(target, 'index.html'), 'utf8')
    expect(index).toContain('tiny-fail')
    expect(index).toContain(`${page}/index.html`)
    const missing = await cli(['publish-report', '--source', 'nope', '--target', target], { MARIN_PREFIX: prefix })
    expect(missing.code).toBe(2)
    expect(missing.err.join('\n')).toMatch(/no experiment "nope"/)
    expect((await cli(['publish-report', '--target', target], { MARIN_PREFIX: prefix })).code).toBe(2)
  })
})

describe('the published site in headless Chromium at 1280 px', () => {
  it('shows every step, config, samples and dataset rows, no overflow, links relative, nothing fetched', async () => {
    const target = join(dir, 'site-browser')
    await publishSite((await buildReport(`tiny-report/${record.run}`, prefix)).site, target)
    // A second run of the experiment with a different training length (a loss curve of its own) and a 20-step chain.
    const shorter = await new Executor({ prefix, leaseTtlMs: 2000 }).run(reportFixture(prefix, 'tiny-report', 12))
    const chain = await new Executor({ prefix, leaseTtlMs: 2000 }).run(chainFixture(20))
    try {
      expect([shorter.status, chain.status]).toEqual(['SUCCESS', 'SUCCESS'])
      await publishSite((await buildReport(`tiny-report/${shorter.run}`, prefix)).site, target)
      await publishSite((await buildReport('long-chain', prefix)).site, target)
    } finally {
      rmSync(join(prefix, 'experiments', 'tiny-report', `${shorter.run}.json`))
    }
    const executablePath = await packagedChromium.executablePath()
    const browser = await chromium.launch({ executablePath, args: [...new Set(CHROMIUM_ARGS)] })
    try {
      const tab = await browser.newPage({ viewport: { width: 1280, height: 900 } })
      const requests: string[] = []
      await tab.route('**/*', (route) => {
        const url = route.request().url()
        requests.push(url)
        return url.startsWith('file://') ? route.continue() : route.abort()
      })
      const open = (rel: string) => tab.goto(pathToFileURL(join(target, rel)).href, { waitUntil: 'load' })
      /** Layout facts of the open page: overflow, the graph's step boxes, its links. */
      const layout = () =>
        tab.$eval('html', (root) => {
          const document = root.ownerDocument
          const window = document.defaultView!
          const graph = document.querySelector('svg.step-graph')
          const box = graph?.parentElement?.getBoundingClientRect()
          return {
            viewport: window.innerWidth,
            scrollWidth: document.documentElement.scrollWidth,
            graphBox: box ? { left: box.left, right: box.right } : undefined,
            graphScrolls: graph ? graph.parentElement!.scrollWidth > graph.parentElement!.clientWidth : false,
            steps: [...document.querySelectorAll('svg.step-graph g.step rect')].map((r) => {
              const b = r.getBoundingClientRect()
              return { left: b.left, right: b.right, top: b.top, width: b.width, height: b.height }
            }),
            edges: document.querySelectorAll('svg.step-graph path.edge').length,
            links: [...document.querySelectorAll('[href],[src]')].map(
              (e) => e.getAttribute('href') ?? e.getAttribute('src') ?? '',
            ),
          }
        })
      const checkFits = (l: Awaited<ReturnType<typeof layout>>, steps: number) => {
        expect(l.scrollWidth).toBeLessThanOrEqual(l.viewport)
        expect(l.graphScrolls).toBe(false)
        expect(l.steps).toHaveLength(steps)
        for (const b of l.steps) {
          expect(b.left).toBeGreaterThanOrEqual(l.graphBox!.left)
          expect(b.right).toBeLessThanOrEqual(l.graphBox!.right)
          // Not shrunk to fit: the labels stay readable.
          expect(b.width).toBeGreaterThanOrEqual(150)
          expect(b.height).toBeGreaterThan(30)
        }
        for (const u of l.links) expect(isRelative(u), u).toBe(true)
      }

      await open(`${page}/index.html`)
      const run = await layout()
      checkFits(run, 4)
      expect(run.edges).toBe(3)
      for (const text of ['four-sentences', 'a bird flew over the house', 'the dog sat', 'ingested'])
        expect(await tab.getByText(text).first().isVisible(), text).toBe(true)
      // Raw log JSON only on request.
      const raw = tab.locator('#logs ~ details').first()
      expect(await raw.locator('pre').isVisible()).toBe(false)
      await raw.locator('summary').click()
      expect(await raw.locator('pre').isVisible()).toBe(true)
      // Charts: by step at first; the x-axis choice switches every chart to tokens, then time.
      const visibleCharts = () =>
        tab.$$eval('figure.chart', (fs) =>
          fs
            .filter((f) => f.getBoundingClientRect().width > 100)
            .map((f) => [f.getAttribute('data-x'), f.querySelectorAll('.mark-line path').length > 0]),
        )
      expect(await visibleCharts()).toEqual(Array(4).fill(['step', true]))
      await tab.locator('fieldset.xaxis input[value="tokens"]').check()
      expect(await visibleCharts()).toEqual(Array(4).fill(['tokens', true]))
      await tab.locator('fieldset.xaxis input[value="time"]').check()
      expect(await visibleCharts()).toEqual(Array(4).fill(['time', true]))

      await open('runs/long-chain/' + chain.run + '/index.html')
      const long = await layout()
      checkFits(long, 20)
      expect(long.edges).toBe(19)

      // The index: every run, and the loss curves of the runs chosen.
      await open('index.html')
      const index = await layout()
      expect(index.scrollWidth).toBeLessThanOrEqual(index.viewport)
      for (const u of index.links) expect(isRelative(u), u).toBe(true)
      const curves = () =>
        tab.$$eval('svg.overlay path.run-curve', (ps) =>
          ps.map((p) => [p.getAttribute('data-run'), p.getBoundingClientRect().width > 0]),
        )
      expect(await curves()).toEqual([
        [shorter.run, true],
        [record.run, true],
      ])
      await tab.locator(`input[data-run="${shorter.run}"]`).uncheck()
      expect(await curves()).toEqual([
        [shorter.run, false],
        [record.run, true],
      ])
      expect(requests.length).toBeGreaterThan(0)
      expect(requests.filter((u) => !u.startsWith('file://'))).toEqual([])
      const shot = join(dir, 'index.png')
      await open(`${page}/index.html`)
      await tab.screenshot({ path: shot, fullPage: true })
      expect(readFileSync(shot).subarray(1, 4).toString()).toBe('PNG')
      if (process.env.MARIN_REPORT_SCREENSHOT) copyFileSync(shot, process.env.MARIN_REPORT_SCREENSHOT)
    } finally {
      await browser.close()
    }
  }, 240_000)
})

describe('logs', () => {
  it('keeps the end of a long log, cut at a line start', async () => {
    const train = record.steps.find((s) => s.name === 'train')!
    const lines = Array.from({ length: 4000 }, (_, i) => `line ${i} ${'x'.repeat(40)}`)
    writeFileSync(join(prefix, train.nameHash, 'logs', 'big.log'), `${lines.join('\n')}\n`)
    const { data, site } = await buildReport(`tiny-report/${record.run}`, prefix)
    const log = data.steps.find((s) => s.name === 'train')!.logs.find((l) => l.path === 'logs/big.log')!
    expect(log.bytes).toBeGreaterThan(LOG_TAIL_BYTES)
    expect(log.tail.length).toBeLessThanOrEqual(LOG_TAIL_BYTES)
    expect(log.tail).toMatch(/^line \d+ x+\n/)
    expect(log.tail.endsWith(`${lines.at(-1)}\n`)).toBe(true)
    expect(site.get(`${page}/logs/${train.nameHash}/big.log`)).toBe(log.tail)
  })
})
