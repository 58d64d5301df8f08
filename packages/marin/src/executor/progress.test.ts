import { describe, expect, test } from 'vitest'
import { progressSink, progressText } from './progress.js'

describe('progressText', () => {
  test('a pino line becomes its message and its small fields', () => {
    const line = JSON.stringify({
      level: 30,
      time: 1,
      pid: 2,
      hostname: 'h',
      pkg: 'marin',
      step: 'gpt_1234abcd',
      progress: '150/600',
      loss: 3.25159265,
      tokensPerSec: 812,
      msg: 'training',
    })
    expect(progressText(line)).toBe('training progress=150/600 loss=3.252 tokensPerSec=812')
  })
  test('a numeric step comes first, with its total', () => {
    expect(progressText(JSON.stringify({ msg: 'metrics', loss: 2, step: 5, of: 10 }))).toBe('metrics step=5/10 loss=2')
  })
  test('lines that are not pino JSON are ignored', () => {
    expect(progressText('plain output')).toBeUndefined()
    expect(progressText('{not json')).toBeUndefined()
    expect(progressText('{"level":30}')).toBeUndefined()
  })
})

describe('progressSink without a terminal', () => {
  test('prints the newest line of each step at most once per interval, nothing after the step finished', () => {
    const lines: string[] = []
    const sink = progressSink((l) => lines.push(l), { everyMs: 0 })
    sink.update('a', 'one')
    sink.update('a', 'one')
    sink.update('b', 'two')
    sink.finish('a')
    sink.update('a', 'late')
    expect(lines).toEqual(['  … a: one', '  … b: two'])
    const quiet: string[] = []
    const slow = progressSink((l) => quiet.push(l), { everyMs: 60_000 })
    slow.update('a', 'first')
    slow.update('a', 'second')
    expect(quiet).toEqual(['  … a: first'])
  })
})

describe('progressSink: a step shows up as soon as it starts', () => {
  test('the first line of each step is shown at once, whatever the interval; later ones once per interval', () => {
    const lines: string[] = []
    const sink = progressSink((l) => lines.push(l), { everyMs: 60_000 })
    sink.update('a', 'started')
    sink.update('a', 'second')
    sink.update('b', 'started')
    expect(lines).toEqual(['  … a: started', '  … b: started'])
  })

  test('on a terminal, a line with step=N/M is drawn as a bar with the rest of its fields', () => {
    const written: string[] = []
    const tty = { columns: 120, write: (s: string) => written.push(s) } as unknown as NodeJS.WriteStream
    const sink = progressSink(() => {}, { tty, everyMs: 0 })
    sink.update('gpt_1234', 'training step=150/300 loss=3.2 eval_loss=3.4 eta=1m20s')
    const shown = written.at(-1)!
    expect(shown).toMatch(/^\r {2}… gpt_1234: training \[#{10}-{10}\] 150\/300 loss=3\.2 eval_loss=3\.4 eta=1m20s/)
    // A terminal that reports no width (0 columns, as some ptys do) gets lines of a usual width, not 20 characters.
    const narrow: string[] = []
    const unknown = { columns: 0, write: (s: string) => narrow.push(s) } as unknown as NodeJS.WriteStream
    progressSink(() => {}, { tty: unknown, everyMs: 0 }).update('gpt_1234', 'training step=1/300 loss=3.2')
    expect(narrow.at(-1)).toContain('1/300 loss=3.2')
  })
})

describe('progressSink: periodic lines', () => {
  test('a line held back by the interval is shown once the interval has passed, with no later update', async () => {
    const lines: string[] = []
    const sink = progressSink((l) => lines.push(l), { everyMs: 50 })
    sink.update('a', 'started')
    sink.update('a', 'step started')
    expect(lines).toEqual(['  … a: started'])
    for (let i = 0; i < 400 && lines.length < 2; i++) await new Promise((r) => setTimeout(r, 25))
    expect(lines).toEqual(['  … a: started', '  … a: step started'])
    sink.done()
  })
})
