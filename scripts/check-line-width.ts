/**
 * @module The line-width and file-length checks: no line of code is over 120 characters, no
 * code file over 600 lines.
 *
 * The formatter (biome, `biome.jsonc`) lays code out within 120 columns but leaves alone
 * what it cannot break: long string and template literals, comments, regular expressions,
 * and the AssemblyScript sources it does not parse. This check covers all of them: every
 * `*.ts`, `*.js` and `*.mjs` file git tracks, outside `node_modules`, counted in characters
 * (code points, so `→` is one). Split a long message into concatenated pieces, a long
 * comment over lines, a long pattern into named parts.
 *
 * A file over {@link MAX_LINES} lines (see {@link isLengthChecked} for which files count: package
 * sources and their tests, native kernels, scripts, experiments) holds more than one concept:
 * split it by concept, each part with its own test, as the layout in docs/architecture.md does.
 *
 * Usage: `tsx scripts/check-line-width.ts [--root DIR]`; exits 1 on any line over the width or
 * any file over the length.
 */
import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

export const LINE_WIDTH = 120

export const MAX_LINES = 600

export type LongLine = { file: string; line: number; width: number }

export type LongFile = { file: string; lines: number }

/**
 * The code files held to {@link MAX_LINES}: `packages/**\/src/**\/*.ts`, `packages/*\/native/**\/*.{cc,h}`,
 * `scripts/*.ts` and `experiments/**\/*.ts`, tests included (generated `.d.ts` and build output are not code).
 */
export function isLengthChecked(file: string): boolean {
  if (file.includes('node_modules/') || file.endsWith('.d.ts')) return false
  return (
    /^packages\/(.+\/)?src\/.+\.ts$/.test(file) ||
    /^packages\/[^/]+\/native\/(?!build\/).+\.(cc|h)$/.test(file) ||
    /^scripts\/[^/]+\.ts$/.test(file) ||
    /^experiments\/.+\.ts$/.test(file)
  )
}

/** Lines of `text` as an editor numbers them: a final newline does not start another line. */
function lineCount(text: string): number {
  if (text === '') return 0
  const n = text.split('\n').length
  return text.endsWith('\n') ? n - 1 : n
}

/** The code files git tracks under `root` that are over {@link MAX_LINES} lines, longest first. */
export function checkFileLength(root: string): LongFile[] {
  const files = execFileSync('git', ['ls-files', '-z'], { cwd: root, encoding: 'utf8' })
    .split('\0')
    .filter((f) => f && isLengthChecked(f))
  const long: LongFile[] = []
  for (const file of files) {
    let text: string
    try {
      text = readFileSync(join(root, file), 'utf8')
    } catch {
      continue // deleted in the working tree, not yet in the index
    }
    const lines = lineCount(text)
    if (lines > MAX_LINES) long.push({ file, lines })
  }
  return long.sort((a, b) => b.lines - a.lines || a.file.localeCompare(b.file))
}

/** The lines over {@link LINE_WIDTH} in the code files git tracks under `root`. */
export function checkLineWidth(root: string): LongLine[] {
  const files = execFileSync('git', ['ls-files', '-z', '--', '*.ts', '*.js', '*.mjs'], { cwd: root, encoding: 'utf8' })
    .split('\0')
    .filter((f) => f && !f.includes('node_modules/'))
  const long: LongLine[] = []
  for (const file of files) {
    let text: string
    try {
      text = readFileSync(join(root, file), 'utf8')
    } catch {
      continue // deleted in the working tree, not yet in the index
    }
    text.split('\n').forEach((l, i) => {
      const width = [...l].length
      if (width > LINE_WIDTH) long.push({ file, line: i + 1, width })
    })
  }
  return long
}

function main(argv: string[]): number {
  const i = argv.indexOf('--root')
  const root = i >= 0 ? resolve(argv[i + 1] ?? '.') : resolve(dirname(fileURLToPath(import.meta.url)), '..')
  const long = checkLineWidth(root)
  for (const l of long) process.stderr.write(`${l.file}:${l.line}: ${l.width} characters, over ${LINE_WIDTH}\n`)
  if (long.length) {
    process.stderr.write(
      `line width: ${long.length} line(s) over ${LINE_WIDTH}; break them (see scripts/check-line-width.ts)\n`,
    )
  }
  const longFiles = checkFileLength(root)
  for (const f of longFiles) process.stderr.write(`${f.file}: ${f.lines} lines, over ${MAX_LINES}\n`)
  if (longFiles.length) {
    process.stderr.write(
      `file length: ${longFiles.length} file(s) over ${MAX_LINES} lines; split each by concept ` +
        `(see scripts/check-line-width.ts)\n`,
    )
  }
  if (long.length || longFiles.length) return 1
  process.stdout.write(`line width: ok\nfile length: ok\n`)
  return 0
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  process.exitCode = main(process.argv.slice(2))
}
