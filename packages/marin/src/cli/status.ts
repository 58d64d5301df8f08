/** @module `marin status [EXPERIMENT]`: the latest run of each experiment, or the steps of one. */
import type { Command } from 'commander'
import { MARIN_LAYOUT, openStorage, type Storage } from '@marin/rigging'
import { MarinError } from '../errors.js'
import type { ExperimentRecord } from '../executor/executor.js'
import { readStatus } from '../executor/status-files.js'
import { prefixOf, type CliIo, type Run } from './io.js'

/** `experiments/<name>/<run>.json` (rigging's `experimentRecordPath`). */
const RECORD = new RegExp(`^${MARIN_LAYOUT.experiments}/([^/]+)/([^/]+)\\.json$`)

/** Runs of each experiment under the prefix, oldest first. */
export async function experimentRuns(storage: Storage): Promise<Map<string, string[]>> {
  const runs = new Map<string, string[]>()
  for await (const o of storage.list(`${MARIN_LAYOUT.experiments}/`)) {
    const m = RECORD.exec(o.path)
    if (!m) continue
    runs.set(m[1]!, [...(runs.get(m[1]!) ?? []), o.path])
  }
  for (const v of runs.values()) v.sort()
  return runs
}

export async function latestRecord(storage: Storage, name: string): Promise<ExperimentRecord> {
  const runs = await experimentRuns(storage)
  const paths = runs.get(name)
  if (!paths?.length) {
    const known = [...runs.keys()].sort()
    throw new MarinError(
      'EXPERIMENT_NOT_FOUND',
      `no experiment named "${name}" has run under ${storage.url}; ` +
        `${known.length ? `known: ${known.join(', ')}` : 'none has run there yet'}`,
    )
  }
  return JSON.parse(await storage.readText(paths[paths.length - 1]!)) as ExperimentRecord
}

export function statusCommand(cmd: Command, io: CliIo, run: Run): void {
  cmd
    .argument('[experiment]', 'experiment name')
    .option('--json', 'print JSON')
    .action((name: string | undefined, o: { json?: boolean }) =>
      run(async () => {
        const storage = await openStorage(prefixOf(io))
        if (!name) {
          const runs = await experimentRuns(storage)
          const rows: ExperimentRecord[] = []
          for (const [exp] of [...runs].sort()) rows.push(await latestRecord(storage, exp))
          if (o.json)
            io.out(
              JSON.stringify(
                rows.map((r) => ({ experiment: r.experiment, run: r.run, status: r.status, finishedAt: r.finishedAt })),
                null,
                2,
              ),
            )
          else if (rows.length === 0) io.out(`no experiment has run under ${storage.url}`)
          else
            for (const r of rows)
              io.out(
                `${r.experiment.padEnd(24)} ${r.status.padEnd(8)} ${r.finishedAt}` +
                  `  ${r.steps.length} steps  run ${r.run}`,
              )
          return 0
        }
        const r = await latestRecord(storage, name)
        const steps = await Promise.all(
          r.steps.map(async (s) => ({ ...s, now: (await readStatus(storage, s.nameHash))?.status ?? 'NONE' })),
        )
        if (o.json) {
          io.out(JSON.stringify({ ...r, steps }, null, 2))
          return 0
        }
        io.out(`${r.experiment}: ${r.status} (run ${r.run}, ${r.startedAt} .. ${r.finishedAt})`)
        const w = Math.max(...steps.map((s) => s.nameHash.length))
        for (const s of steps) {
          io.out(
            (
              `  ${s.nameHash.padEnd(w)}  ${s.status.padEnd(10)} now ` +
              `${s.now.padEnd(10)} ` +
              `${s.seconds !== undefined ? `${s.seconds.toFixed(1)} s` : ''}`
            ).trimEnd(),
          )
        }
        return r.status === 'FAILED' ? 1 : 0
      }),
    )
}
