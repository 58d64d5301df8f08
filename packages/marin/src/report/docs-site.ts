/**
 * @module The project's documentation inside a report site: `marin publish-report --docs DIR` (or an
 * experiment's `report: { target, docs }`) copies a docs site built by `pnpm run docs` under `docs/`,
 * and every run page and the front page link it. The folder is read as the untrusted input it may be:
 * no link is followed, every path must be a site path, every file must be UTF-8 text (the generated
 * site is HTML, CSS, JS and SVG), and the count and the bytes are bounded before anything is read whole.
 */
import { lstatSync, readFileSync, readdirSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { MarinError } from '../errors.js'
import { sitePathProblem } from './site-paths.js'

/** Where the docs live inside a report site, and the page a link opens. */
export const DOCS_FOLDER = 'docs'
export const DOCS_INDEX = `${DOCS_FOLDER}/index.html`

/** The most files and bytes a docs folder may hold (the built site is ~1,000 files, ~15 MB). */
export const DOCS_LIMITS = { files: 10_000, bytes: 256 * 1024 * 1024 } as const

/**
 * The files of the docs site built in `dir`, keyed `docs/<path>`. Refuses, naming the folder or file: a
 * folder without `index.html`, a symbolic link or anything that is not a file or folder, a name that is not
 * a site path, a file that is not UTF-8 text, and more than `limits` files or bytes.
 * @example readDocsSite('site-docs') // Map { 'docs/index.html' => '<!DOCTYPE html>…', … }
 */
export function readDocsSite(dir: string, limits: { files: number; bytes: number } = DOCS_LIMITS): Map<string, string> {
  const root = resolve(dir)
  const bad = (what: string) =>
    new MarinError('BAD_USAGE', `--docs ${dir}: ${what}; pass the folder \`pnpm run docs\` builds (site-docs/)`)
  let top: ReturnType<typeof lstatSync>
  try {
    top = lstatSync(root)
  } catch {
    throw bad('no such folder')
  }
  if (!top.isDirectory()) throw bad('not a folder')
  const found: string[] = []
  let bytes = 0
  const walk = (rel: string) => {
    for (const name of readdirSync(join(root, rel)).sort()) {
      const path = rel ? `${rel}/${name}` : name
      const problem = sitePathProblem(path)
      if (problem) throw bad(`"${path}" is not a path a site can hold (${problem})`)
      const st = lstatSync(join(root, path))
      if (st.isDirectory()) walk(path)
      else if (!st.isFile()) throw bad(`"${path}" is ${st.isSymbolicLink() ? 'a symbolic link' : 'not a file'}`)
      else {
        found.push(path)
        bytes += st.size
        if (found.length > limits.files) throw bad(`more than ${limits.files} files`)
        if (bytes > limits.bytes) throw bad(`more than ${limits.bytes} bytes`)
      }
    }
  }
  walk('')
  if (!found.includes('index.html')) throw bad('it has no index.html')
  const out = new Map<string, string>()
  const utf8 = new TextDecoder('utf-8', { fatal: true })
  for (const path of found) {
    let text: string
    try {
      text = utf8.decode(readFileSync(join(root, path)))
    } catch {
      throw bad(`"${path}" is not UTF-8 text`)
    }
    out.set(`${DOCS_FOLDER}/${path}`, text)
  }
  return out
}
