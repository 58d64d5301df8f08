/** @module `marin run FILE`: the flags and behaviour of `experiment.main()`, on a script's default export. */
import type { Command } from 'commander'
import { loadExperiment } from '../executor/load-script.js'
import { runWithFlags, withRunFlags, type RunFlags } from '../executor/main.js'
import type { CliIo, Run } from './io.js'

export function runCommand(cmd: Command, io: CliIo, run: Run): void {
  withRunFlags(cmd.argument('<file>', 'experiment script, e.g. experiments/x.ts')).action(
    (file: string, flags: RunFlags) =>
      run(async () => {
        const record = await runWithFlags(await loadExperiment(file), flags, io)
        return record.status === 'FAILED' ? 1 : 0
      }),
  )
}
