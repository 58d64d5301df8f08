/**
 * @module The layering check: imports go strictly downward.
 *
 * Reads every import, re-export and dynamic `import()` under `packages/*\/src`
 * and every package's declared dependencies, and reports, with file and line:
 * - an import of a `@marin/*` package of equal or higher rank (rank is `marin.rank`
 *   in each package.json, taken from ARCHITECTURE.md);
 * - an import of any package the importing package does not declare
 *   (test code, see `isTestCode`, may also use devDependencies);
 * - a relative import that leaves the package's own folder.
 *
 * Usage: `tsx scripts/check-layering.ts [--root DIR]`; exits 1 on any violation.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs'
import { builtinModules } from 'node:module'
import { dirname, join, relative, resolve, sep } from 'node:path'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'

export type Violation = {
  file: string
  line: number
  rule: 'upward-import' | 'undeclared-dependency' | 'outside-package'
  message: string
}

type PackageInfo = {
  dir: string
  name: string
  rank: number
  deps: Set<string>
  devDeps: Set<string>
}

const BUILTINS = new Set(builtinModules)

function readPackages(root: string): Map<string, PackageInfo> {
  const packagesDir = join(root, 'packages')
  const out = new Map<string, PackageInfo>()
  for (const entry of readdirSync(packagesDir)) {
    const dir = join(packagesDir, entry)
    const pjPath = join(dir, 'package.json')
    let pj: Record<string, any>
    try {
      pj = JSON.parse(readFileSync(pjPath, 'utf8'))
    } catch {
      continue
    }
    const rank = pj.marin?.rank
    if (typeof rank !== 'number')
      throw new Error(`${relative(root, pjPath)}: missing "marin.rank"; add the package's rank from ARCHITECTURE.md`)
    const deps = new Set<string>([
      ...Object.keys(pj.dependencies ?? {}),
      ...Object.keys(pj.peerDependencies ?? {}),
      ...Object.keys(pj.optionalDependencies ?? {}),
    ])
    out.set(pj.name, { dir, name: pj.name, rank, deps, devDeps: new Set(Object.keys(pj.devDependencies ?? {})) })
  }
  return out
}

function* sourceFiles(dir: string): Generator<string> {
  for (const entry of readdirSync(dir)) {
    if (entry === 'node_modules') continue
    const p = join(dir, entry)
    if (statSync(p).isDirectory()) yield* sourceFiles(p)
    else if (/\.(ts|mts|cts|js|mjs)$/.test(entry) && !entry.endsWith('.d.ts')) yield p
  }
}

/** `@scope/name/sub` → `@scope/name`; `name/sub` → `name`. */
export function packageOf(specifier: string): string {
  const parts = specifier.split('/')
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]!
}

/**
 * Test code may also use devDependencies: `*.test.ts` files, anything under a
 * `fixtures/` or `test-support/` folder, and `test-*.ts` helper files.
 */
export function isTestCode(pathInPackage: string): boolean {
  return (
    /\.test\.[cm]?[tj]s$/.test(pathInPackage) ||
    /(^|\/)(fixtures|test-support)\//.test(pathInPackage) ||
    /(^|\/)test-[^/]+$/.test(pathInPackage)
  )
}

function lineOf(text: string, pos: number): number {
  let line = 1
  for (let i = text.indexOf('\n'); i !== -1 && i < pos; i = text.indexOf('\n', i + 1)) line++
  return line
}

export function checkLayering(root: string): Violation[] {
  const packages = readPackages(root)
  const violations: Violation[] = []
  for (const pkg of packages.values()) {
    const src = join(pkg.dir, 'src')
    let files: string[]
    try {
      files = [...sourceFiles(src)]
    } catch {
      continue
    }
    for (const file of files) {
      const text = readFileSync(file, 'utf8')
      const isTest = isTestCode(relative(pkg.dir, file))
      const info = ts.preProcessFile(text, true, true)
      for (const imp of info.importedFiles) {
        const spec = imp.fileName
        const line = lineOf(text, imp.pos)
        const where = { file: relative(root, file), line }
        if (spec.startsWith('.')) {
          const target = resolve(dirname(file), spec)
          if (!target.startsWith(pkg.dir + sep)) {
            violations.push({
              ...where,
              rule: 'outside-package',
              message:
                `${pkg.name} reaches outside its folder with '${spec}'; import ` + `the other package by name instead`,
            })
          }
          continue
        }
        if (spec.startsWith('node:') || BUILTINS.has(spec) || spec.startsWith('#')) continue
        const dep = packageOf(spec)
        if (dep === pkg.name) {
          // Tests and fixtures may use the package's public entry, as its users do.
          if (isTest) continue
          violations.push({
            ...where,
            rule: 'upward-import',
            message: `${pkg.name} imports itself through '${spec}'; import the defining file relatively`,
          })
          continue
        }
        const target = packages.get(dep)
        if (target && target.rank >= pkg.rank) {
          violations.push({
            ...where,
            rule: 'upward-import',
            message:
              `${pkg.name} (rank ${pkg.rank}) imports ${dep} (rank ` +
              `${target.rank}): a package may only import packages of lower rank`,
          })
          continue
        }
        if (!pkg.deps.has(dep) && !(isTest && pkg.devDeps.has(dep))) {
          violations.push({
            ...where,
            rule: 'undeclared-dependency',
            message:
              `${pkg.name} imports '${dep}' but does not declare it; add it to ` +
              `packages/${relative(join(root, 'packages'), pkg.dir)}` +
              `/package.json`,
          })
        }
      }
    }
  }
  return violations
}

function main(argv: string[]): number {
  const i = argv.indexOf('--root')
  const root = i >= 0 ? resolve(argv[i + 1] ?? '.') : resolve(dirname(fileURLToPath(import.meta.url)), '..')
  const violations = checkLayering(root)
  for (const v of violations) process.stderr.write(`${v.file}:${v.line}: [${v.rule}] ${v.message}\n`)
  if (violations.length) {
    process.stderr.write(`layering: ${violations.length} violation(s)\n`)
    return 1
  }
  process.stdout.write('layering: ok\n')
  return 0
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  process.exitCode = main(process.argv.slice(2))
}
