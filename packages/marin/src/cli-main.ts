/** @module Entry point of the `marin` binary: real process I/O and exit code. */
import { runCli } from './cli.js'

const code = await runCli(process.argv.slice(2), {
  out: (line) => process.stdout.write(`${line}\n`),
  err: (line) => process.stderr.write(`${line}\n`),
  env: process.env,
})
process.stdout.write('', () => process.exit(code))
