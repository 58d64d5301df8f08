/**
 * @module The `finestore` CLI: `ls`, `show`, `lineage`, `gc`, `verify`, `rebuild-catalog`.
 * The store is `$MARIN_PREFIX/store` (`--prefix` wins; default `./.marin`).
 * Exit codes: 0 ok, 1 failure (not found, corrupt data), 2 bad usage.
 */
import { existsSync, statSync } from 'node:fs'
import { resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { Command, CommanderError, Option } from 'commander'
import { FinestoreError } from './errors.js'
import type { GcReport } from './gc.js'
import type { Manifest } from './manifest.js'
import { formatRef } from './names.js'
import { formatAge, HEARTBEAT_MS } from './pins.js'
import { Progress, formatBytes as human } from './progress.js'
import { openStore, type Store } from './store.js'
import type { VerifyReport } from './verify.js'

export type CliIo = {
  readonly out: (s: string) => void
  readonly err: (s: string) => void
  readonly env?: NodeJS.ProcessEnv
  /** stderr is a terminal: progress is a bar redrawn in place instead of lines. @default false */
  readonly errIsTty?: boolean
}

const STDIO: CliIo = { out: (s) => process.stdout.write(s), err: (s) => process.stderr.write(s), errIsTty: process.stderr.isTTY === true }

const USAGE_CODES = new Set(['INVALID_NAME', 'INVALID_REF', 'INVALID_PATH', 'INVALID_HASH', 'INVALID_INPUT'])

class UsageError extends Error {}

/** `1h`, `30m`, `10s`, `250ms` or a plain number of milliseconds. */
export function parseDuration(text: string, flag = '--grace'): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)?$/.exec(text.trim())
  if (!m) throw new UsageError(`${flag} "${text}" is not a duration; use e.g. 0, 30s, 10m, 1h`)
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

function showGc(r: GcReport): string {
  const verb = r.dryRun ? 'would remove' : 'removed'
  const tmpBytes = r.tmpsRemoved.reduce((s, t) => s + t.size, 0)
  const lines = [
    `${verb} ${r.deleted.length} blobs (${human(r.bytesDeleted)}) and ${r.tmpsDeleted} temp uploads (${human(tmpBytes)}): ${r.dryRun ? 'would free' : 'freed'} ${human(r.bytesFreed)}; ` +
      `scanned ${r.blobsScanned} blobs: ${r.referenced} referenced, ${r.pinned} pinned by open transactions, ${r.young} younger than the grace period`,
  ]
  for (const d of r.deleted) lines.push(`  ${d.hash}  ${human(d.size)}`)
  const who = (p: GcReport['pinsHeld'][number]) =>
    `txn ${p.id}  ${p.artifact ?? '(unreadable record)'}  pid ${p.pid ?? '?'} on ${p.host ?? '?'}${p.writerGone === true ? ' (gone)' : p.writerGone === false ? ' (running)' : ''}`
  if (r.pinsHeld.length > 0) {
    lines.push(`pins held (${r.pinsHeld.length}):`)
    for (const p of r.pinsHeld) lines.push(`  ${who(p)}  since ${p.startedAt ?? '?'}  until ${p.expiresAt} (last heartbeat ${p.heartbeatAt})  pins ${p.blobs} blobs, ${p.tmps} temp uploads`)
  }
  if (r.pinsExpired.length > 0) {
    lines.push(`pins ${r.dryRun ? 'that would expire' : 'expired'} (${r.pinsExpired.length}):`)
    for (const p of r.pinsExpired) lines.push(`  ${who(p)}: ${p.reason}`)
  }
  if (r.tmpsKept.length > 0) {
    lines.push(`temp uploads kept (${r.tmpsKept.length}):`)
    for (const t of r.tmpsKept) lines.push(`  ${t.path}  ${human(t.size)}  ${t.reason}`)
  }
  if (r.tmpsRemoved.length > 0) {
    lines.push(`temp uploads ${r.dryRun ? 'that would be removed' : 'removed'} (${r.tmpsRemoved.length}):`)
    for (const t of r.tmpsRemoved) lines.push(`  ${t.path}  ${human(t.size)}`)
  }
  if (r.pinsHeld.some((p) => p.writerGone !== false)) {
    lines.push('pins of writers that are gone expire now with `finestore gc --expire-pins`; add `--older-than 10m` for pins without a recent heartbeat from other hosts')
  }
  if (r.skipped) lines.push(`skipped: ${r.skipped}`)
  return lines.join('\n')
}

function showVerify(r: VerifyReport, from: string | undefined): string {
  const lines: string[] = []
  for (const d of r.repaired) lines.push(`repaired ${d.hash} from ${d.from}`)
  for (const d of r.damaged) {
    lines.push(
      d.problem === 'corrupt'
        ? `${d.hash}  corrupt: its ${d.storedSize} bytes hash to ${d.actualHash}${d.expectedSize !== undefined ? ` (expected ${d.expectedSize} bytes)` : ''}`
        : `${d.hash}  missing${d.expectedSize !== undefined ? ` (${d.expectedSize} bytes)` : ''}`,
    )
    for (const u of d.usedBy) lines.push(`    ${u.ref}  ${u.file}`)
    if (d.usedBy.length === 0) lines.push('    (no version uses it)')
  }
  for (const u of r.unreadableManifests) lines.push(`unreadable manifest: ${u.error}`)
  if (r.damaged.length === 0) {
    lines.push(`all ${r.blobsChecked + r.repaired.filter((d) => d.problem === 'missing').length} blobs intact (${human(r.bytesChecked)} rehashed)`)
    if (r.unreadableManifests.length > 0) lines.push(`but ${r.unreadableManifests.length} manifests are unreadable: restore them from a copy of the store`)
    return lines.join('\n')
  }
  if (from !== undefined) lines.push(`not repaired: no file under ${from} has the right bytes of ${r.damaged.length} damaged blobs`)
  lines.push(
    `${r.damaged.length} damaged blobs break ${r.brokenVersions.length} versions${r.brokenVersions.length ? `: ${r.brokenVersions.join(', ')}` : ''}. ` +
      'Restore them with `finestore verify --repair-from <folder with good copies>`, or commit the same files again',
  )
  return lines.join('\n')
}

/** Runs the CLI on `argv` (without `node` and the script) and returns the exit code. */
export async function runCli(argv: readonly string[], io: CliIo = STDIO): Promise<number> {
  const env = io.env ?? process.env
  let store: Store | undefined
  // Set by commands that ran fine but found a failure to report (verify with damaged blobs).
  let exitCode = 0
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
    .description('remove blobs no version references (safe while others commit); report what is kept and why')
    .option('--dry-run', 'report what would be removed, remove nothing')
    .option('--grace <duration>', 'keep loose blobs and temp uploads no pin names younger than this', '1h')
    .option('--expire-pins', 'expire the pins of writers whose process is gone (on this host) now, freeing their temp uploads and staged blobs')
    .option('--older-than <duration>', `with --expire-pins: also expire pins without a heartbeat for this long (any host; live writers beat every ${formatAge(HEARTBEAT_MS(Infinity))}, so at least 2m)`)
    .option('--json', 'print JSON')
    .action(async (o: { dryRun?: boolean; grace: string; expirePins?: boolean; olderThan?: string; json?: boolean }) => {
      const graceMs = parseDuration(o.grace)
      let txnTtlMs: number | undefined
      if (o.olderThan !== undefined) {
        if (!o.expirePins) throw new UsageError('--older-than needs --expire-pins (it says which pins to expire by age)')
        txnTtlMs = parseDuration(o.olderThan, '--older-than')
        if (txnTtlMs < 120_000) throw new UsageError(`--older-than "${o.olderThan}" is too short: live writers refresh their pins every minute; use 2m or more`)
      }
      const s = await open(prefixOf())
      const r = await s.gc({ dryRun: o.dryRun ?? false, graceMs, expireGoneWriters: o.expirePins ?? false, ...(txnTtlMs !== undefined ? { txnTtlMs } : {}) })
      print(o.json ? JSON.stringify(r, null, 2) : showGc(r))
    })

  program
    .command('verify')
    .description('rehash every blob; list damaged (corrupt or missing) blobs and the versions they break; exit 1 if any (or if a manifest is unreadable)')
    .option('--repair-from <dir>', 'restore damaged or missing blobs from files of this local folder (any names, any depth) whose bytes match')
    .option('--json', 'print JSON')
    .action(async (o: { repairFrom?: string; json?: boolean }) => {
      const from = o.repairFrom === undefined ? undefined : resolve(o.repairFrom)
      if (from !== undefined && !statSync(from, { throwIfNoEntry: false })?.isDirectory()) {
        throw new UsageError(`--repair-from ${from} is not a folder; pass the folder that holds good copies of the files`)
      }
      const s = await open(prefixOf())
      let progress: Progress | undefined
      const r = await s.verify({
        ...(from !== undefined ? { repairFrom: from } : {}),
        onStart: (blobs, bytes) => {
          io.err(`verifying ${blobs} blobs (${human(bytes)}) in ${storeLocation(prefixOf()).url}\n`)
          progress = new Progress('verified', 'blobs', blobs, bytes, { write: io.err, tty: io.errIsTty ?? false })
        },
        onProgress: (done, bytes) => progress?.update(done, bytes),
      })
      progress?.finish()
      print(o.json ? JSON.stringify(r, null, 2) : showVerify(r, from))
      if (r.damaged.length > 0 || r.unreadableManifests.length > 0) exitCode = 1
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
    return exitCode
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
