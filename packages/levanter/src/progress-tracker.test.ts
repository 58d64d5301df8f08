import { expect, test } from 'vitest'
import { ProgressTracker, formatEta } from './progress-tracker.js'

/** A logger that keeps its lines, as pino's `info(obj, msg)` gets them. */
function capture() {
  const lines: Record<string, unknown>[] = []
  return { lines, log: { info: (o: Record<string, unknown>, msg: string) => void lines.push({ ...o, msg }) } }
}

test('each logged step becomes a line with step of max, loss, eval loss once known, tokens/s and an ETA', () => {
  const { lines, log } = capture()
  let now = 0
  const t = new ProgressTracker({ maxSteps: 300, log, now: () => now })
  now = 10_000
  t.log(25, { 'train/loss': 5.25, 'throughput/tokens_per_sec': 812.4 })
  expect(lines.at(-1)).toEqual({
    msg: 'training',
    step: 25,
    of: 300,
    loss: 5.25,
    tokens_per_s: 812,
    eta: '1m50s',
  })
  now = 40_000
  t.log(100, { 'train/loss': 3.5, 'throughput/tokens_per_sec': 900 })
  t.log(100, { 'eval/loss': 3.75, 'eval/bpb': 2.667 })
  expect(lines.at(-1)).toEqual({
    msg: 'training',
    step: 100,
    of: 300,
    loss: 3.5,
    eval_loss: 3.75,
    tokens_per_s: 900,
    eta: '1m20s',
  })
  // A later train line keeps the newest eval loss.
  now = 80_000
  t.log(200, { 'train/loss': 3.25, 'throughput/tokens_per_sec': 900 })
  expect(lines.at(-1)).toMatchObject({ step: 200, eval_loss: 3.75, eta: '40s' })
})

test('a resumed run counts its ETA from the step it resumed at', () => {
  const { lines, log } = capture()
  let now = 0
  const t = new ProgressTracker({ maxSteps: 100, startStep: 50, log, now: () => now })
  now = 5000
  t.log(60, { 'train/loss': 2 })
  expect(lines.at(-1)).toMatchObject({ step: 60, of: 100, eta: '20s' })
})

test('formatEta', () => {
  expect(formatEta(0)).toBe('0s')
  expect(formatEta(59.4)).toBe('59s')
  expect(formatEta(61)).toBe('1m01s')
  expect(formatEta(3 * 3600 + 65)).toBe('3h01m')
})

test('with the tokens of a step, the first ETA comes from that step’s own pace, not the start-up before it', () => {
  const { lines, log } = capture()
  let now = 0
  const t = new ProgressTracker({ maxSteps: 100, tokensPerStep: 1000, log, now: () => now })
  now = 60_000
  t.log(10, { 'train/loss': 2, 'throughput/tokens_per_sec': 2000 })
  expect(lines.at(-1)).toMatchObject({ step: 10, eta: '45s' })
})
