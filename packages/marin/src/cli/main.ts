/** @module Entry point of the `marin` binary: real process I/O and exit code. */
import { scrubProcessOutput } from '@marin/rigging'
import { runCli } from './program.js'

// Steps run with --local, and scripts, may read secrets in this process: nothing printed holds one.
scrubProcessOutput()
const code = await runCli(process.argv.slice(2), {
  out: (line) => process.stdout.write(`${line}\n`),
  err: (line) => process.stderr.write(`${line}\n`),
  env: process.env,
})
process.stdout.write('', () => process.exit(code))
