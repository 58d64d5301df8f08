/** @module Entry point of the `iris` binary: real process I/O, signals, exit code. */
import { runCli } from './cli.js'

const stopped = new Promise<void>((resolve) => {
  process.once('SIGINT', () => resolve())
  process.once('SIGTERM', () => resolve())
})
const code = await runCli(process.argv.slice(2), {
  out: (line) => process.stdout.write(`${line}\n`),
  err: (line) => process.stderr.write(`${line}\n`),
  env: process.env,
  stopped,
})
// Let stdout drain, then leave even if a client channel still holds the loop.
process.stdout.write('', () => process.exit(code))
