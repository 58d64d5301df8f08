#!/usr/bin/env node
// The iris CLI runs from TypeScript source through tsx, like the rest of the workspace.
import { register } from 'tsx/esm/api'

register()
await import('../src/cli-main.ts')
