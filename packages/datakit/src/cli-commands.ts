/** @module The commands of the `datakit` CLI, loaded when one of them runs. */
import { formatBytes, formatTable, type Store } from '@marin/finestore'
import type { CliContext, CliIo } from '@marin/rigging/cli'
import type { Command } from 'commander'
import { datasetNames, parseDatasetRef, resolveVersion } from './dataset/open-dataset.js'
import { datasetArtifact, withStore } from './store.js'

const withPrefixStore = <R>(ctx: CliContext, fn: (s: Store) => Promise<R>) =>
  withStore({ prefix: ctx.globals<{ prefix?: string }>().prefix }, fn)

export const defineLs =
  (io: CliIo) =>
  (cmd: Command, ctx: CliContext): void => {
    cmd.option('--json', 'JSON output').action((o: { json?: boolean }) =>
      withPrefixStore(ctx, async (s) => {
        const rows = []
        for (const name of await datasetNames(s)) {
          const artifact = datasetArtifact(name)
          const head = (await s.head(artifact))!
          const m = await s.manifest(artifact, head)
          rows.push({
            name: artifact,
            latest: head,
            versions: (await s.versions(artifact)).length,
            records: m.metadata.records,
            bytes: m.metadata.bytes,
          })
        }
        if (o.json) io.out(`${JSON.stringify(rows)}\n`)
        else if (rows.length === 0) io.out('no datasets\n')
        else
          io.out(
            `${formatTable([
              ['DATASET', 'HEAD', 'VERSIONS', 'RECORDS', 'SIZE'],
              ...rows.map((r) => [
                r.name,
                String(r.latest),
                String(r.versions),
                String(r.records ?? '?'),
                typeof r.bytes === 'number' ? formatBytes(r.bytes) : '?',
              ]),
            ])}\n`,
          )
      }),
    )
  }

export const defineShow =
  (io: CliIo) =>
  (cmd: Command, ctx: CliContext): void => {
    cmd
      .argument('<ref>', 'NAME[@VERSION]')
      .option('--json', 'JSON output')
      .action((ref: string, o: { json?: boolean }) => {
        const { name, version } = parseDatasetRef(ref)
        return withPrefixStore(ctx, async (s) => {
          const artifact = datasetArtifact(name)
          const v = await resolveVersion(s, artifact, version)
          const m = await s.manifest(artifact, v)
          const info = {
            name: artifact,
            version: v,
            createdAt: m.createdAt,
            metadata: m.metadata,
            config: m.config,
            lineage: m.lineage,
            files: Object.keys(m.files).sort(),
          }
          if (o.json) io.out(`${JSON.stringify(info, null, 2)}\n`)
          else {
            io.out(`${artifact}@${v}  (created ${m.createdAt})\n`)
            for (const [k, val] of Object.entries(m.metadata))
              io.out(`  ${k}: ${typeof val === 'object' ? JSON.stringify(val) : String(val)}\n`)
            io.out(`  lineage: ${m.lineage.map((l) => `${l.artifact}@${l.version}`).join(', ') || '(none)'}\n`)
            io.out(`  files: ${info.files.join(', ')}\n`)
          }
        })
      })
  }
