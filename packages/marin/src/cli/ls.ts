/** @module `marin ls`: the steps under the prefix, each version with its status and output. */
import type { Command } from 'commander'
import { openStorage } from '@marin/rigging'
import { historyNames, readHistory, readStatus } from '../executor/status-files.js'
import { outputPathOf } from '../executor/executor.js'
import { prefixOf, type CliIo, type Run } from './io.js'

export function lsCommand(cmd: Command, io: CliIo, run: Run): void {
  cmd.option('--json', 'print JSON').action((o: { json?: boolean }) =>
    run(async () => {
      const storage = await openStorage(prefixOf(io))
      const rows: { name: string; nameHash: string; status: string; at: string; outputPath: string }[] = []
      for (const name of await historyNames(storage)) {
        for (const e of await readHistory(storage, name)) {
          const st = await readStatus(storage, e.nameHash)
          rows.push({
            name,
            nameHash: e.nameHash,
            status: st?.status ?? 'NONE',
            at: st ? new Date(st.at).toISOString() : e.at,
            outputPath: outputPathOf(storage, e.nameHash),
          })
        }
      }
      if (o.json) io.out(JSON.stringify(rows, null, 2))
      else if (rows.length === 0) io.out(`no steps under ${storage.url}`)
      else {
        const w = Math.max(...rows.map((r) => r.nameHash.length))
        for (const r of rows) io.out(`${r.nameHash.padEnd(w)}  ${r.status.padEnd(10)} ${r.at}  ${r.outputPath}`)
      }
      return 0
    }),
  )
}
