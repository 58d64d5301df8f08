/**
 * @module The line-width check: no line of code is over 120 characters.
 *
 * The formatter (biome, `biome.jsonc`) lays code out within 120 columns but leaves alone
 * what it cannot break: long string and template literals, comments, regular expressions,
 * and the AssemblyScript sources it does not parse. This check covers all of them: every
 * `*.ts`, `*.js` and `*.mjs` file git tracks, outside `node_modules`, counted in characters
 * (code points, so `→` is one). Split a long message into concatenated pieces, a long
 * comment over lines, a long pattern into named parts.
 *
 * Usage: `tsx scripts/check-line-width.ts [--root DIR]`; exits 1 on any line over the width.
 */
import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

export const LINE_WIDTH = 120

export type LongLine = { file: string; line: number; width: number }

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
    return 1
  }
  process.stdout.write('line width: ok\n')
  return 0
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  process.exitCode = main(process.argv.slice(2))
}
