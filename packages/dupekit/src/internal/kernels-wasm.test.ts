import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { expect, test } from 'vitest'
import { compileKernels, renderModule } from '../../assembly/build.js'

test('the committed kernels binary is a fresh build of assembly/kernels.ts', () => {
  const committed = readFileSync(fileURLToPath(new URL('./kernels-wasm.ts', import.meta.url)), 'utf8')
  expect(
    committed === renderModule(compileKernels()),
    'kernels-wasm.ts is stale: run `pnpm --filter @marin/dupekit build:wasm`',
  ).toBe(true)
}, 120_000)
