/**
 * @module The unused-export check: every exported name has a user.
 *
 * Parses every TypeScript and JavaScript file of the repository (package
 * sources, tests, fixtures, benches, scripts, `bin/` launchers, experiments)
 * with the TypeScript parser, follows imports, re-exports and dynamic
 * `import()`s to the module that declares each name, and reports, with file
 * and line, each exported name that nothing uses: no other file imports it
 * (directly or through a chain of re-exports) and its own file does not refer
 * to it. Tests, fixtures, benches, scripts, `bin/` launchers and experiments
 * count as users; a re-export is not a use by itself, only an import that
 * reaches through it counts, so a name a package's `src/index.ts` offers is
 * kept alive by its users (in or outside the package), not by the index.
 * Files under `fixtures/` are loaded by path at run time and are not checked.
 *
 * An export that its own file uses is not reported: the export keyword is cheap,
 * and often names a type of the module's signatures. A name that is public on
 * purpose before anything uses it goes into `scripts/public-api.json` as
 * `{ package, name, reason }`.
 *
 * Usage: `tsx scripts/check-exports.ts [--root DIR]`; exits 1 on any finding.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { dirname, join, relative, resolve, sep } from 'node:path'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'

export type Finding = { file: string; line: number; rule: 'unused-export'; name: string; message: string }

/** One entry of `scripts/public-api.json`: a public name kept without a user, and why. */
export type PublicApiEntry = { package: string; name: string; reason: string }

type Target = { module: string; name: string }

type ModuleInfo = {
  file: string
  /** Names declared and exported here, with the line of the declaration. */
  locals: Map<string, number>
  /** `export { a as b } from './m'`: b → (m, a); `export * as ns from './m'`: ns → (m, '*'). */
  reexports: Map<string, Target & { line: number }>
  /** `export * from './m'`. */
  stars: string[]
  /** Names this file refers to besides declaring and exporting them. */
  localUses: Set<string>
}

type Use = { from: string; module: string; name: string }

type PackageInfo = { dir: string; name: string; entries: Map<string, string> }

const SOURCE = /\.(ts|mts|cts|js|mjs|cjs)$/
const SKIPPED_DIRS = new Set(['node_modules', 'dist', 'coverage'])

function* sourceFiles(dir: string): Generator<string> {
  let entries: string[]
  try {
    entries = readdirSync(dir)
  } catch {
    return
  }
  for (const entry of entries) {
    if (SKIPPED_DIRS.has(entry) || entry.startsWith('.')) continue
    const p = join(dir, entry)
    if (statSync(p).isDirectory()) yield* sourceFiles(p)
    else if (SOURCE.test(entry) && !entry.endsWith('.d.ts')) yield p
  }
}

function readPackages(root: string): Map<string, PackageInfo> {
  const out = new Map<string, PackageInfo>()
  const packagesDir = join(root, 'packages')
  if (!existsSync(packagesDir)) return out
  for (const entry of readdirSync(packagesDir)) {
    const dir = join(packagesDir, entry)
    let pj: Record<string, any>
    try {
      pj = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'))
    } catch {
      continue
    }
    const entries = new Map<string, string>()
    const exportsField = pj.exports ?? { '.': './src/index.ts' }
    const map = typeof exportsField === 'string' ? { '.': exportsField } : exportsField
    for (const [key, value] of Object.entries<any>(map)) {
      const target = typeof value === 'string' ? value : (value?.default ?? value?.import ?? value?.types)
      if (typeof target === 'string' && /\.[cm]?[tj]s$/.test(target)) entries.set(key, resolve(dir, target))
    }
    out.set(pj.name, { dir, name: pj.name, entries })
  }
  return out
}

/** The file a specifier names, for files of this repository; undefined for anything else. */
function resolveSpecifier(spec: string, from: string, packages: Map<string, PackageInfo>): string | undefined {
  if (spec.startsWith('.')) {
    const base = resolve(dirname(from), spec)
    const candidates = [base, base.replace(/\.([cm]?)js$/, '.$1ts'), `${base}.ts`, join(base, 'index.ts')]
    return candidates.find((c) => SOURCE.test(c) && existsSync(c) && statSync(c).isFile())
  }
  const parts = spec.split('/')
  const pkgName = spec.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]!
  const pkg = packages.get(pkgName)
  if (!pkg) return undefined
  const sub = spec.slice(pkgName.length)
  return pkg.entries.get(sub ? `.${sub}` : '.')
}

function hasExportModifier(node: ts.Node): boolean {
  return ts.canHaveModifiers(node) && (ts.getModifiers(node) ?? []).some((m) => m.kind === ts.SyntaxKind.ExportKeyword)
}

function hasDefaultModifier(node: ts.Node): boolean {
  return ts.canHaveModifiers(node) && (ts.getModifiers(node) ?? []).some((m) => m.kind === ts.SyntaxKind.DefaultKeyword)
}

function bindingNames(name: ts.BindingName, out: string[] = []): string[] {
  if (ts.isIdentifier(name)) out.push(name.text)
  else for (const el of name.elements) if (!ts.isOmittedExpression(el)) bindingNames(el.name, out)
  return out
}

/** Reads a file's exports and its uses of other modules. */
function scan(file: string, text: string, packages: Map<string, PackageInfo>): { info: ModuleInfo; uses: Use[] } {
  const sf = ts.createSourceFile(
    file,
    text,
    ts.ScriptTarget.Latest,
    true,
    /\.[cm]?js$/.test(file) ? ts.ScriptKind.JS : ts.ScriptKind.TS,
  )
  const info: ModuleInfo = { file, locals: new Map(), reexports: new Map(), stars: [], localUses: new Set() }
  const uses: Use[] = []
  const lineOf = (node: ts.Node) => sf.getLineAndCharacterOfPosition(node.getStart(sf)).line + 1
  const target = (spec: ts.Expression | undefined) =>
    spec && ts.isStringLiteralLike(spec) ? resolveSpecifier(spec.text, file, packages) : undefined
  const namespaces = new Map<string, string>()

  for (const stmt of sf.statements) {
    if (ts.isImportDeclaration(stmt)) {
      const mod = target(stmt.moduleSpecifier)
      const clause = stmt.importClause
      if (!mod || !clause) continue
      if (clause.name) uses.push({ from: file, module: mod, name: 'default' })
      const bindings = clause.namedBindings
      if (bindings && ts.isNamespaceImport(bindings)) namespaces.set(bindings.name.text, mod)
      else if (bindings)
        for (const el of bindings.elements)
          uses.push({ from: file, module: mod, name: (el.propertyName ?? el.name).text })
    } else if (ts.isExportDeclaration(stmt)) {
      const mod = target(stmt.moduleSpecifier)
      if (stmt.moduleSpecifier && !mod) continue
      const clause = stmt.exportClause
      if (!clause) {
        if (mod) info.stars.push(mod)
      } else if (ts.isNamespaceExport(clause)) {
        if (mod) info.reexports.set(clause.name.text, { module: mod, name: '*', line: lineOf(stmt) })
      } else {
        for (const el of clause.elements) {
          const exported = el.name.text
          const local = (el.propertyName ?? el.name).text
          if (mod) info.reexports.set(exported, { module: mod, name: local, line: lineOf(el) })
          else info.locals.set(exported, lineOf(el))
        }
      }
    } else if (ts.isExportAssignment(stmt)) {
      info.locals.set('default', lineOf(stmt))
    } else if (hasExportModifier(stmt)) {
      if (hasDefaultModifier(stmt)) info.locals.set('default', lineOf(stmt))
      else if (ts.isVariableStatement(stmt)) {
        for (const decl of stmt.declarationList.declarations)
          for (const n of bindingNames(decl.name)) info.locals.set(n, lineOf(decl))
      } else {
        const named = stmt as ts.Node & { name?: ts.Node }
        if (named.name && ts.isIdentifier(named.name)) info.locals.set(named.name.text, lineOf(stmt))
      }
    }
  }

  const visit = (node: ts.Node): void => {
    if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) {
      const mod = target(node.arguments[0])
      if (mod) for (const name of dynamicImportNames(node)) uses.push({ from: file, module: mod, name })
    } else if (
      ts.isImportTypeNode(node) &&
      ts.isLiteralTypeNode(node.argument) &&
      ts.isStringLiteral(node.argument.literal)
    ) {
      const mod = resolveSpecifier(node.argument.literal.text, file, packages)
      if (mod) uses.push({ from: file, module: mod, name: node.qualifier ? qualifierHead(node.qualifier) : '*' })
    } else if (ts.isIdentifier(node) && namespaces.has(node.text) && !ts.isNamespaceImport(node.parent)) {
      const mod = namespaces.get(node.text)!
      const parent = node.parent
      if (ts.isPropertyAccessExpression(parent) && parent.expression === node)
        uses.push({ from: file, module: mod, name: parent.name.text })
      else if (ts.isQualifiedName(parent) && parent.left === node)
        uses.push({ from: file, module: mod, name: parent.right.text })
      else uses.push({ from: file, module: mod, name: '*' })
    }
    if (ts.isIdentifier(node) && isReference(node)) info.localUses.add(node.text)
    ts.forEachChild(node, visit)
  }
  visit(sf)
  return { info, uses }
}

/** False for a declaration's own name, an export list entry, and property names (`a.x`, `{ x: 1 }`). */
function isReference(id: ts.Identifier): boolean {
  const parent = id.parent
  if (
    ts.isExportSpecifier(parent) ||
    ts.isImportSpecifier(parent) ||
    ts.isImportClause(parent) ||
    ts.isNamespaceImport(parent)
  )
    return false
  if (ts.isPropertyAccessExpression(parent) && parent.name === id) return false
  if (ts.isQualifiedName(parent) && parent.right === id) return false
  if (
    (ts.isPropertyAssignment(parent) ||
      ts.isPropertySignature(parent) ||
      ts.isPropertyDeclaration(parent) ||
      ts.isMethodDeclaration(parent) ||
      ts.isMethodSignature(parent)) &&
    parent.name === id
  )
    return false
  const declared = parent as ts.Node & { name?: ts.Node }
  if (
    declared.name === id &&
    (ts.isDeclarationStatement(parent) ||
      ts.isVariableDeclaration(parent) ||
      ts.isBindingElement(parent) ||
      ts.isParameter(parent) ||
      ts.isTypeParameterDeclaration(parent) ||
      ts.isEnumMember(parent))
  )
    return false
  return true
}

function qualifierHead(q: ts.EntityName): string {
  return ts.isIdentifier(q) ? q.text : qualifierHead(q.left)
}

/** `const { a, b } = await import(m)` and `(await import(m)).a` use a and b; anything else uses every name. */
function dynamicImportNames(call: ts.CallExpression): string[] {
  let node: ts.Node = call
  let awaited = false
  while (ts.isParenthesizedExpression(node.parent) || ts.isAwaitExpression(node.parent)) {
    awaited ||= ts.isAwaitExpression(node.parent)
    node = node.parent
  }
  const parent = node.parent
  if (!awaited) return ['*']
  if (ts.isVariableDeclaration(parent) && ts.isObjectBindingPattern(parent.name)) {
    const names: string[] = []
    for (const el of parent.name.elements) {
      if (el.dotDotDotToken) return ['*']
      const key = el.propertyName ?? el.name
      if (ts.isIdentifier(key) || ts.isStringLiteral(key)) names.push(key.text)
      else return ['*']
    }
    return names
  }
  if (ts.isPropertyAccessExpression(parent) && parent.expression === node) return [parent.name.text]
  return ['*']
}

export type CheckOptions = { publicApi?: PublicApiEntry[] }

export function checkExports(root: string, options: CheckOptions = {}): Finding[] {
  const packages = readPackages(root)
  const modules = new Map<string, ModuleInfo>()
  const uses: Use[] = []
  for (const file of sourceFiles(root)) {
    const scanned = scan(file, readFileSync(file, 'utf8'), packages)
    modules.set(file, scanned.info)
    uses.push(...scanned.uses)
  }

  // Every (module, name) an import reaches, hop by hop through re-exports, with the importing files.
  const reached = new Map<string, Set<string>>()
  const key = (module: string, name: string) => `${module}\0${name}`
  const mark = (module: string, name: string, from: string, seen: Set<string>): void => {
    const k = key(module, name)
    if (seen.has(k)) return
    seen.add(k)
    const info = modules.get(module)
    if (!info) return
    if (name === '*') {
      for (const n of exportedNames(info, modules)) mark(module, n, from, seen)
      return
    }
    let users = reached.get(k)
    if (!users) reached.set(k, (users = new Set()))
    users.add(from)
    const re = info.reexports.get(name)
    if (re) return mark(re.module, re.name, from, seen)
    if (info.locals.has(name)) return
    for (const star of info.stars)
      if (exportedNames(modules.get(star), modules).has(name)) return mark(star, name, from, seen)
  }
  for (const use of uses) mark(use.module, use.name, use.from, new Set())

  const findings: Finding[] = []
  const rel = (f: string) => relative(root, f).split(sep).join('/')
  const allowed = new Set((options.publicApi ?? []).map((e) => `${e.package}\0${e.name}`))
  const packageNames = new Map([...packages.values()].map((p) => [rel(p.dir), p.name]))
  for (const info of modules.values()) {
    const relFile = rel(info.file)
    const match = /^(packages\/[^/]+)\/src\//.exec(relFile)
    if (!match || /\.test\.[cm]?[tj]s$/.test(relFile) || /(^|\/)fixtures\//.test(relFile)) continue
    for (const [name, line] of info.locals) {
      if (info.localUses.has(name) || allowed.has(`${packageNames.get(match[1]!)}\0${name}`)) continue
      const users = [...(reached.get(key(info.file, name)) ?? [])].filter((f) => f !== info.file)
      if (users.length > 0) continue
      findings.push({
        file: relFile,
        line,
        rule: 'unused-export',
        name,
        message: `'${name}' is exported but nothing uses it, here or elsewhere; delete it`,
      })
    }
  }
  return findings.sort((a, b) => a.file.localeCompare(b.file) || a.line - b.line)
}

function exportedNames(
  info: ModuleInfo | undefined,
  modules: Map<string, ModuleInfo>,
  seen = new Set<string>(),
): Set<string> {
  const out = new Set<string>()
  if (!info || seen.has(info.file)) return out
  seen.add(info.file)
  for (const n of info.locals.keys()) out.add(n)
  for (const n of info.reexports.keys()) out.add(n)
  for (const star of info.stars)
    for (const n of exportedNames(modules.get(star), modules, seen)) if (n !== 'default') out.add(n)
  return out
}

/** Reads `scripts/public-api.json`: a list of `{ package, name, reason }`, each reason said in words. */
export function readPublicApi(file: string): PublicApiEntry[] {
  if (!existsSync(file)) return []
  const parsed = JSON.parse(readFileSync(file, 'utf8'))
  if (!Array.isArray(parsed)) throw new Error(`${file}: expected a JSON array of { package, name, reason }`)
  return parsed.map((e, i) => {
    if (
      typeof e?.package !== 'string' ||
      typeof e?.name !== 'string' ||
      typeof e?.reason !== 'string' ||
      e.reason.trim() === ''
    ) {
      throw new Error(`${file}: entry ${i} needs "package", "name" and a non-empty "reason"`)
    }
    return e as PublicApiEntry
  })
}

function main(argv: string[]): number {
  const i = argv.indexOf('--root')
  const root = i >= 0 ? resolve(argv[i + 1] ?? '.') : resolve(dirname(fileURLToPath(import.meta.url)), '..')
  const findings = checkExports(root, { publicApi: readPublicApi(join(root, 'scripts/public-api.json')) })
  for (const f of findings) process.stderr.write(`${f.file}:${f.line}: [${f.rule}] ${f.message}\n`)
  if (findings.length) {
    process.stderr.write(`exports: ${findings.length} finding(s)\n`)
    return 1
  }
  process.stdout.write('exports: ok\n')
  return 0
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  process.exitCode = main(process.argv.slice(2))
}
