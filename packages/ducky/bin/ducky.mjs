#!/usr/bin/env node
// The `ducky` command: runs the TypeScript sources through tsx.
import { register } from 'tsx/esm/api'

register()
const { runCli } = await import('../src/cli.ts')
const stopped = new Promise((resolve) => {
  process.once('SIGINT', resolve)
  process.once('SIGTERM', resolve)
})
process.exitCode = await runCli(process.argv.slice(2), {
  out: (line) => process.stdout.write(`${line}\n`),
  err: (line) => process.stderr.write(`${line}\n`),
  env: process.env,
  stopped,
})
process.exit()
