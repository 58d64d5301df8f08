/**
 * A report site that links the project's docs: `publish-report --docs DIR` puts a built docs site under
 * `docs/`, the run page and the front page link it, a later publish without it keeps the link, and a docs
 * folder that is not a built site (no index.html, a link out, a binary file, too many files) is refused
 * naming the folder and the file, before anything is published.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { runCli } from '../cli/program.js'
import { Executor } from '../executor/executor.js'
import { isMarinError } from '../errors.js'
import { buildReport } from './build.js'
import { DOCS_INDEX, readDocsSite } from './docs-site.js'
import { publishSite } from './publish.js'
import { reportFixture } from './test-fixture-experiment.js'

const dir = mkdtempSync(join(tmpdir(), 'marin-publish-docs-'))
const prefix = join(dir, 'prefix')
afterAll(() => rmSync(dir, { recursive: true, force: true }))

/** A docs folder shaped like the one `pnpm run docs` builds. */
function docsFolder(name: string, extra: Record<string, string | Buffer> = {}): string {
  const root = join(dir, name)
  const files: Record<string, string | Buffer> = {
    'index.html': '<!DOCTYPE html><h1>marin-ts</h1><a href="modules/_marin_marin.html">marin</a>',
    'modules/_marin_marin.html': '<h1>@marin/marin</h1>',
    'assets/style.css': 'body { margin: 0 }',
    ...extra,
  }
  for (const [path, body] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true })
    writeFileSync(join(root, path), body)
  }
  return root
}

/** The first `href` of `html` that contains `docs`, as the page at `page` resolves it inside `site`. */
function docsLink(site: string, page: string, html: string): string {
  const href = /href="([^"]*docs\/index\.html)"/.exec(html)?.[1]
  expect(href, `${page} links the docs`).toBeDefined()
  return resolve(dirname(join(site, page)), href!)
}

const refusal = (dir: string): string => {
  try {
    readDocsSite(dir)
  } catch (e) {
    expect(isMarinError(e) && e.code).toBe('BAD_USAGE')
    return (e as Error).message
  }
  throw new Error(`${dir} was accepted`)
}

beforeAll(async () => {
  const record = await new Executor({ prefix, leaseTtlMs: 2000 }).run(reportFixture(prefix))
  expect(record.status).toBe('SUCCESS')
}, 60_000)

describe('a report site with the docs', () => {
  test('the run page and the front page link docs/index.html, which the site holds', async () => {
    const docs = docsFolder('site-docs')
    const target = join(dir, 'site')
    const { data, site } = await buildReport('tiny-report', prefix, { docs })
    expect(site.get(DOCS_INDEX)).toContain('<h1>marin-ts</h1>')
    expect(site.get('docs/assets/style.css')).toBe('body { margin: 0 }')
    await publishSite(site, target)
    const page = `runs/${data.record.experiment}/${data.record.run}/index.html`
    const runPage = readFileSync(join(target, page), 'utf8')
    expect(docsLink(target, page, runPage)).toBe(join(target, 'docs', 'index.html'))
    const front = readFileSync(join(target, 'index.html'), 'utf8')
    expect(docsLink(target, 'index.html', front)).toBe(join(target, 'docs', 'index.html'))
    expect(existsSync(join(target, 'docs', 'modules', '_marin_marin.html'))).toBe(true)

    // Published again without the docs: they stay, and the front page still links them.
    const again = await buildReport('tiny-report', prefix)
    expect(again.site.has(DOCS_INDEX)).toBe(false)
    const res = await publishSite(again.site, target)
    expect(res.deleted.filter((p) => p.startsWith('docs/'))).toEqual([])
    expect(readFileSync(join(target, 'index.html'), 'utf8')).toContain('href="docs/index.html"')
    expect(existsSync(join(target, DOCS_INDEX))).toBe(true)
  }, 60_000)

  test('without --docs the page says how to build them, and links nothing', async () => {
    const { site } = await buildReport('tiny-report', prefix)
    const page = [...site].find(([p]) => /^runs\/[^/]+\/[^/]+\/index\.html$/.test(p))![1]
    expect(page).toContain('<code>pnpm run docs</code>')
    expect(page).not.toMatch(/href="[^"]*docs\/index\.html"/)
  }, 60_000)

  test('the CLI publishes them with --docs and refuses a folder that is not a docs site (exit 2)', async () => {
    const docs = docsFolder('cli-docs')
    const target = join(dir, 'cli-site')
    const out: string[] = []
    const err: string[] = []
    const io = { out: (l: string) => out.push(l), err: (l: string) => err.push(l), env: { MARIN_PREFIX: prefix } }
    const args = ['publish-report', '--source', 'tiny-report', '--target', target]
    expect(await runCli([...args, '--docs', docs], io)).toBe(0)
    expect(existsSync(join(target, DOCS_INDEX))).toBe(true)
    const empty = join(dir, 'empty-docs')
    mkdirSync(empty)
    const other = join(dir, 'cli-site-2')
    expect(await runCli(['publish-report', '--source', 'tiny-report', '--target', other, '--docs', empty], io)).toBe(2)
    expect(err.join('\n')).toContain(`--docs ${empty}: it has no index.html`)
    expect(existsSync(other)).toBe(false)
  }, 60_000)
})

describe('a docs folder is read as untrusted input', () => {
  test('a missing folder, a file, no index.html', () => {
    expect(refusal(join(dir, 'nowhere'))).toContain('no such folder')
    writeFileSync(join(dir, 'a-file'), 'x')
    expect(refusal(join(dir, 'a-file'))).toContain('not a folder')
    const bare = join(dir, 'bare')
    mkdirSync(join(bare, 'assets'), { recursive: true })
    writeFileSync(join(bare, 'assets', 'x.css'), '')
    expect(refusal(bare)).toContain('it has no index.html')
  })

  test('a symbolic link (to a file or a folder outside) is refused, naming it', () => {
    const outside = join(dir, 'secret.txt')
    writeFileSync(outside, 'do not publish')
    const linked = docsFolder('linked')
    symlinkSync(outside, join(linked, 'assets', 'leak.css'))
    expect(refusal(linked)).toContain('"assets/leak.css" is a symbolic link')
    const linkedDir = docsFolder('linked-dir')
    symlinkSync(dir, join(linkedDir, 'up'))
    expect(refusal(linkedDir)).toContain('"up" is a symbolic link')
  })

  test('a file that is not UTF-8 text, a name a site cannot hold, and too many files', () => {
    expect(
      refusal(docsFolder('binary', { 'assets/font.woff2': Buffer.from([0x77, 0x4f, 0xff, 0xfe, 0x00]) })),
    ).toContain('"assets/font.woff2" is not UTF-8 text')
    expect(refusal(docsFolder('percent', { 'a%2e.html': 'x' }))).toContain('"a%2e.html" is not a path a site can hold')
    const many = docsFolder('many')
    expect(() => readDocsSite(many, { files: 2, bytes: 1 << 20 })).toThrow(/more than 2 files/)
    expect(() => readDocsSite(many, { files: 100, bytes: 10 })).toThrow(/more than 10 bytes/)
    expect(readDocsSite(many).size).toBe(3)
  })
})
