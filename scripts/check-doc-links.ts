/**
 * @module The documentation link check: docs point only at files in the repository.
 *
 * Reads every `*.md` file of the repository (outside `node_modules` and
 * dot-folders) and reports, with file and line:
 * - a relative markdown link `[text](path)` or `[text](path#anchor)` whose path
 *   is not a file or folder, resolved from the document's folder;
 * - a file the text names as a repository path (a code span that is a whole
 *   path under `packages/`, `docs/`, `experiments/`, `scripts/` or `infra/`, or
 *   a name ending in `.md`, in a code span or not) that is found neither from
 *   the document's folder nor from the repository root.
 * Links with a scheme (`https:`, `mailto:`) and paths with `*` or `<…>` are
 * left alone; so is the text of fenced code blocks.
 *
 * Usage: `tsx scripts/check-doc-links.ts [--root DIR]`; exits 1 on any broken link.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { dirname, join, relative, resolve, sep } from 'node:path'
import { fileURLToPath } from 'node:url'

export type BrokenLink = { file: string; line: number; target: string; message: string }

function* markdownFiles(dir: string): Generator<string> {
  for (const entry of readdirSync(dir)) {
    if (entry === 'node_modules' || entry.startsWith('.')) continue
    const p = join(dir, entry)
    if (statSync(p).isDirectory()) yield* markdownFiles(p)
    else if (entry.endsWith('.md')) yield p
  }
}

const LINK = /\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g
const CODE_SPAN = /`([^`]+)`/g
const PATH_SPAN = /^(?:\.{0,2}\/)?(?:(?:packages|docs|experiments|scripts|infra)\/[\w./-]*|[\w./-]*\.md)$/
const MD_WORD = /(?<![\w./-])([\w./-]*[\w-]\.md)(?![\w/-])/g

/** The repository paths a line names: code spans that are a whole path, and `*.md` names in the plain text. */
function namedPaths(text: string): string[] {
  const spans = [...text.matchAll(CODE_SPAN)].map((m) => m[1]!.trim()).filter((span) => PATH_SPAN.test(span))
  const words = [...text.replace(CODE_SPAN, '').matchAll(MD_WORD)].map((m) => m[1]!)
  return [...spans, ...words]
}

export function checkDocLinks(root: string): BrokenLink[] {
  const broken: BrokenLink[] = []
  for (const file of markdownFiles(root)) {
    const rel = relative(root, file).split(sep).join('/')
    let fenced = false
    readFileSync(file, 'utf8')
      .split('\n')
      .forEach((text, i) => {
        if (/^\s*(```|~~~)/.test(text)) fenced = !fenced
        if (fenced) return
        const line = i + 1
        const seen = new Set<string>()
        for (const m of text.matchAll(LINK)) {
          const target = m[1]!
          seen.add(target)
          if (/^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith('#')) continue
          const path = decodeURIComponent(target.split('#')[0]!)
          if (!existsSync(resolve(dirname(file), path))) {
            broken.push({ file: rel, line, target, message: `links to '${target}', which is not in the repository` })
          }
        }
        for (const target of namedPaths(text.replace(LINK, ''))) {
          if (seen.has(target) || /[*<>]/.test(target)) continue
          if (existsSync(resolve(dirname(file), target)) || existsSync(resolve(root, target))) continue
          broken.push({ file: rel, line, target, message: `names '${target}', which is not in the repository` })
        }
      })
  }
  return broken
}

function main(argv: string[]): number {
  const i = argv.indexOf('--root')
  const root = i >= 0 ? resolve(argv[i + 1] ?? '.') : resolve(dirname(fileURLToPath(import.meta.url)), '..')
  const broken = checkDocLinks(root)
  for (const b of broken) process.stderr.write(`${b.file}:${b.line}: ${b.message}\n`)
  if (broken.length) {
    process.stderr.write(`doc links: ${broken.length} broken; point them at files in the repository\n`)
    return 1
  }
  process.stdout.write('doc links: ok\n')
  return 0
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  process.exitCode = main(process.argv.slice(2))
}
