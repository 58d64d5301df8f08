/**
 * @module `pnpm bench [name…]`: runs benchmark files and passes their JSON lines through.
 *
 * A benchmark is `packages/<pkg>/bench/<topic>.bench.ts`. A name selects a package
 * (`pnpm bench dupekit`) or a topic (`pnpm bench serve`); no name runs them all.
 * Each file runs in its own process, one after another, so they do not share
 * the machine's two cores. Every line a benchmark prints to stdout is one JSON
 * object `{"bench","metric","value","unit"[,"baseline","ratio"]}`; its progress
 * and logs go to stderr.
 */
import { spawn } from 'node:child_process'
import { existsSync, readdirSync } from 'node:fs'
import { basename, join, resolve } from 'node:path'

const root = resolve(import.meta.dirname, '..')

export function findBenchmarks(names: string[]): string[] {
  const files: string[] = []
  for (const pkg of readdirSync(join(root, 'packages')).sort()) {
    const dir = join(root, 'packages', pkg, 'bench')
    if (!existsSync(dir)) continue
    for (const f of readdirSync(dir).sort()) {
      if (!f.endsWith('.bench.ts')) continue
      const topic = basename(f, '.bench.ts')
      if (names.length === 0 || names.includes(pkg) || names.includes(topic)) files.push(join(dir, f))
    }
  }
  return files
}

async function run(file: string): Promise<number> {
  const child = spawn(process.execPath, ['--import', 'tsx', file], {
    cwd: root,
    stdio: ['ignore', 'inherit', 'inherit'],
  })
  return new Promise((res) => child.on('exit', (code, signal) => res(code ?? (signal ? 1 : 0))))
}

const USAGE = `usage: pnpm bench [name…]

Runs the benchmarks in packages/<package>/bench/<topic>.bench.ts, one process each, one
after another. A name selects a package (pnpm bench dupekit) or a topic (pnpm bench serve);
no name runs them all. Results are JSON lines on stdout:
  {"bench": package, "metric": name, "value": n, "unit": u[, "baseline": n, "ratio": n]}
where ratio is ours ÷ baseline as a throughput (higher is better). Progress goes to stderr.

benchmarks: ${findBenchmarks([])
  .map((f) => `${basename(join(f, '..', '..'))}/${basename(f, '.bench.ts')}`)
  .join(', ')}
`

const names = process.argv.slice(2)
if (names.includes('--help') || names.includes('-h')) {
  process.stdout.write(USAGE)
  process.exit(0)
}
const unknownFlag = names.find((n) => n.startsWith('-'))
if (unknownFlag) {
  process.stderr.write(`bench: unknown option ${unknownFlag}\n\n${USAGE}`)
  process.exit(2)
}
const files = findBenchmarks(names)
if (files.length === 0) {
  process.stderr.write(
    `bench: no benchmark matches ${names.join(', ') || '(any)'}; ` +
      `benchmarks live in packages/<name>/bench/<topic>.bench.ts\n`,
  )
  process.exit(2)
}
let failed = 0
for (const f of files) {
  process.stderr.write(`bench: ${f.slice(root.length + 1)}\n`)
  if ((await run(f)) !== 0) failed++
}
process.exit(failed ? 1 : 0)
