import { execFileSync, spawnSync } from 'node:child_process'
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { afterEach, describe, expect, test } from 'vitest'
import { checkFileLength, checkLineWidth, isLengthChecked, LINE_WIDTH, MAX_LINES } from './check-line-width.js'

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
    expect(ok.stdout).toBe('line width: ok\nfile length: ok\n')
  })
})

describe('file length check', () => {
  const lines = (n: number) => 'x\n'.repeat(n)

  test('the repository has no code file over the length', () => {
    expect(checkFileLength(root)).toEqual([])
  })

  test('holds package sources and tests, native kernels, scripts and experiments to the length', () => {
    for (const f of [
      'packages/a/src/x.ts',
      'packages/a/src/deep/x.test.ts',
      'packages/a/native/ops.cc',
      'packages/a/native/sub/ops.h',
      'scripts/check.ts',
      'experiments/deep/run.ts',
    ])
      expect(isLengthChecked(f), f).toBe(true)
    for (const f of [
      'packages/a/README.md',
      'packages/a/bench/x.ts',
      'packages/a/src/x.d.ts',
      'packages/a/native/build/gen.h',
      'packages/a/node_modules/b/src/x.ts',
      'scripts/deep/x.ts',
      'docs/x.ts',
    ])
      expect(isLengthChecked(f), f).toBe(false)
  })

  test('reports files over the length, longest first; exactly the length passes', () => {
    const dir = repo({
      'packages/a/src/ok.ts': lines(MAX_LINES),
      'packages/a/src/long.test.ts': lines(MAX_LINES + 1),
      'packages/a/native/ops.cc': lines(MAX_LINES + 5),
      'packages/a/README.md': lines(MAX_LINES * 2),
      'experiments/run.ts': `${lines(MAX_LINES)}last line without a newline`,
    })
    expect(checkFileLength(dir)).toEqual([
      { file: 'packages/a/native/ops.cc', lines: MAX_LINES + 5 },
      { file: 'experiments/run.ts', lines: MAX_LINES + 1 },
      { file: 'packages/a/src/long.test.ts', lines: MAX_LINES + 1 },
    ])
  })

  test('the command exits 1 naming each long file', () => {
    const tsx = join(root, 'node_modules/.bin/tsx')
    const bad = repo({ 'scripts/big.ts': lines(MAX_LINES + 2) })
    const r = spawnSync(tsx, ['scripts/check-line-width.ts', '--root', bad], { cwd: root, encoding: 'utf8' })
    expect(r.status).toBe(1)
    expect(r.stderr).toContain(`scripts/big.ts: ${MAX_LINES + 2} lines, over ${MAX_LINES}`)
    expect(r.stderr).toContain('file length: 1 file(s) over')
  })
})
