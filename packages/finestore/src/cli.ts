/**
 * @module The `finestore` CLI: `ls`, `show`, `lineage`, `gc`, `rebuild-catalog`.
 * The store is `$MARIN_PREFIX/store` (`--prefix` wins; default `./.marin`).
 * Exit codes: 0 ok, 1 failure (not found, corrupt data), 2 bad usage.
 */
import { existsSync } from 'node:fs'
import { resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { Command, CommanderError, Option } from 'commander'
import { FinestoreError } from './errors.js'
import type { Manifest } from './manifest.js'
import { formatRef } from './names.js'
import { openStore, type Store } from './store.js'

export type CliIo = { readonly out: (s: string) => void; readonly err: (s: string) => void; readonly env?: NodeJS.ProcessEnv }

const USAGE_CODES = new Set(['INVALID_NAME', 'INVALID_REF', 'INVALID_PATH', 'INVALID_HASH', 'INVALID_INPUT'])

class UsageError extends Error {}

/** `1h`, `30m`, `10s`, `250ms` or a plain number of milliseconds. */
export function parseDuration(text: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)?$/.exec(text.trim())
  if (!m) throw new UsageError(`--grace "${text}" is not a duration; use e.g. 0, 30s, 10m, 1h`)
  const unit = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[(m[2] ?? 'ms') as 'ms']
  return Number(m[1]) * unit
}

/** The store URL for a prefix (a local path or a storage URL). */
export function storeLocation(prefix: string): { url: string; localDir?: string } {
  if (/^[a-zA-Z][a-zA-Z0-9+.-]*:\/\//.test(prefix)) {
    if (prefix.startsWith('file://')) {
      const dir = resolve(new URL(prefix).pathname, 'store')
      return { url: pathToFileURL(dir).href, localDir: dir }
    }
    return { url: `${prefix.replace(/\/+$/, '')}/store` }
  }
  const dir = resolve(prefix, 'store')
  return { url: pathToFileURL(dir).href, localDir: dir }
}

const human = (n: number): string => {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB']
  let i = 0
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024
    i++
  }
  return `${i === 0 ? n : n.toFixed(1)} ${units[i]}`
}

function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => r[c]!.length)))
  return rows.map((r) => r.map((cell, c) => (c === r.length - 1 ? cell : cell.padEnd(widths[c]!))).join('  ')).join('\n')
}

function showManifest(m: Manifest, tags: Record<string, number>): string {
  const files = Object.entries(m.files)
  const lines = [
    `${formatRef(m.artifact, m.version)}`,
    `  kind:     ${m.kind}`,
    `  created:  ${m.createdAt}`,
    `  parent:   ${m.parent ?? '(none)'}`,
    ...(m.message ? [`  message:  ${m.message}`] : []),
    `  tags:     ${Object.entries(tags).filter(([, v]) => v === m.version).map(([t]) => t).join(', ') || '(none)'}`,
    `  lineage:  ${m.lineage.map((l) => formatRef(l.artifact, l.version)).join(', ') || '(none)'}`,
    `  metadata: ${JSON.stringify(m.metadata)}`,
    `  config:   ${JSON.stringify(m.config)}`,
    `  files:    ${files.length} (${human(files.reduce((s, [, f]) => s + f.size, 0))})`,
  ]
  for (const [path, f] of files) lines.push(`    ${path}  ${human(f.size)}  sha256:${f.blob.slice(0, 12)}`)
  return lines.join('\n')
}

/** Runs the CLI on `argv` (without `node` and the script) and returns the exit code. */
export async function runCli(argv: readonly string[], io: CliIo = { out: (s) => process.stdout.write(s), err: (s) => process.stderr.write(s) }): Promise<number> {
  const env = io.env ?? process.env
  let store: Store | undefined
  const print = (s: string) => io.out(`${s}\n`)
  const open = async (prefix: string): Promise<Store> => {
    const loc = storeLocation(prefix)
    if (loc.localDir !== undefined && !existsSync(loc.localDir)) {
      throw new FinestoreError('NOT_FOUND', `no finestore store at ${loc.localDir}; pass --prefix (or set MARIN_PREFIX) to the prefix that holds store/`)
    }
    store = await openStore({ url: loc.url })
    return store
  }
  const program = new Command('finestore')
    .description('Inspect and maintain the finestore artifact store under $MARIN_PREFIX/store.')
    .addOption(new Option('--prefix <prefix>', 'marin prefix (local path or storage URL) holding store/').env('MARIN_PREFIX').default('./.marin'))
    .exitOverride()
    .configureOutput({ writeOut: io.out, writeErr: io.err })
    .showHelpAfterError()
  const prefixOf = () => program.opts<{ prefix: string }>().prefix

  program
    .command('ls')
    .description('list artifacts (HEAD version, number of versions, kind)')
    .argument('[prefix]', 'only artifacts whose name starts with this', '')
    .option('--json', 'print JSON')
    .action(async (prefix: string, o: { json?: boolean }) => {
      const s = await open(prefixOf())
      await s.syncCatalog()
      const rows = s.list(prefix)
      if (o.json) return print(JSON.stringify(rows, null, 2))
      if (rows.length === 0) return print('(no artifacts)')
      print(table([['ARTIFACT', 'HEAD', 'VERSIONS', 'KIND'], ...rows.map((r) => [r.name, String(r.head), String(r.versions), r.kind])]))
    })

  program
    .command('show')
    .description('show one version: metadata, config, lineage, files')
    .argument('<ref>', 'ARTIFACT[@VERSION|@TAG]')
    .option('--json', 'print the manifest as JSON')
    .action(async (ref: string, o: { json?: boolean }) => {
      const s = await open(prefixOf())
      const { artifact, version } = await s.resolve(ref)
      const m = await s.manifest(artifact, version)
      print(o.json ? JSON.stringify(m, null, 2) : showManifest(m, await s.tags(artifact)))
    })

  program
    .command('lineage')
    .description('what a version was derived from (ancestors) and what was derived from it (descendants)')
    .argument('<ref>', 'ARTIFACT[@VERSION|@TAG]')
    .option('--json', 'print JSON')
    .action(async (ref: string, o: { json?: boolean }) => {
      const s = await open(prefixOf())
      await s.syncCatalog()
      const target = await s.resolve(ref)
      const ancestors = await s.ancestors(target)
      const descendants = await s.descendants(target)
      if (o.json) return print(JSON.stringify({ ...target, ancestors, descendants }, null, 2))
      const fmt = (rows: typeof ancestors) => (rows.length ? rows.map((r) => `${'  '.repeat(r.depth)}${formatRef(r.artifact, r.version)}`).join('\n') : '  (none)')
      print(`${formatRef(target.artifact, target.version)}\nancestors:\n${fmt(ancestors)}\ndescendants:\n${fmt(descendants)}`)
    })

  program
    .command('gc')
    .description('remove blobs no version references (safe while others commit)')
    .option('--dry-run', 'report what would be removed, remove nothing')
    .option('--grace <duration>', 'keep loose blobs and temp uploads younger than this', '1h')
    .option('--json', 'print JSON')
    .action(async (o: { dryRun?: boolean; grace: string; json?: boolean }) => {
      const graceMs = parseDuration(o.grace)
      const s = await open(prefixOf())
      const r = await s.gc({ dryRun: o.dryRun ?? false, graceMs })
      if (o.json) return print(JSON.stringify(r, null, 2))
      const verb = r.dryRun ? 'would remove' : 'removed'
      print(`${verb} ${r.deleted.length} blobs (${human(r.bytesDeleted)}) and ${r.tmpsDeleted} temp uploads; scanned ${r.blobsScanned} blobs: ${r.referenced} referenced, ${r.pinned} pinned by open transactions, ${r.young} younger than the grace period`)
      for (const d of r.deleted) print(`  ${d.hash}  ${human(d.size)}`)
      if (r.skipped) print(`skipped: ${r.skipped}`)
    })

  program
    .command('rebuild-catalog')
    .description('recreate catalog.sqlite from storage')
    .action(async () => {
      const r = await (await open(prefixOf())).rebuildCatalog()
      print(`indexed ${r.artifacts} artifacts, ${r.versions} versions, ${r.tags} tags`)
      for (const u of r.unreadable) print(`unreadable: ${u.error}`)
    })

  try {
    // commander reads MARIN_PREFIX through Option.env from process.env.
    const saved = process.env.MARIN_PREFIX
    if (env !== process.env) {
      if (env.MARIN_PREFIX === undefined) delete process.env.MARIN_PREFIX
      else process.env.MARIN_PREFIX = env.MARIN_PREFIX
    }
    try {
      await program.parseAsync([...argv], { from: 'user' })
    } finally {
      if (env !== process.env) {
        if (saved === undefined) delete process.env.MARIN_PREFIX
        else process.env.MARIN_PREFIX = saved
      }
    }
    return 0
  } catch (err) {
    if (err instanceof CommanderError) return err.exitCode === 0 ? 0 : 2
    if (err instanceof UsageError) {
      io.err(`finestore: ${err.message}\n`)
      return 2
    }
    if (err instanceof FinestoreError) {
      io.err(`finestore: ${err.message}\n`)
      return USAGE_CODES.has(err.code) ? 2 : 1
    }
    io.err(`finestore: ${(err as Error).message}\n`)
    return 1
  } finally {
    store?.close()
  }
}
