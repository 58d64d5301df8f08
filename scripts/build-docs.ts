/**
 * @module The documentation site: `pnpm run docs` builds `site-docs/` offline.
 *
 * TypeDoc (its default theme, which loads nothing from the network) renders the API reference of
 * every package from the doc comments of its public entry points (each `exports` entry of a
 * package that names a file under `src/`), and the Markdown of `docs/` (the index, the guides,
 * the tutorials, the architecture) plus each package's README as project documents, into one site.
 * Then every `href` and `src` of every page is checked: each must be an `http(s):`/`mailto:` link
 * (left alone) or resolve to a file of the site, and a `#fragment` to an `id` of that page; the
 * build fails naming the page and the link.
 *
 * Usage: `tsx scripts/build-docs.ts [--out DIR]` (default `site-docs/`); exits 1 on a TypeDoc error
 * or a broken link.
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, relative, resolve, sep } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Application, Comment, Converter, ReflectionKind, type DeclarationReflection } from 'typedoc'

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..')

/** One public entry point: the package (and subpath) it documents, and its source file. */
export type EntryPoint = { name: string; file: string }

/** Every package's public entry points, from the `exports` of its package.json (source files under `src/`). */
export function entryPoints(root: string = ROOT): EntryPoint[] {
  const out: EntryPoint[] = []
  for (const dir of readdirSync(join(root, 'packages')).sort()) {
    const manifest = join(root, 'packages', dir, 'package.json')
    if (!existsSync(manifest)) continue
    const pkg = JSON.parse(readFileSync(manifest, 'utf8')) as { name: string; exports?: Record<string, unknown> }
    for (const [subpath, target] of Object.entries(pkg.exports ?? {})) {
      const file = typeof target === 'string' ? target : (target as { default?: string }).default
      if (!file?.startsWith('./src/') || !file.endsWith('.ts')) continue
      out.push({
        name: subpath === '.' ? pkg.name : `${pkg.name}${subpath.slice(1)}`,
        file: join(root, 'packages', dir, file),
      })
    }
  }
  return out
}

/** The Markdown pages of the site besides the front page: docs/ (but docs/index.md) and the packages' own docs. */
export function projectDocuments(root: string = ROOT): string[] {
  const docs: string[] = []
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir).sort()) {
      const p = join(dir, entry)
      if (statSync(p).isDirectory()) walk(p)
      else if (entry.endsWith('.md') && p !== join(root, 'docs', 'index.md')) docs.push(p)
    }
  }
  walk(join(root, 'docs'))
  for (const dir of readdirSync(join(root, 'packages')).sort())
    for (const doc of ['README.md', 'OPS.md']) {
      const p = join(root, 'packages', dir, doc)
      if (existsSync(p)) docs.push(p)
    }
  return docs
}

/** The text of a file's opening `@module NAME: text` doc comment, without the name. */
export function moduleSummary(source: string, name: string): string | undefined {
  const m = /^\/\*\*\s*@module\s+([\s\S]*?)\*\//.exec(source.trimStart())
  if (!m) return undefined
  const text = m[1]!
    .split('\n')
    .map((l) => l.replace(/^\s*\* ?/, ''))
    .join('\n')
    .trim()
  return text.startsWith(`${name}:`) ? text.slice(name.length + 1).trim() : text
}

export type BrokenLink = { page: string; link: string; message: string }

function* htmlFiles(dir: string): Generator<string> {
  for (const entry of readdirSync(dir)) {
    const p = join(dir, entry)
    if (statSync(p).isDirectory()) yield* htmlFiles(p)
    else if (entry.endsWith('.html')) yield p
  }
}

const ATTR = /\s(?:href|src)="([^"]*)"/g
const ID = /\sid="([^"]*)"/g
const decodeEntities = (s: string) =>
  s.replace(/&(amp|lt|gt|quot|#39);/g, (_, e: string) => ({ amp: '&', lt: '<', gt: '>', quot: '"', '#39': "'" })[e]!)

/**
 * The broken links of a built site: every `href`/`src` of every HTML page that is neither an
 * `http(s):`/`mailto:` link nor a path to a file of the site (a folder counts through its
 * `index.html`), or whose `#fragment` names no `id` of the page it points at.
 */
export function checkSiteLinks(folder: string): BrokenLink[] {
  const site = resolve(folder)
  // One walk of the site: every path it holds (a folder as its index.html), each page read once.
  const exists = new Set<string>()
  const folders = new Set<string>()
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, entry.name)
      exists.add(p)
      if (entry.isDirectory()) {
        folders.add(p)
        walk(p)
      }
    }
  }
  walk(site)
  const texts = new Map<string, string>()
  const textOf = (file: string) => {
    let text = texts.get(file)
    if (text === undefined) texts.set(file, (text = readFileSync(file, 'utf8')))
    return text
  }
  const ids = new Map<string, Set<string>>()
  const idsOf = (file: string) => {
    let set = ids.get(file)
    if (!set) {
      set = new Set([...textOf(file).matchAll(ID)].map((m) => decodeEntities(m[1]!)))
      ids.set(file, set)
    }
    return set
  }
  const broken: BrokenLink[] = []
  for (const file of [...exists].filter((p) => p.endsWith('.html') && !folders.has(p)).sort()) {
    const page = relative(site, file).split(sep).join('/')
    for (const m of textOf(file).matchAll(ATTR)) {
      const link = decodeEntities(m[1]!)
      if (/^(https?|mailto):/i.test(link)) continue
      if (/^[a-z][a-z0-9+.-]*:/i.test(link) || link.startsWith('/')) {
        broken.push({ page, link, message: 'not a relative link: the site must work wherever it is copied' })
        continue
      }
      const [pathAndQuery, fragment] = link.split('#', 2) as [string, string | undefined]
      const path = decodeURIComponent(pathAndQuery.split('?')[0]!)
      let target = path === '' ? file : resolve(dirname(file), path)
      if (!target.startsWith(site + sep) && target !== site) {
        broken.push({ page, link, message: 'points outside the site' })
        continue
      }
      if (folders.has(target) || target === site) target = join(target, 'index.html')
      if (!exists.has(target)) {
        broken.push({ page, link, message: `no such file ${relative(site, target)}` })
        continue
      }
      if (fragment && target.endsWith('.html') && !idsOf(target).has(decodeURIComponent(fragment)))
        broken.push({ page, link, message: `no id "${fragment}" in ${relative(site, target)}` })
    }
    // A page's text is kept only while a later page may point into it by #fragment.
    if (!ids.has(file)) texts.delete(file)
  }
  return broken
}

/** What a build made: its HTML pages, the site's broken links (none, for a good build), and each phase's seconds. */
export type DocsBuild = {
  pages: number
  broken: BrokenLink[]
  seconds: { convert: number; render: number; links: number }
}

/** Builds the site into `out` and checks its links (`checkSiteLinks`). Throws on a TypeDoc error. */
export async function buildDocs(out: string, root: string = ROOT): Promise<DocsBuild> {
  const clock = () => performance.now() / 1000
  const t0 = clock()
  let t1 = t0
  let t2 = t0
  const entries = entryPoints(root)
  // A program of just the entry points (and what they import), with the repository's compiler
  // options; tests, benches and scripts stay out, which keeps the build fast.
  const tmp = mkdtempSync(join(tmpdir(), 'build-docs-'))
  const tsconfig = join(tmp, 'tsconfig.json')
  writeFileSync(
    tsconfig,
    JSON.stringify({ extends: join(root, 'tsconfig.base.json'), files: entries.map((e) => e.file) }),
  )
  try {
    const app = await Application.bootstrapWithPlugins({
      name: 'marin-ts',
      tsconfig,
      entryPoints: entries.map((e) => e.file),
      entryPointStrategy: 'resolve',
      readme: join(root, 'docs', 'index.md'),
      projectDocuments: projectDocuments(root),
      basePath: root,
      displayBasePath: root,
      out,
      cleanOutputDir: true,
      // Type errors are `pnpm check`'s business; here they would only slow the build down.
      skipErrorChecking: true,
      excludePrivate: true,
      excludeInternal: true,
      excludeExternals: true,
      // No "Defined in" links: the site cannot know which forge (if any) holds this checkout.
      disableSources: true,
      hideGenerator: true,
      githubPages: false,
      logLevel: 'Warn',
      // Types a package uses but does not export are common and not errors; links that resolve
      // to nothing are.
      validation: { notExported: false, invalidLink: true, notDocumented: false, rewrittenLink: true },
      plugin: [],
    })
    // A code block is highlighted once, however many pages show it (an `@example` appears on its member's page
    // and wherever that member's comment is repeated): the same text in the same language is the same HTML. Text
    // that comes back as it went in (a language TypeDoc did not load, which it warns about) is not kept.
    const marked = app.renderer.markedPlugin
    const highlight = marked.getHighlighted.bind(marked)
    const highlighted = new Map<string, string>()
    marked.getHighlighted = (text, lang) => {
      const key = `${lang ?? ''}\n${text}`
      let html = highlighted.get(key)
      if (html === undefined) {
        html = highlight(text, lang)
        if (html !== text) highlighted.set(key, html)
      }
      return html
    }
    // A module is named for the package entry it documents (`@marin/marin/eval`), not for its
    // path; its summary is the text of the file's `@module` comment (which TypeDoc reads as a name).
    const byFile = new Map(entries.map((e) => [resolve(e.file), e.name]))
    const moduleFiles = new Map<DeclarationReflection, string>()
    app.converter.on(Converter.EVENT_CREATE_DECLARATION, (context, reflection: DeclarationReflection) => {
      if (!reflection.kindOf(ReflectionKind.Module)) return
      const file = context.getSymbolFromReflection(reflection)?.declarations?.[0]?.getSourceFile().fileName
      const name = file ? byFile.get(resolve(file)) : undefined
      if (!file || !name) return
      reflection.name = name
      moduleFiles.set(reflection, file)
    })
    app.converter.on(Converter.EVENT_RESOLVE_BEGIN, () => {
      for (const [reflection, file] of moduleFiles) {
        const summary = moduleSummary(readFileSync(file, 'utf8'), reflection.name)
        if (summary && !reflection.comment?.summary.some((p) => p.text.trim()))
          reflection.comment = new Comment([{ kind: 'text', text: summary }])
      }
    })
    const project = await app.convert()
    if (!project || app.logger.hasErrors()) throw new Error('build-docs: TypeDoc failed (its errors are above)')
    t1 = clock()
    await app.generateDocs(project, out)
    t2 = clock()
    if (app.logger.hasErrors()) throw new Error('build-docs: TypeDoc failed to write the site (its errors are above)')
  } finally {
    rmSync(tmp, { recursive: true, force: true })
  }
  const broken = checkSiteLinks(resolve(out))
  const pages = [...htmlFiles(resolve(out))].length
  const round = (s: number) => Math.round(s * 10) / 10
  return { pages, broken, seconds: { convert: round(t1 - t0), render: round(t2 - t1), links: round(clock() - t2) } }
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const at = process.argv.indexOf('--out')
  const out = resolve(at > 0 ? process.argv[at + 1]! : join(ROOT, 'site-docs'))
  try {
    const { pages, broken, seconds: s } = await buildDocs(out)
    if (broken.length > 0)
      throw new Error(
        `build-docs: ${broken.length} broken link(s) in ${out}; fix the Markdown or doc comment they come from:\n` +
          broken.map((b) => `  ${b.page}: ${b.link} (${b.message})`).join('\n'),
      )
    console.log(
      `docs: ${pages} pages in ${relative(process.cwd(), out) || '.'}, links checked ` +
        `(convert ${s.convert} s, render ${s.render} s, link check ${s.links} s)`,
    )
  } catch (err) {
    console.error((err as Error).message)
    process.exitCode = 1
  }
}
