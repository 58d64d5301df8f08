import { execFileSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, realpathSync, writeFileSync } from 'node:fs'
import { hostname, tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { beforeEach, describe, expect, test } from 'vitest'
import { provenance, scopedPackageVersions } from './provenance.js'

// Git (ours and provenance's) must never find a repository above the temp dir.
process.env.GIT_CEILING_DIRECTORIES = realpathSync(tmpdir())
const env = { ...process.env }
let dir: string
beforeEach(() => {
  dir = realpathSync(mkdtempSync(join(tmpdir(), 'rigging-prov-')))
})
const git = (...args: string[]) => execFileSync('git', args, { cwd: dir, env, encoding: 'utf8' }).trim()

function repoWithCommit() {
  git('init', '-q')
  git('config', 'user.email', 'test@example.com')
  git('config', 'user.name', 'Test')
  writeFileSync(join(dir, 'a.txt'), 'one\n')
  git('add', 'a.txt')
  git('commit', '-q', '-m', 'first')
}

describe('provenance', () => {
  test('a clean repository: the HEAD sha, not dirty', () => {
    repoWithCommit()
    const p = provenance({ cwd: dir })
    expect(p.gitSha).toBe(git('rev-parse', 'HEAD'))
    expect(p.gitSha).toMatch(/^[0-9a-f]{40}$/)
    expect(p.gitDirty).toBe(false)
  })

  test('a changed tracked file makes it dirty; an untracked file alone does not', () => {
    repoWithCommit()
    writeFileSync(join(dir, 'untracked.txt'), 'x')
    expect(provenance({ cwd: dir }).gitDirty).toBe(false)
    writeFileSync(join(dir, 'a.txt'), 'two\n')
    expect(provenance({ cwd: dir }).gitDirty).toBe(true)
    git('commit', '-q', '-am', 'second')
    const p = provenance({ cwd: dir })
    expect(p.gitDirty).toBe(false)
    expect(p.gitSha).toBe(git('rev-parse', 'HEAD'))
  })

  test('from a subdirectory of the repository', () => {
    repoWithCommit()
    mkdirSync(join(dir, 'sub'))
    expect(provenance({ cwd: join(dir, 'sub') }).gitSha).toBe(git('rev-parse', 'HEAD'))
  })

  test('outside a repository: sha and dirty are null', () => {
    const p = provenance({ cwd: dir })
    expect(p.gitSha).toBeNull()
    expect(p.gitDirty).toBeNull()
  })

  test('a repository without commits: no sha, but a dirty flag', () => {
    git('init', '-q')
    const p = provenance({ cwd: dir })
    expect(p.gitSha).toBeNull()
    expect(p.gitDirty).toBe(false)
  })

  test('machine, runtime, time and packages, as plain JSON data', () => {
    const before = Date.now()
    const p = provenance({ cwd: dir })
    expect(p.host).toBe(hostname())
    expect(p.node).toBe(process.version)
    expect(p.platform).toBe(process.platform)
    expect(typeof p.user === 'string' || p.user === null).toBe(true)
    expect(new Date(p.timestamp).toISOString()).toBe(p.timestamp)
    expect(Date.parse(p.timestamp)).toBeGreaterThanOrEqual(before - 1000)
    expect(p.packages['@marin/rigging']).toMatch(/^\d+\.\d+\.\d+/)
    expect(JSON.parse(JSON.stringify(p))).toEqual(p)
  })

  test('package versions come from node_modules/@marin up the tree, nearest first', () => {
    const write = (root: string, name: string, version: string) => {
      mkdirSync(join(root, 'node_modules', '@marin', name), { recursive: true })
      writeFileSync(
        join(root, 'node_modules', '@marin', name, 'package.json'),
        JSON.stringify({ name: `@marin/${name}`, version }),
      )
    }
    write(dir, 'iris', '1.0.0')
    write(dir, 'fray', '1.0.0')
    mkdirSync(join(dir, 'app', 'deep'), { recursive: true })
    write(join(dir, 'app'), 'iris', '2.0.0')
    mkdirSync(join(dir, 'node_modules', '@marin', 'broken'))
    const versions = scopedPackageVersions(join(dir, 'app', 'deep'))
    expect(versions).toMatchObject({ '@marin/iris': '2.0.0', '@marin/fray': '1.0.0' })
    expect(Object.keys(versions)).not.toContain('@marin/broken')
    expect(Object.keys(versions)).toEqual([...Object.keys(versions)].sort())
  })

  test('in this workspace every @marin package is listed', () => {
    const p = provenance({ cwd: resolve(import.meta.dirname, '../../..') })
    for (const name of ['rigging', 'ducky', 'iris', 'marin'])
      expect(p.packages[`@marin/${name}`]).toMatch(/^\d+\.\d+\.\d+/)
  })
})
