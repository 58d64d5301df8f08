import { spawnSync } from 'node:child_process'
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { afterEach, describe, expect, test } from 'vitest'
import { checkLayering, isTestCode, packageOf } from './check-layering.js'

const root = resolve(import.meta.dirname, '..')
const tsx = join(root, 'node_modules/.bin/tsx')
const temps: string[] = []

function copyOfPackages(): string {
  const dir = mkdtempSync(join(tmpdir(), 'layering-'))
  temps.push(dir)
  cpSync(join(root, 'packages'), join(dir, 'packages'), {
    recursive: true,
    filter: (src) => !src.includes('node_modules'),
  })
  return dir
}

afterEach(() => {
  for (const d of temps.splice(0)) rmSync(d, { recursive: true, force: true })
})

describe('layering check', () => {
  test('main has no violations', () => {
    expect(checkLayering(root)).toEqual([])
  })

  test('an upward import fails the command with file, line and rule', () => {
    const dir = copyOfPackages()
    writeFileSync(join(dir, 'packages/rigging/src/planted.ts'), `// planted\n\nexport { name } from '@marin/iris'\n`)
    const run = spawnSync(tsx, ['scripts/check-layering.ts', '--root', dir], { cwd: root, encoding: 'utf8' })
    expect(run.status).toBe(1)
    expect(run.stderr).toContain(
      'packages/rigging/src/planted.ts:3: [upward-import] @marin/rigging (rank 0) imports @marin/iris (rank 4)',
    )
  })

  test('an equal-rank import, a dynamic import and an undeclared package are reported', () => {
    const dir = copyOfPackages()
    writeFileSync(
      join(dir, 'packages/ducky/src/planted.ts'),
      [
        `export const a = () => import('@marin/ducky/package.json')`,
        `import lodash from 'lodash'`,
        `import '../../rigging/src/index.js'`,
        `export { lodash }`,
      ].join('\n'),
    )
    const rules = checkLayering(dir)
      .filter((v) => v.file === 'packages/ducky/src/planted.ts')
      .map((v) => `${v.line}:${v.rule}`)
    expect(rules).toEqual(['1:upward-import', '2:undeclared-dependency', '3:outside-package'])
  })

  test('a downward import of a declared package passes', () => {
    const dir = copyOfPackages()
    const pj = join(dir, 'packages/ducky/package.json')
    const json = JSON.parse(readFileSync(pj, 'utf8'))
    json.dependencies = { ...json.dependencies, '@marin/rigging': 'workspace:*' }
    writeFileSync(pj, JSON.stringify(json))
    writeFileSync(join(dir, 'packages/ducky/src/planted.ts'), `export { name } from '@marin/rigging'\n`)
    expect(checkLayering(dir).filter((v) => v.file.endsWith('planted.ts'))).toEqual([])
  })

  test('test code is told apart by name and folder', () => {
    expect(isTestCode('src/lease.test.ts')).toBe(true)
    expect(isTestCode('src/fixtures/child.ts')).toBe(true)
    expect(isTestCode('src/test-support/server.ts')).toBe(true)
    expect(isTestCode('src/test-helpers.ts')).toBe(true)
    expect(isTestCode('src/internal/test-processes.ts')).toBe(true)
    expect(isTestCode('src/contest-rules.ts')).toBe(false)
    expect(isTestCode('src/lease.ts')).toBe(false)
  })

  test('packageOf keeps the scope', () => {
    expect(packageOf('@marin/rigging/storage')).toBe('@marin/rigging')
    expect(packageOf('zod/v4')).toBe('zod')
  })
})
