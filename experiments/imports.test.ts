/**
 * What an experiment file may import, resolved as Node resolves it from `experiments/` (no test
 * runner in between): every workspace package, and tfjs and zod (an architecture's config schema),
 * dependencies of the workspace root at the versions the packages use.
 */
import { spawnSync } from 'node:child_process'
import { expect, test } from 'vitest'

test('an experiment imports @tensorflow/tfjs, zod and the workspace packages by name', () => {
  const probe = [
    "const tf = await import('@tensorflow/tfjs')",
    "const { z } = await import('zod')",
    "z.strictObject({ type: z.literal('x') }).parse({ type: 'x' })",
    "const { createRequire } = await import('node:module')",
    "const req = createRequire(process.cwd() + '/x.js')",
    "for (const p of ['@marin/levanter', '@marin/marin', '@marin/datakit']) req.resolve(p)",
    'console.log(tf.version.tfjs)',
  ].join('\n')
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', probe], {
    cwd: import.meta.dirname,
    encoding: 'utf8',
  })
  expect(r.status, r.stderr).toBe(0)
  expect(r.stdout.trim()).toBe('4.22.0')
})
