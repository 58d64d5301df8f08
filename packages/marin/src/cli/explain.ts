/** @module `marin explain STEP`: which versioned fields and dependencies changed since the step last completed. */
import type { Command } from 'commander'
import { openStorage } from '@marin/rigging'
import { MarinError } from '../errors.js'
import { prepare } from '../executor/executor.js'
import { explainStep, formatExplanation } from '../executor/explain.js'
import { loadExperiment } from '../executor/load-script.js'
import { prefixOf, type CliIo, type Run } from './io.js'

export function explainCommand(cmd: Command, io: CliIo, run: Run): void {
  cmd
    .argument('<step>', 'step name (or name_hash8)')
    .option(
      '--script <file>',
      'take the current version from this experiment script (default: the version the latest run planned)',
    )
    .option('--json', 'print JSON')
    .action((name: string, o: { script?: string; json?: boolean }) =>
      run(async () => {
        const storage = await openStorage(prefixOf(io))
        let current
        if (o.script) {
          const exp = await loadExperiment(o.script)
          const { order, versions } = prepare(exp.steps, storage)
          const s = order.find((x) => x.name === name || versions.get(x)!.nameHash === name)
          if (!s)
            throw new MarinError(
              'STEP_NOT_FOUND',
              `${o.script}: experiment "${exp.name}" has no step "${name}"; ` +
                `its steps: ${order.map((x) => x.name).join(', ')}`,
            )
          current = versions.get(s)!
        }
        const x = await explainStep(storage, name, current)
        if (o.json) io.out(JSON.stringify(x, null, 2))
        else for (const l of formatExplanation(x)) io.out(l)
        return 0
      }),
    )
}
