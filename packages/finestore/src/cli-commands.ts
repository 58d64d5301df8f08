/** @module The commands of the `finestore` CLI, loaded when one of them runs. */
import { existsSync, statSync } from 'node:fs'
import { resolve } from 'node:path'
import { marinPrefix } from '@marin/rigging'
import { UsageError, type CliContext } from '@marin/rigging/cli'
import type { Command } from 'commander'
import { parseDuration, storeLocation } from './cli-args.js'
import { showGc, showManifest, showVerify, table } from './cli-format.js'
import type { CliIo } from './cli.js'
import { FinestoreError } from './errors.js'
import { formatRef } from './names.js'
import { formatAge, HEARTBEAT_MS } from './pins.js'
import { Progress, formatBytes as human } from './progress.js'
import { openStore, type Store } from './store.js'

type Define = (cmd: Command, ctx: CliContext) => void

/** The prefix's store URL, and a way to open it that the CLI closes when done. */
function storeOf(io: CliIo, ctx: CliContext): { url: () => string; open: () => Promise<Store> } {
  const loc = () =>
    storeLocation(marinPrefix({ prefix: ctx.globals<{ prefix?: string }>().prefix, env: io.env ?? process.env }))
  return {
    url: () => loc().url,
    open: async () => {
      const { url, localDir } = loc()
      if (localDir !== undefined && !existsSync(localDir)) {
        throw new FinestoreError(
          'NOT_FOUND',
          `no finestore store at ${localDir}; pass --prefix (or set MARIN_PREFIX) to the prefix that holds store/`,
        )
      }
      const store = await openStore({ url })
      ctx.defer(() => store.close())
      return store
    },
  }
}

const print = (io: CliIo) => (s: string) => io.out(`${s}\n`)

export const defineLs =
  (io: CliIo): Define =>
  (cmd, ctx) => {
    cmd
      .argument('[prefix]', 'only artifacts whose name starts with this', '')
      .option('--json', 'print JSON')
      .action(async (prefix: string, o: { json?: boolean }) => {
        const s = await storeOf(io, ctx).open()
        await s.syncCatalog()
        const rows = s.list(prefix)
        if (o.json) return print(io)(JSON.stringify(rows, null, 2))
        if (rows.length === 0) return print(io)('(no artifacts)')
        print(io)(
          table([
            ['ARTIFACT', 'HEAD', 'VERSIONS', 'KIND'],
            ...rows.map((r) => [r.name, String(r.head), String(r.versions), r.kind]),
          ]),
        )
      })
  }

export const defineShow =
  (io: CliIo): Define =>
  (cmd, ctx) => {
    cmd
      .argument('<ref>', 'ARTIFACT[@VERSION|@TAG]')
      .option('--json', 'print the manifest as JSON')
      .action(async (ref: string, o: { json?: boolean }) => {
        const s = await storeOf(io, ctx).open()
        const { artifact, version } = await s.resolve(ref)
        const m = await s.manifest(artifact, version)
        print(io)(o.json ? JSON.stringify(m, null, 2) : showManifest(m, await s.tags(artifact)))
      })
  }

export const defineLineage =
  (io: CliIo): Define =>
  (cmd, ctx) => {
    cmd
      .argument('<ref>', 'ARTIFACT[@VERSION|@TAG]')
      .option('--json', 'print JSON')
      .action(async (ref: string, o: { json?: boolean }) => {
        const s = await storeOf(io, ctx).open()
        await s.syncCatalog()
        const target = await s.resolve(ref)
        const ancestors = await s.ancestors(target)
        const descendants = await s.descendants(target)
        if (o.json) return print(io)(JSON.stringify({ ...target, ancestors, descendants }, null, 2))
        const fmt = (rows: typeof ancestors) =>
          rows.length
            ? rows.map((r) => `${'  '.repeat(r.depth)}${formatRef(r.artifact, r.version)}`).join('\n')
            : '  (none)'
        print(io)(
          `${formatRef(target.artifact, target.version)}\nancestors:\n` +
            `${fmt(ancestors)}\ndescendants:\n${fmt(descendants)}`,
        )
      })
  }

export const defineGc =
  (io: CliIo): Define =>
  (cmd, ctx) => {
    cmd
      .option('--dry-run', 'report what would be removed, remove nothing')
      .option('--grace <duration>', 'keep loose blobs and temp uploads no pin names younger than this', '1h')
      .option(
        '--expire-pins',
        'expire the pins of writers whose process is gone (on this host) ' +
          'now, freeing their temp uploads and staged blobs',
      )
      .option(
        '--older-than <duration>',
        `with --expire-pins: also expire pins without a heartbeat for ` +
          `this long (any host; live writers beat every ` +
          `${formatAge(HEARTBEAT_MS(Infinity))}, so at least 2m)`,
      )
      .option('--json', 'print JSON')
      .action(
        async (o: { dryRun?: boolean; grace: string; expirePins?: boolean; olderThan?: string; json?: boolean }) => {
          const graceMs = parseDuration(o.grace)
          let txnTtlMs: number | undefined
          if (o.olderThan !== undefined) {
            if (!o.expirePins)
              throw new UsageError('--older-than needs --expire-pins (it says which pins to expire by age)')
            txnTtlMs = parseDuration(o.olderThan, '--older-than')
            if (txnTtlMs < 120_000)
              throw new UsageError(
                `--older-than "${o.olderThan}" is too short: live writers ` +
                  `refresh their pins every minute; use 2m or more`,
              )
          }
          const s = await storeOf(io, ctx).open()
          const r = await s.gc({
            dryRun: o.dryRun ?? false,
            graceMs,
            expireGoneWriters: o.expirePins ?? false,
            ...(txnTtlMs !== undefined ? { txnTtlMs } : {}),
          })
          print(io)(o.json ? JSON.stringify(r, null, 2) : showGc(r))
        },
      )
  }

export const defineVerify =
  (io: CliIo): Define =>
  (cmd, ctx) => {
    cmd
      .option(
        '--repair-from <dir>',
        'restore damaged or missing blobs from files of this local ' +
          'folder (any names, any depth) whose bytes match',
      )
      .option('--json', 'print JSON')
      .action(async (o: { repairFrom?: string; json?: boolean }) => {
        const from = o.repairFrom === undefined ? undefined : resolve(o.repairFrom)
        if (from !== undefined && !statSync(from, { throwIfNoEntry: false })?.isDirectory()) {
          throw new UsageError(
            `--repair-from ${from} is not a folder; pass the folder that holds good copies of the files`,
          )
        }
        const where = storeOf(io, ctx)
        const s = await where.open()
        let progress: Progress | undefined
        const r = await s.verify({
          ...(from !== undefined ? { repairFrom: from } : {}),
          onStart: (blobs, bytes) => {
            io.err(`verifying ${blobs} blobs (${human(bytes)}) in ${where.url()}\n`)
            progress = new Progress('verified', 'blobs', blobs, bytes, { write: io.err, tty: io.errIsTty ?? false })
          },
          onProgress: (done, bytes) => progress?.update(done, bytes),
        })
        progress?.finish()
        print(io)(o.json ? JSON.stringify(r, null, 2) : showVerify(r, from))
        if (r.damaged.length > 0 || r.unreadableManifests.length > 0) ctx.exitWith(1)
      })
  }

export const defineRebuildCatalog =
  (io: CliIo): Define =>
  (cmd, ctx) => {
    cmd.action(async () => {
      const r = await (await storeOf(io, ctx).open()).rebuildCatalog()
      print(io)(`indexed ${r.artifacts} artifacts, ${r.versions} versions, ${r.tags} tags`)
      for (const u of r.unreadable) print(io)(`unreadable: ${u.error}`)
    })
  }
