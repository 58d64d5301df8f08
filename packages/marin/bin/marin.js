#!/usr/bin/env node
// The marin CLI runs from TypeScript source through tsx, like the rest of the workspace;
// tsx also lets `marin run` import TypeScript experiment scripts.
import { register } from 'tsx/esm/api'

register()
await import('../src/cli/main.ts')
