/**
 * @module The docs site (`pnpm run docs`): built once, its links checked, then opened in headless Chromium,
 * the build that `@sparticuz/chromium` ships driven by playwright-core (as marin's report test does; nothing is
 * downloaded): every package page opens, and one link from each of them lands on a page of the site.
 */
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { deflateSync } from 'node:zlib'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { readDocsSite } from '../packages/marin/src/report/docs-site.js'
import { type BrokenLink, buildDocs, checkSiteLinks, entryPoints } from './build-docs.js'

const root = resolve(import.meta.dirname, '..')
const dir = mkdtempSync(join(tmpdir(), 'docs-site-'))
// DOCS_SITE=DIR reuses a site that `tsx scripts/build-docs.ts --out DIR` built (quick reruns); else it is built here.
const site = process.env.DOCS_SITE ? resolve(process.env.DOCS_SITE) : join(dir, 'site')
let pages: number
let broken: BrokenLink[]
afterAll(() => rmSync(dir, { recursive: true, force: true }))
beforeAll(async () => {
  // The build checks every link of the site it made (once: the check reads all ~1,100 pages); a given site is
  // checked here.
  ;({ pages, broken } = process.env.DOCS_SITE
    ? {
        pages: readdirSync(site, { recursive: true }).filter((f) => String(f).endsWith('.html')).length,
        broken: checkSiteLinks(site),
      }
    : await buildDocs(site))
}, 400_000)

// The browser packages are marin's dev dependencies (its report test uses them), not the root's: load them from there.
type Page = {
  goto(url: string, o: { waitUntil: 'load' }): Promise<unknown>
  on(event: 'request', fn: (request: { url(): string }) => void): void
  addInitScript(script: { content: string }): Promise<unknown>
  $$eval<R>(selector: string, fn: (els: { getAttribute(name: string): string | null }[]) => R): Promise<R>
  click(selector: string): Promise<void>
  fill(selector: string, text: string): Promise<void>
  waitForSelector(selector: string, o?: { state: 'attached' }): Promise<unknown>
  waitForURL(test: (url: URL) => boolean): Promise<void>
  url(): string
  title(): Promise<string>
  locator(selector: string): { count(): Promise<number> }
}
type Browser = { newPage(): Promise<Page>; close(): Promise<void> }
const fromMarin = createRequire(join(root, 'packages/marin/package.json'))
const load = async (name: string) => import(pathToFileURL(fromMarin.resolve(name)).href)

describe('the docs site', () => {
  test('has a page for every package entry point and every guide, and no broken link', () => {
    expect(pages).toBeGreaterThan(100)
    expect(broken).toEqual([])
  })

  test('is a folder a report site can carry (marin publish-report --docs): UTF-8 files, within the limits', () => {
    const files = readDocsSite(site)
    expect(files.has('docs/index.html')).toBe(true)
    expect(files.size).toBeGreaterThan(100)
  })

  test('a broken link, a missing anchor and an absolute path are each named with their page', () => {
    const fake = join(dir, 'fake')
    mkdirSync(join(fake, 'a'), { recursive: true })
    writeFileSync(join(fake, 'b.html'), '<h1 id="top">b</h1>')
    writeFileSync(
      join(fake, 'a', 'index.html'),
      '<a href="../b.html#top">ok</a><a href="https://example.org/x">ok</a><a href="../c.html">no</a>' +
        '<a href="../b.html#nowhere">no</a><img src="/etc/x.png">',
    )
    expect(checkSiteLinks(fake)).toEqual([
      { page: 'a/index.html', link: '../c.html', message: 'no such file c.html' },
      { page: 'a/index.html', link: '../b.html#nowhere', message: 'no id "nowhere" in b.html' },
      {
        page: 'a/index.html',
        link: '/etc/x.png',
        message: 'not a relative link: the site must work wherever it is copied',
      },
    ])
  })

  test('in Chromium: every package page opens, one link from each lands on a page, nothing is fetched', async () => {
    const { default: packagedChromium } = await load('@sparticuz/chromium')
    const { chromium } = await load('playwright-core')
    // The package's flags but its GPU ones: they draw every page through SwiftShader's GL (about a fifth of the
    // browser's CPU time); with the GPU off Chromium draws in software, and the pages, their scripts and links are
    // the same.
    const gpuFlag = /^--(use-gl|use-angle|enable-unsafe-swiftshader|in-process-gpu|ignore-gpu-blocklist)\b/
    const args = (packagedChromium.args as string[]).filter((a) => !gpuFlag.test(a))
    const browser: Browser = await chromium.launch({
      executablePath: await packagedChromium.executablePath(),
      args: [...new Set([...args, '--disable-gpu', '--no-first-run', '--disable-background-networking'])],
    })
    // Every request the pages make is seen here (none is held up on its way: a route would stop each one, ~18 a
    // load, for this process to pass on, and turn the browser's cache off).
    const fetched: string[] = []
    // The sidebar (assets/navigation.js) and the search index (assets/search.js) are one file each for the whole
    // site, and building them is most of a page load's CPU (on every load their data is inflated, the index
    // parsed and the sidebar's ~1,100 entries made). The front page runs both as built, and the sidebar is
    // checked to list every package page and the search to find a class; the package pages, and the pages their
    // links land on, run the same scripts with empty data (a script run before each page's own keeps the sidebar
    // data an empty list and the search data absent, whatever the two files set): each still opens, runs main.js,
    // shows itself.
    const emptyData =
      `Object.defineProperty(window, 'navigationData', { get: () => '${deflateSync('[]').toString('base64')}', ` +
      `set() {} }); Object.defineProperty(window, 'searchData', { get: () => undefined, set() {} })`
    try {
      const tab = await browser.newPage()
      tab.on('request', (request) => {
        if (!request.url().startsWith('file://')) fetched.push(request.url())
      })
      const modules = entryPoints(root).map((e) => e.name)
      expect(modules).toContain('@marin/marin/eval')
      const pageOf = (name: string) => `modules/${name.replace(/[@/]/g, '_')}.html`
      // The front page reaches each guide (every file of docs/guides/), its sidebar every package page, and its
      // search finds a class.
      await tab.goto(pathToFileURL(join(site, 'index.html')).href, { waitUntil: 'load' })
      const guides = await tab.$$eval('.col-content a[href]', (as) =>
        as.map((a) => a.getAttribute('href')!).filter((h) => h.includes('guides_')),
      )
      const written = readdirSync(join(import.meta.dirname, '..', 'docs', 'guides')).filter((f) => f.endsWith('.md'))
      expect(new Set(guides).size).toBe(written.length)
      await tab.waitForSelector(`#tsd-nav-container a[href$="${pageOf(modules.at(-1)!)}"]`, { state: 'attached' })
      const sidebar = await tab.$$eval('#tsd-nav-container a[href]', (as) => as.map((a) => a.getAttribute('href')!))
      for (const name of modules) expect(sidebar, name).toContain(`./${pageOf(name)}`)
      await tab.click('#tsd-search-trigger')
      await tab.fill('#tsd-search-input', 'Trainer')
      await tab.waitForSelector('#tsd-search-results a[href$="classes/_marin_levanter.Trainer.html"]')
      await tab.addInitScript({ content: emptyData })
      for (const name of modules) {
        const page = pageOf(name)
        await tab.goto(pathToFileURL(join(site, page)).href, { waitUntil: 'load' })
        expect(await tab.title(), page).toContain(name)
        // The first link of the page's own content to a page of one of its members (a class, function, type).
        const links = await tab.$$eval('.col-content a[href]', (as) =>
          as
            .map((a) => a.getAttribute('href')!)
            .filter((h) => /^\.\.\/(classes|functions|types|variables|interfaces|enums)\//.test(h)),
        )
        expect(links.length, `${page} links to nothing`).toBeGreaterThan(0)
        await tab.click(`.col-content a[href="${links[0]}"]`)
        await tab.waitForURL((u) => !u.href.endsWith(page))
        const landed = decodeURIComponent(new URL(tab.url()).pathname)
        expect(landed.startsWith(site), `${page} → ${links[0]}`).toBe(true)
        expect(await tab.locator('.col-content').count(), `${page} → ${landed}`).toBe(1)
      }
    } finally {
      await browser.close()
    }
    expect(fetched).toEqual([])
  }, 120_000)
})
