/**
 * A target's manifest and `runs.json` are files others may have edited: publishing never sends a request
 * outside the target's prefix (checked against a real loopback HTTP server that records every request),
 * refuses a bad manifest entry naming it, recovers with `repair`, and lists runs despite odd `runs.json` entries.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { runCli } from '../cli/program.js'
import { isMarinError } from '../errors.js'
import { MANIFEST_FILE, publishSite } from './publish.js'
import type { RunSummary } from './site-index.js'
import { sitePathProblem } from './site-paths.js'

const dir = mkdtempSync(join(tmpdir(), 'marin-publish-paths-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const summary = (run: string): RunSummary => ({
  experiment: 'e',
  run,
  status: 'SUCCESS',
  startedAt: `2026-01-01T00:00:0${run.at(-1)}Z`,
  finishedAt: '2026-01-01T00:00:09Z',
  seconds: 1,
  steps: { total: 1, ran: 1, skipped: 0, failed: 0 },
  madeBy: [],
  headline: [['train/loss', 2.5]],
  gitSha: null,
  gitDirty: null,
  loss: [],
})
const siteOf = (run: string) =>
  new Map([
    [`runs/e/${run}/index.html`, `<p>${run}</p>`],
    [`runs/e/${run}/summary.json`, JSON.stringify(summary(run))],
  ])

const ESCAPES = [
  'runs/e/r1/../../../../other-team/index.html',
  'runs/e/r1/%2e%2e/%2e%2e/%2e%2e/other-team/index.html',
  'runs/e/r1/..%2f..%2f..%2fother-team/index.html',
  '/other-team/index.html',
  'runs\\..\\..\\other-team\\index.html',
  'runs/e/r1/\uff0e\uff0e/\uff0e\uff0e/x.html',
  'http://elsewhere.example/x.html',
]

/** A loopback server keeping PUT bodies under `/reports/`, recording every request as `METHOD /raw/url`. */
async function recordingServer(seed: Record<string, string>) {
  const stored = new Map(Object.entries(seed))
  const requests: string[] = []
  const server = createServer((req, res) => {
    requests.push(`${req.method} ${req.url}`)
    const path = decodeURIComponent(new URL(req.url!, 'http://x').pathname).replace(/^\/reports\//, '')
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      if (req.method === 'PUT') {
        stored.set(path, Buffer.concat(chunks).toString('utf8'))
        res.writeHead(201).end()
      } else if (req.method === 'GET') {
        const body = stored.get(path)
        res.writeHead(body === undefined ? 404 : 200).end(body)
      } else if (req.method === 'DELETE') res.writeHead(stored.delete(path) ? 204 : 404).end()
      else res.writeHead(405).end()
    })
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/reports/`
  return { url, stored, requests, close: () => new Promise<void>((r) => server.close(() => r())) }
}

describe('sitePathProblem', () => {
  it.each(ESCAPES)('refuses %s', (p) => expect(sitePathProblem(p)).toBeTruthy())
  it.each(['', 'a//b', 'a/', './a', 'a\u0000b', 'C:/x'])('refuses %j', (p) => expect(sitePathProblem(p)).toBeTruthy())
  it.each(['index.html', 'runs/e/2026-01-01T00-00-00-000Z-abc123/artifacts/tiny@3.json', 'runs/e/r/charts/lr.svg'])(
    'accepts %s',
    (p) => expect(sitePathProblem(p)).toBeUndefined(),
  )
})

describe('a doctored manifest at an http(s) target', () => {
  it('refuses before any PUT or DELETE, naming manifest and entries; --repair drops them, never outside', async () => {
    const manifest = { format: 1, files: Object.fromEntries(ESCAPES.map((p) => [p, 'ab'])) }
    manifest.files['runs/e/r1/old.html'] = 'cd' // a file of the run the site no longer has: deleted, inside
    const srv = await recordingServer({
      [MANIFEST_FILE]: JSON.stringify(manifest),
      'runs/e/r1/old.html': 'old',
    })
    try {
      await expect(publishSite(siteOf('r1'), srv.url)).rejects.toSatisfy(
        (e) =>
          isMarinError(e, 'PUBLISH_FAILED') &&
          (e as Error).message.includes(`${srv.url}${MANIFEST_FILE}`) &&
          (e as Error).message.includes(JSON.stringify(ESCAPES[0])) &&
          /--repair/.test((e as Error).message),
      )
      expect(srv.requests).toEqual([`GET /reports/${MANIFEST_FILE}`])

      srv.requests.length = 0
      const res = await publishSite(siteOf('r1'), srv.url, { repair: true })
      expect([...res.dropped].sort()).toEqual([...ESCAPES].sort())
      expect(res.warnings.filter((w) => w.includes('dropped'))).toHaveLength(ESCAPES.length)
      expect(res.deleted).toEqual(['runs/e/r1/old.html'])
      expect(srv.requests.length).toBeGreaterThan(3)
      expect(srv.requests.filter((r) => !/^[A-Z]+ \/reports\/[^%]/.test(r))).toEqual([])
      expect(srv.requests.filter((r) => r.startsWith('DELETE'))).toEqual(['DELETE /reports/runs/e/r1/old.html'])
      const rewritten = JSON.parse(srv.stored.get(MANIFEST_FILE)!) as { files: Record<string, string> }
      expect(Object.keys(rewritten.files).sort()).toEqual(['index.html', 'runs.json', ...siteOf('r1').keys()].sort())

      // Repaired: the next publish needs no flag.
      expect((await publishSite(siteOf('r2'), srv.url)).warnings).toEqual([])
    } finally {
      await srv.close()
    }
  })
})

describe('a doctored manifest in a folder target', () => {
  it('names the manifest and entry, leaves all as it was, and publish-report --repair recovers', async () => {
    const target = join(dir, 'folder')
    await publishSite(siteOf('r1'), target)
    const manifestPath = join(target, MANIFEST_FILE)
    const m = JSON.parse(readFileSync(manifestPath, 'utf8')) as { files: Record<string, string> }
    m.files['runs/e/r1/../../../../x.html'] = 'ab'
    writeFileSync(manifestPath, JSON.stringify(m))
    const before = readFileSync(manifestPath, 'utf8')
    for (let i = 0; i < 2; i++)
      await expect(publishSite(siteOf('r2'), target)).rejects.toThrow(
        new RegExp(
          `${manifestPath}: entry "runs/e/r1/\\.\\./\\.\\./\\.\\./\\.\\./x\\.html" \\(it has a "\\.\\." segment\\)`,
        ),
      )
    expect(readFileSync(manifestPath, 'utf8')).toBe(before)
    expect(existsSync(join(target, 'runs/e/r2'))).toBe(false)

    // The CLI flag: builds a real run's report, so only its parsing is driven here, on a run that does not exist.
    const cli = await runCli(['publish-report', '--source', 'nope', '--target', target, '--repair'], {
      out: () => {},
      err: () => {},
      env: { MARIN_PREFIX: join(dir, 'empty-prefix') },
    })
    expect(cli).toBe(2) // the source is missing; --repair itself is accepted

    const res = await publishSite(siteOf('r2'), target, { repair: true })
    expect(res.dropped).toEqual(['runs/e/r1/../../../../x.html'])
    expect(res.warnings).toEqual([
      `${manifestPath}: entry "runs/e/r1/../../../../x.html" dropped (it has a ".." segment)`,
    ])
    expect(Object.keys(JSON.parse(readFileSync(manifestPath, 'utf8')).files)).not.toContain(res.dropped[0])
    await expect(publishSite(siteOf('r3'), target)).resolves.toMatchObject({ dropped: [], warnings: [] })
    expect(readFileSync(join(target, 'index.html'), 'utf8')).toMatch(/r1[\s\S]*r2[\s\S]*r3|r3[\s\S]*r2[\s\S]*r1/)
  })

  it('refuses a site whose own paths leave the target (a record naming its experiment "..")', async () => {
    const target = join(dir, 'own-paths')
    await expect(publishSite(new Map([['runs/../../x.html', 'x']]), target)).rejects.toSatisfy(
      (e) => isMarinError(e, 'PUBLISH_FAILED') && /refusing "runs\/\.\.\/\.\.\/x\.html"/.test((e as Error).message),
    )
    expect(existsSync(join(dir, 'x.html'))).toBe(false)
  })
})

describe('odd runs.json entries', () => {
  it('are listed without the missing fields or left out, a warning naming each, publish after publish', async () => {
    const target = join(dir, 'runs-json')
    mkdirSync(target)
    const { headline: _h, loss: _l, ...noHeadline } = summary('r0')
    writeFileSync(
      join(target, 'runs.json'),
      JSON.stringify([noHeadline, { experiment: 'e', startedAt: '2025' }, 7, { ...summary('r8'), run: '../x' }]),
    )
    const first = await publishSite(siteOf('r1'), target)
    expect(first.warnings).toEqual([
      expect.stringMatching(/runs\.json entry 0 \("e\/r0"\): "headline": .*; listed without those fields/),
      expect.stringMatching(/runs\.json entry 1: "run": .*; left out of the list of runs/),
      expect.stringMatching(/runs\.json entry 2: the entry: .*; left out/),
      expect.stringMatching(/runs\.json entry 3 \("e\/\.\.\/x"\): "run": not a folder name.*; left out/),
    ])
    const listed = JSON.parse(readFileSync(join(target, 'runs.json'), 'utf8')) as RunSummary[]
    expect(listed.map((r) => r.run)).toEqual(['r1', 'r0'])
    expect(listed[1]!.headline).toEqual([])
    const index = readFileSync(join(target, 'index.html'), 'utf8')
    expect(index).toContain('runs/e/r0/index.html')
    expect(index).not.toContain('../x')
    const second = await publishSite(siteOf('r2'), target)
    expect(second.warnings).toEqual([])
    expect((JSON.parse(readFileSync(join(target, 'runs.json'), 'utf8')) as RunSummary[]).length).toBe(3)
  })
})
