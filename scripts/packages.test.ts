import { readdirSync, readFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { expect, test } from 'vitest'

const packagesDir = resolve(import.meta.dirname, '../packages')

// The packages are used as TypeScript sources inside the workspace, never built or published.
test('every package is private', () => {
  const notPrivate = readdirSync(packagesDir)
    .map((dir) => ({ dir, pj: JSON.parse(readFileSync(join(packagesDir, dir, 'package.json'), 'utf8')) }))
    .filter(({ pj }) => pj.private !== true)
    .map(({ dir }) => dir)
  expect(notPrivate).toEqual([])
})
