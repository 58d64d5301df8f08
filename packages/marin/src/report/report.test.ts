import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import packagedChromium from '@sparticuz/chromium'
import { chromium } from 'playwright-core'
import { Executor, type ExperimentRecord } from '../executor/executor.js'
import { runCli } from '../cli/program.js'
import { isMarinError } from '../errors.js'
import { buildReport } from './build.js'
import { LOG_TAIL_BYTES } from './collect.js'
import { MANIFEST_FILE, publishSite } from './publish.js'
import { reportFixture } from './test-fixture-experiment.js'

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

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'marin-report-'))
  prefix = join(dir, 'prefix')
  record = await new Executor({ prefix, leaseTtlMs: 2000 }).run(reportFixture(prefix))
  expect(record.status).toBe('SUCCESS')
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
    expect(data.artifacts[1]!.metadata).toMatchObject({ documentsIn: 4, documentsOut: 3, duplicatesRemoved: 1 })
    // Links to artifacts and step outputs point at what exists under the prefix.
    for (const u of [...data.artifacts.map((a) => a.url), ...data.steps.map((s) => s.outputUrl)])
      expect(existsSync(fileURLToPath(u)), u).toBe(true)
    expect(data.metrics.filter((m) => m.values['train/loss'] !== undefined)).toHaveLength(20)
    expect(data.evals).toContainEqual({ source: 'eval', task: 'cloze<brown>', metric: 'accuracy', value: 0.25 })
    expect(data.evals).toContainEqual({
      source: 'eval',
      task: 'next-word',
      metric: 'exact_match',
      value: 0.5,
      stderr: 0.1,
    })
    expect(data.samples[0]).toEqual({ source: 'eval', prompt: 'the cat', completion: ' sat on the <mat>' })
    // Generation records of the eval artifact, at most SAMPLES_PER_TASK of them.
    expect(data.samples.slice(1)).toHaveLength(5)
    expect(data.samples[1]).toEqual({
      source: 'eval: next-word',
      prompt: 'the dog sat',
      completion: ' on the',
      expected: 'on',
    })
    expect(data.warnings).toEqual([])
    expect([...site.keys()].sort()).toEqual(
      expect.arrayContaining([
        'index.html',
        'report.md',
        'step-graph.svg',
        'charts/loss.svg',
        'charts/lr.svg',
        'charts/tokens-per-sec.svg',
        'charts/eval-bpb.svg',
        'data.json',
      ]),
    )
    const html = site.get('index.html')!
    // Self-contained: no script, stylesheet link, external image or font.
    expect(html).not.toMatch(/<script|<link|<img|@import|url\(http|src="http/i)
    expect(html).toContain('cloze&lt;brown&gt;')
    expect(html).toContain(record.steps[0]!.nameHash)
    expect(html).toContain('duplicatesRemoved')
    const md = site.get('report.md')!
    expect(md).toContain('![Loss (train and eval)](charts/loss.svg)')
    expect(md).toContain('| cloze<brown> | accuracy | 0.2500 |  | eval |')
    expect(md).toContain('| next-word | exact_match | 0.5000 | 0.1000 | eval |')
    expect(site.get('charts/loss.svg')).toMatch(/^<svg[^>]*width="\d+"[\s\S]*<path/)
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

describe('a second run', () => {
  it('shows every step SKIPPED with the artifacts and metrics of the first run', async () => {
    const again = await new Executor({ prefix, leaseTtlMs: 2000 }).run(reportFixture(prefix))
    try {
      expect(again.run).not.toBe(record.run)
      const { data, site } = await buildReport('tiny-report', prefix)
      expect(data.record.run).toBe(again.run)
      expect(data.steps.map((s) => s.status)).toEqual(['SKIPPED', 'SKIPPED', 'SKIPPED', 'SKIPPED'])
      expect(data.steps.map((s) => s.diskStatus)).toEqual(['SUCCESS', 'SUCCESS', 'SUCCESS', 'SUCCESS'])
      expect(data.artifacts.map((a) => a.ref)).toEqual([
        'datasets/raw@1',
        'datasets/dedup@1',
        'checkpoints/tiny@1',
        'eval/tiny@1',
      ])
      expect(data.metrics.length).toBeGreaterThan(0)
      expect(site.get('step-graph.svg')!.match(/data-status="SKIPPED"/g)).toHaveLength(4)
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
    const html = site.get('index.html')!
    expect(html).toContain('loss diverged at step 7')
    expect(site.get('step-graph.svg')).toContain('data-status="FAILED"')
    expect(site.has('charts/loss.svg')).toBe(true)
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

    const changed = new Map(site)
    changed.set('report.md', `${site.get('report.md')}\nedited\n`)
    changed.delete('charts/eval-bpb.svg')
    rmSync(join(target, 'charts/lr.svg'))
    const third = await publishSite(changed, target)
    expect([...third.uploaded].sort()).toEqual(['charts/lr.svg', 'report.md'])
    expect(third.deleted).toEqual(['charts/eval-bpb.svg'])
    expect(existsSync(join(target, 'charts/eval-bpb.svg'))).toBe(false)
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
      expect(methods).toEqual([`GET ${MANIFEST_FILE}`, `PUT ${MANIFEST_FILE}`])
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
    const missing = await cli(['publish-report', '--source', 'nope', '--target', target], { MARIN_PREFIX: prefix })
    expect(missing.code).toBe(2)
    expect(missing.err.join('\n')).toMatch(/no experiment "nope"/)
    expect((await cli(['publish-report', '--target', target], { MARIN_PREFIX: prefix })).code).toBe(2)
  })
})

describe('the published page in headless Chromium', () => {
  it('renders the graph and charts from file:// with no other request', async () => {
    const target = join(dir, 'site-browser')
    const { site } = await buildReport('tiny-report', prefix)
    await publishSite(site, target)
    const executablePath = await packagedChromium.executablePath()
    const browser = await chromium.launch({ executablePath, args: [...new Set(CHROMIUM_ARGS)] })
    try {
      const page = await browser.newPage({ viewport: { width: 1200, height: 900 } })
      const requests: string[] = []
      await page.route('**/*', (route) => {
        const url = route.request().url()
        requests.push(url)
        return url.startsWith('file://') ? route.continue() : route.abort()
      })
      await page.goto(pathToFileURL(join(target, 'index.html')).href, { waitUntil: 'load' })
      const charts = await page.$$eval('figure.chart > svg', (svgs) =>
        svgs.map((s) => {
          const r = s.getBoundingClientRect()
          const paths = [...s.querySelectorAll('path')].filter((p) => (p.getAttribute('d') ?? '').length > 10)
          return { w: r.width, h: r.height, paths: paths.length, lines: s.querySelectorAll('.mark-line path').length }
        }),
      )
      expect(charts.length).toBe(4)
      for (const c of charts) {
        expect(c.w).toBeGreaterThan(100)
        expect(c.h).toBeGreaterThan(100)
        expect(c.paths).toBeGreaterThan(0)
        expect(c.lines).toBeGreaterThan(0)
      }
      const graph = await page.$eval('svg.step-graph', (s) => ({
        w: s.getBoundingClientRect().width,
        steps: s.querySelectorAll('g.step').length,
        edges: s.querySelectorAll('path.edge').length,
      }))
      expect(graph).toMatchObject({ steps: 4, edges: 3 })
      expect(graph.w).toBeGreaterThan(0)
      expect(requests.length).toBeGreaterThan(0)
      expect(requests.filter((u) => !u.startsWith('file://'))).toEqual([])
      const shot = join(dir, 'index.png')
      await page.screenshot({ path: shot, fullPage: true })
      expect(readFileSync(shot).subarray(1, 4).toString()).toBe('PNG')
      if (process.env.MARIN_REPORT_SCREENSHOT) copyFileSync(shot, process.env.MARIN_REPORT_SCREENSHOT)
    } finally {
      await browser.close()
    }
  }, 120_000)
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
    expect(site.get(`logs/${train.nameHash}/big.log`)).toBe(log.tail)
  })
})
