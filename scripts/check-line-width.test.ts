import { execFileSync, spawnSync } from 'node:child_process'
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { afterEach, describe, expect, test } from 'vitest'
import { checkLineWidth, LINE_WIDTH } from './check-line-width.js'

const root = resolve(import.meta.dirname, '..')
const temps: string[] = []
afterEach(() => {
  for (const d of temps.splice(0)) rmSync(d, { recursive: true, force: true })
})

/** A git repository holding `files` (tracked). */
function repo(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), 'line-width-'))
  temps.push(dir)
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(join(dir, name, '..'), { recursive: true })
    writeFileSync(join(dir, name), text)
  }
  execFileSync('git', ['init', '-q'], { cwd: dir })
  execFileSync('git', ['add', '.'], { cwd: dir })
  return dir
}

describe('line width check', () => {
  test('the repository has no line over the width', () => {
    expect(checkLineWidth(root)).toEqual([])
  })

  test('counts characters, not bytes, in tracked code files only', () => {
    const dir = repo({
      'a.ts': `const ok = '${'→'.repeat(LINE_WIDTH - 13)}'\n`,
      'b/c.mjs': `// ${'x'.repeat(LINE_WIDTH)}\n`,
      'notes.md': `${'y'.repeat(500)}\n`,
      'd.json': `"${'z'.repeat(500)}"\n`,
    })
    expect(checkLineWidth(dir)).toEqual([{ file: 'b/c.mjs', line: 1, width: LINE_WIDTH + 3 }])
  })

  test('the command exits 1 naming each long line, 0 when none', () => {
    const tsx = join(root, 'node_modules/.bin/tsx')
    const bad = repo({ 'a.ts': `\n\nconst s = '${'x'.repeat(LINE_WIDTH)}'\n` })
    const r = spawnSync(tsx, ['scripts/check-line-width.ts', '--root', bad], { cwd: root, encoding: 'utf8' })
    expect(r.status).toBe(1)
    expect(r.stderr).toContain(`a.ts:3: ${LINE_WIDTH + 12} characters, over ${LINE_WIDTH}`)
    const good = repo({ 'a.ts': 'export const s = 1\n' })
    const ok = spawnSync(tsx, ['scripts/check-line-width.ts', '--root', good], { cwd: root, encoding: 'utf8' })
    expect(ok.status).toBe(0)
    expect(ok.stdout).toBe('line width: ok\n')
  })
})
