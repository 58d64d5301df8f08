/**
 * @module The import-cycle check: inside a package, files import each other in one direction.
 *
 * Reads every `*.ts` file under `packages/*\/src` (tests included) with the TypeScript parser
 * and follows its relative imports to files of the same package, resolving them as TypeScript
 * does (`./a.js` is `./a.ts` when that exists, `./dir` is `./dir/index.ts`). An edge is either:
 * - runtime: a value import, a side-effect import, a re-export or a dynamic `import('./x.js')`.
 *   Under `verbatimModuleSyntax` (tsconfig.base.json) `import { type A } from './a.js'` is kept
 *   as `import {} from './a.js'`, so it loads `a.ts` and counts as runtime too;
 * - type-only: `import type`, `export type … from` and `typeof import('./x.js')` types, which
 *   the compiler erases.
 *
 * A cycle of runtime edges fails the check: which module initialises first then depends on load
 * order, and a `const` read during the other's evaluation throws. A cycle that needs a type-only
 * edge is listed but passes; it still ties the files' designs together, so move the shared type
 * down into a file both import. Each cycle is printed as one concrete loop with the line of each
 * import, and the set of files that the loop belongs to (its strongly connected component).
 *
 * Usage: `tsx scripts/check-cycles.ts [--root DIR]`; exits 1 on any runtime cycle.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'

export type Edge = { from: string; to: string; line: number; typeOnly: boolean }

/** One strongly connected component of a package's import graph, with one loop through it. */
export type Cycle = {
  package: string
  kind: 'runtime' | 'type-only'
  /** Every file of the component, relative to the root, sorted. */
  files: string[]
  /** One loop: `loop[i]` imports `loop[i + 1]` (the last imports the first) at `loop[i].line`. */
  loop: { file: string; line: number; typeOnly: boolean }[]
}

function* tsFiles(dir: string): Generator<string> {
  for (const entry of readdirSync(dir).sort()) {
    if (entry === 'node_modules') continue
    const p = join(dir, entry)
    if (statSync(p).isDirectory()) yield* tsFiles(p)
    else if (/\.[cm]?ts$/.test(entry) && !/\.d\.[cm]?ts$/.test(entry)) yield p
  }
}

/** The file a relative specifier names, as TypeScript's NodeNext resolution finds it; undefined when none. */
export function resolveRelative(fromFile: string, specifier: string): string | undefined {
  const base = resolve(dirname(fromFile), specifier)
  const candidates: string[] = []
  const m = /\.([cm]?)js$/.exec(base)
  if (m) candidates.push(`${base.slice(0, -m[0].length)}.${m[1]}ts`, `${base.slice(0, -m[0].length)}.tsx`)
  candidates.push(base, `${base}.ts`, `${base}.tsx`, join(base, 'index.ts'))
  return candidates.find((c) => existsSync(c) && statSync(c).isFile())
}

function isTypeOnlyImport(node: ts.ImportDeclaration): boolean {
  return node.importClause?.isTypeOnly === true
}

/** The specifiers `file` imports, re-exports or loads, with the line and whether the compiler erases it. */
export function specifiersOf(file: string, text: string): { spec: string; line: number; typeOnly: boolean }[] {
  const sf = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS)
  const out: { spec: string; line: number; typeOnly: boolean }[] = []
  const add = (lit: ts.Node, typeOnly: boolean) => {
    if (!ts.isStringLiteralLike(lit)) return
    out.push({ spec: lit.text, line: sf.getLineAndCharacterOfPosition(lit.getStart(sf)).line + 1, typeOnly })
  }
  const visit = (node: ts.Node) => {
    if (ts.isImportDeclaration(node)) add(node.moduleSpecifier, isTypeOnlyImport(node))
    else if (ts.isExportDeclaration(node) && node.moduleSpecifier) add(node.moduleSpecifier, node.isTypeOnly)
    else if (ts.isImportEqualsDeclaration(node) && ts.isExternalModuleReference(node.moduleReference))
      add(node.moduleReference.expression, node.isTypeOnly)
    else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword && node.arguments[0])
      add(node.arguments[0], false)
    else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument)) add(node.argument.literal, true)
    ts.forEachChild(node, visit)
  }
  visit(sf)
  return out
}

/** Every in-package edge of the files under `srcDir`; an import of a file outside it is not followed. */
export function graphOf(srcDir: string): Edge[] {
  const edges: Edge[] = []
  for (const file of tsFiles(srcDir)) {
    for (const { spec, line, typeOnly } of specifiersOf(file, readFileSync(file, 'utf8'))) {
      if (!spec.startsWith('.')) continue
      const to = resolveRelative(file, spec)
      if (to?.startsWith(srcDir + '/')) edges.push({ from: file, to, line, typeOnly })
    }
  }
  return edges
}

/** Strongly connected components of size > 1, or with a self-edge (Tarjan, iterative). */
function components(nodes: string[], out: Map<string, Edge[]>): string[][] {
  const index = new Map<string, number>()
  const low = new Map<string, number>()
  const onStack = new Set<string>()
  const stack: string[] = []
  const result: string[][] = []
  let next = 0
  for (const root of nodes) {
    if (index.has(root)) continue
    const work: { node: string; i: number }[] = [{ node: root, i: 0 }]
    index.set(root, next), low.set(root, next++), stack.push(root), onStack.add(root)
    while (work.length) {
      const top = work[work.length - 1]!
      const edges = out.get(top.node) ?? []
      if (top.i < edges.length) {
        const to = edges[top.i++]!.to
        if (!index.has(to)) {
          index.set(to, next), low.set(to, next++), stack.push(to), onStack.add(to)
          work.push({ node: to, i: 0 })
        } else if (onStack.has(to)) low.set(top.node, Math.min(low.get(top.node)!, index.get(to)!))
        continue
      }
      work.pop()
      const parent = work[work.length - 1]
      if (parent) low.set(parent.node, Math.min(low.get(parent.node)!, low.get(top.node)!))
      if (low.get(top.node) === index.get(top.node)) {
        const comp: string[] = []
        let n: string
        do {
          n = stack.pop()!
          onStack.delete(n)
          comp.push(n)
        } while (n !== top.node)
        if (comp.length > 1 || edges.some((e) => e.to === top.node)) result.push(comp.sort())
      }
    }
  }
  return result
}

/** The shortest loop inside `comp` that starts with `first` (breadth-first search back to its start). */
function loopThrough(first: Edge, comp: Set<string>, out: Map<string, Edge[]>): Edge[] {
  const prev = new Map<string, Edge>()
  const queue = [first.to]
  const seen = new Set([first.to])
  while (queue.length) {
    const n = queue.shift()!
    if (n === first.from) break
    for (const e of out.get(n) ?? []) {
      if (!comp.has(e.to) || seen.has(e.to)) continue
      seen.add(e.to), prev.set(e.to, e), queue.push(e.to)
    }
  }
  const path: Edge[] = []
  for (let n = first.from; n !== first.to; ) {
    const e = prev.get(n)!
    path.unshift(e)
    n = e.from
  }
  return [first, ...path]
}

function cyclesOf(pkg: string, root: string, edges: Edge[]): Cycle[] {
  const byFrom = (list: Edge[]) => {
    const m = new Map<string, Edge[]>()
    for (const e of list) m.set(e.from, [...(m.get(e.from) ?? []), e])
    return m
  }
  const runtime = edges.filter((e) => !e.typeOnly)
  const all = byFrom(edges)
  const run = byFrom(runtime)
  const nodes = [...new Set(edges.flatMap((e) => [e.from, e.to]))].sort()
  const rel = (f: string) => relative(root, f)
  const cycle = (kind: Cycle['kind'], comp: string[], loop: Edge[]): Cycle => ({
    package: pkg,
    kind,
    files: comp.map(rel),
    loop: loop.map((e) => ({ file: rel(e.from), line: e.line, typeOnly: e.typeOnly })),
  })
  const found: Cycle[] = []
  for (const comp of components(nodes, run)) {
    const set = new Set(comp)
    const first = runtime.find((e) => set.has(e.from) && set.has(e.to))!
    found.push(cycle('runtime', comp, loopThrough(first, set, run)))
  }
  // A component of the full graph that needs a type-only edge: list it with a loop through that edge.
  for (const comp of components(nodes, all)) {
    const set = new Set(comp)
    const first = edges.find((e) => e.typeOnly && set.has(e.from) && set.has(e.to))
    if (first) found.push(cycle('type-only', comp, loopThrough(first, set, all)))
  }
  return found
}

/** The import cycles inside each package under `root/packages`. */
export function checkCycles(root: string): Cycle[] {
  const found: Cycle[] = []
  const packagesDir = join(root, 'packages')
  for (const entry of readdirSync(packagesDir).sort()) {
    const src = join(packagesDir, entry, 'src')
    if (!existsSync(src)) continue
    found.push(...cyclesOf(entry, root, graphOf(src)))
  }
  return found
}

/** `a.ts:3 → b.ts:9 (type) → a.ts`: each file with the line of its import of the next. */
export function formatLoop(c: Cycle): string {
  const steps = c.loop.map((s) => `${s.file}:${s.line}${s.typeOnly ? ' (type)' : ''}`)
  return `${steps.join(' → ')} → ${c.loop[0]!.file}`
}

function main(argv: string[]): number {
  const i = argv.indexOf('--root')
  const root = i >= 0 ? resolve(argv[i + 1] ?? '.') : resolve(dirname(fileURLToPath(import.meta.url)), '..')
  const cycles = checkCycles(root)
  const typeOnly = cycles.filter((c) => c.kind === 'type-only')
  const runtime = cycles.filter((c) => c.kind === 'runtime')
  if (typeOnly.length) {
    process.stdout.write(`import cycles: ${typeOnly.length} type-only (allowed, but move the shared type down):\n`)
    for (const c of typeOnly) process.stdout.write(`  ${c.package} (${c.files.length} files): ${formatLoop(c)}\n`)
  }
  for (const c of runtime) {
    process.stderr.write(
      `${c.loop[0]!.file}:${c.loop[0]!.line}: [import-cycle] ${c.package}: ${c.files.length} files import each ` +
        `other at run time: ${formatLoop(c)}\n  files: ${c.files.join(', ')}\n`,
    )
  }
  if (runtime.length) {
    process.stderr.write(
      `import cycles: ${runtime.length} runtime cycle(s); break each by moving what both files need into a ` +
        `lower file, or by passing it in (see scripts/check-cycles.ts)\n`,
    )
    return 1
  }
  process.stdout.write('import cycles: ok (no runtime cycle)\n')
  return 0
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  process.exitCode = main(process.argv.slice(2))
}
