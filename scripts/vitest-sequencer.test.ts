import { expect, test } from 'vitest'
import { ESTIMATES, seededShuffle, startKey } from './vitest-sequencer.js'

const order = (files: [string, { duration: number } | undefined, number][]) =>
  files
    .map(([key, cached, size]) => ({ key, at: startKey(key, cached, size) }))
    .sort((a, b) => b.at[0] - a.at[0] || b.at[1] - a.at[1])
    .map((f) => f.key)

test('the longest files start first, whatever their project: timed ones by their last run, else by estimate', () => {
  const slow = Object.keys(ESTIMATES)[0]!
  expect(
    order([
      ['a:quick.test.ts', { duration: 200 }, 50_000],
      ['z:timed-slow.test.ts', { duration: 90_000 }, 100],
      [slow, undefined, 10],
      ['b:unknown-large.test.ts', undefined, 9_000],
      ['b:unknown-small.test.ts', undefined, 300],
    ]),
  ).toEqual(['z:timed-slow.test.ts', slow, 'a:quick.test.ts', 'b:unknown-large.test.ts', 'b:unknown-small.test.ts'])
})

test('every estimate names a file that exists, as <project>:<path>', async () => {
  const { existsSync } = await import('node:fs')
  const { resolve } = await import('node:path')
  for (const key of Object.keys(ESTIMATES)) {
    const [project, path] = key.split(':') as [string, string]
    expect(existsSync(resolve(import.meta.dirname, '..', path)), key).toBe(true)
    expect(path.startsWith(`packages/${project}/`) || path.startsWith(`${project}/`), key).toBe(true)
  }
})

test('--sequence.shuffle: a seed gives one order of the same files, another seed another', () => {
  const files = Array.from({ length: 20 }, (_, i) => `f${i}`)
  const a = seededShuffle(files, 7)
  expect(seededShuffle(files, 7)).toEqual(a)
  expect([...a].sort()).toEqual([...files].sort())
  expect(a).not.toEqual(files)
  expect(seededShuffle(files, 8)).not.toEqual(a)
})
