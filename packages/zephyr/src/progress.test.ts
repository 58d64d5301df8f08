import { configureLogging } from '@marin/rigging'
import { afterAll, expect, test } from 'vitest'
import { StageProgress } from './progress.js'

const lines: Record<string, unknown>[] = []
configureLogging({
  destination: { write: (l: string) => void lines.push(JSON.parse(l) as Record<string, unknown>) },
  pretty: false,
  level: 'info',
})
afterAll(() => configureLogging({}))

test('without a terminal, progress is a log line at most every interval', () => {
  const p = new StageProgress(0, 2, 'fromList → map → reshard(2)', 3, 'log', 60_000)
  p.shardDone(10)
  p.shardDone(5)
  p.finish(12.3)
  const ours = lines.filter((l) => l.pkg === 'zephyr')
  expect(ours.map((l) => l.msg)).toEqual(['stage started', 'stage finished'])
  expect(ours[1]).toMatchObject({ stage: 0, shards: 3, records: 15, timeMs: 12 })
  const every = new StageProgress(1, 2, 'read → collect', 2, 'log', 0)
  every.shardDone(1)
  expect(lines.filter((l) => l.msg === 'stage progress').at(-1)).toMatchObject({
    stage: 1,
    done: 1,
    shards: 2,
    records: 1,
  })
})

test('on a terminal, progress redraws one bar line', () => {
  const writes: string[] = []
  const orig = process.stderr.write.bind(process.stderr)
  process.stderr.write = ((s: string) => (writes.push(s), true)) as typeof process.stderr.write
  try {
    const p = new StageProgress(0, 1, 'x', 4, 'bar')
    p.shardDone(7)
    p.shardDone(7)
    p.finish(1)
  } finally {
    process.stderr.write = orig
  }
  expect(writes[2]).toMatch(/^\r\[stage 1\/1\] █{15}░{15} 2\/4 shards, 14 records/)
  expect(writes.at(-1)).toBe('\n')
})
