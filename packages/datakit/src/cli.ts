/**
 * @module The `datakit` command: `datakit [--prefix P] ls [--json]`, `datakit show NAME[@VERSION] [--json]`.
 * Exit 0 ok, 1 failure, 2 bad usage.
 */
import { Command, CommanderError } from 'commander'
import { openStore, storeUrl } from '@marin/finestore'
import { pathToFileURL } from 'node:url'
import { datasetNames, parseDatasetRef, resolveVersion } from './dataset/open-dataset.js'
import { DatakitError } from './errors.js'
import { datasetArtifact, resolvePrefix } from './store.js'

type Out = { out: (s: string) => void; err: (s: string) => void }

/** Runs the CLI on `argv` (without `node script`); resolves to the exit code. */
export async function runCli(argv: readonly string[], io: Out = { out: (s) => process.stdout.write(s), err: (s) => process.stderr.write(s) }): Promise<number> {
  let code = 0
  const program = new Command('datakit')
    .description('versioned datasets in the Marin store')
    .option('--prefix <dir>', 'Marin prefix (default $MARIN_PREFIX, then ./.marin)')
    .exitOverride()
    .configureOutput({ writeOut: io.out, writeErr: io.err })
  const store = async () => openStore({ url: storeUrl(pathToFileURL(resolvePrefix(program.opts<{ prefix?: string }>().prefix)).href) })

  program.command('ls').description('list datasets with their latest version').option('--json', 'JSON output').action(async (o: { json?: boolean }) => {
    const s = await store()
    try {
      const rows = []
      for (const name of await datasetNames(s)) {
        const artifact = datasetArtifact(name)
        const head = (await s.head(artifact))!
        const m = await s.manifest(artifact, head)
        rows.push({ name, latest: head, versions: (await s.versions(artifact)).length, records: m.metadata.records, bytes: m.metadata.bytes })
      }
      if (o.json) io.out(`${JSON.stringify(rows)}\n`)
      else if (rows.length === 0) io.out('no datasets\n')
      else for (const r of rows) io.out(`${r.name}@${r.latest}\t${r.versions} version(s)\t${String(r.records)} records\t${String(r.bytes)} bytes\n`)
    } finally {
      s.close()
    }
  })

  program.command('show').description('show one dataset version (latest unless NAME@VERSION)').argument('<ref>', 'NAME[@VERSION]').option('--json', 'JSON output').action(async (ref: string, o: { json?: boolean }) => {
    const { name, version } = parseDatasetRef(ref)
    const s = await store()
    try {
      const artifact = datasetArtifact(name)
      const v = await resolveVersion(s, artifact, version)
      const m = await s.manifest(artifact, v)
      const info = { name, version: v, createdAt: m.createdAt, metadata: m.metadata, config: m.config, lineage: m.lineage, files: Object.keys(m.files).sort() }
      if (o.json) io.out(`${JSON.stringify(info, null, 2)}\n`)
      else {
        io.out(`${name}@${v}  (created ${m.createdAt})\n`)
        for (const [k, val] of Object.entries(m.metadata)) io.out(`  ${k}: ${typeof val === 'object' ? JSON.stringify(val) : String(val)}\n`)
        io.out(`  lineage: ${m.lineage.map((l) => `${l.artifact}@${l.version}`).join(', ') || '(none)'}\n`)
        io.out(`  files: ${info.files.join(', ')}\n`)
      }
    } finally {
      s.close()
    }
  })

  try {
    await program.parseAsync([...argv], { from: 'user' })
  } catch (err) {
    if (err instanceof CommanderError) return err.exitCode === 0 ? 0 : 2
    if (err instanceof DatakitError) {
      io.err(`datakit: ${err.message}\n`)
      return err.code === 'INVALID_ARGUMENT' ? 2 : 1
    }
    io.err(`datakit: ${(err as Error).message}\n`)
    code = 1
  }
  return code
}
