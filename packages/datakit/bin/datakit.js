#!/usr/bin/env node
// The `datakit` command. The package ships TypeScript sources, so they run through tsx.
import { register } from 'tsx/esm/api'

register()
const { runCli } = await import('../src/cli.ts')
process.exitCode = await runCli(process.argv.slice(2))
