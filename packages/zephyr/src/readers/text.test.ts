import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { gzipSync } from 'node:zlib'
import { expect, test } from 'vitest'
import { ZephyrContext } from '../context.js'
import { Dataset } from '../dataset.js'
import { tempDir } from '../fixtures/tmp.js'

const ctx = new ZephyrContext({ inProcess: true, progress: 'off' })

test('loadText: one string per line, or one record per file', async () => {
  const dir = tempDir()
  writeFileSync(join(dir, 'a.txt'), 'alpha\nbeta\r\ngamma')
  writeFileSync(join(dir, 'b.txt.gz'), gzipSync('delta\n'))
  const lines = await ctx.execute(Dataset.fromFiles(join(dir, '*.txt*')).loadText())
  expect(lines.results).toEqual(['alpha', 'beta', 'gamma', 'delta'])
  const files = await ctx.execute(Dataset.fromFiles(join(dir, '{a.txt,b.txt.gz}')).loadText({ per: 'file' }))
  expect(files.results.map((f) => [f.path.endsWith('a.txt') || f.path.endsWith('b.txt.gz'), f.text])).toEqual([
    [true, 'alpha\nbeta\r\ngamma'],
    [true, 'delta\n'],
  ])
})

test('text round trip through writeJsonl of strings', async () => {
  const dir = tempDir()
  writeFileSync(join(dir, 'in.txt'), 'one\ntwo\n')
  await ctx.execute(
    Dataset.fromFiles(join(dir, 'in.txt'))
      .loadText()
      .map((s) => ({ s }))
      .writeJsonl(join(dir, 'out-{shard}.jsonl')),
  )
  const back = await ctx.execute(
    Dataset.fromFiles(join(dir, 'out-*.jsonl'))
      .loadJsonl<{ s: string }>()
      .map((r) => r.s),
  )
  expect(back.results).toEqual(['one', 'two'])
})
