/**
 * @module Benchmark helpers: time a function over several runs, take the median,
 * and print the JSON lines `pnpm bench` reads.
 *
 * @example
 * const ours = await timeIt(() => hashAll(docs), { runs: 5 })
 * const base = await timeIt(() => baselineHash(docs), { runs: 5 })
 * emit({ bench: 'dupekit', metric: 'xxh64_mb_per_s', value: mb / ours, unit: 'MB/s', baseline: mb / base })
 */

/** One line of `pnpm bench` output. `ratio` is ours ÷ baseline as a throughput: higher is better. */
export type BenchLine = {
  bench: string
  metric: string
  value: number
  unit: string
  baseline?: number
  ratio?: number
}

export type EmitInput = Omit<BenchLine, 'ratio'> & {
  /** The metric is a time or a latency: the ratio becomes baseline ÷ value so that higher is still better. @default
   * false */
  lowerIsBetter?: boolean
}

const round = (x: number) => (Number.isFinite(x) ? Number(x.toPrecision(4)) : x)

/** Prints one bench line to stdout and returns it. */
export function emit(input: EmitInput): BenchLine {
  const { lowerIsBetter = false, ...line } = input
  const out: BenchLine = { bench: line.bench, metric: line.metric, value: round(line.value), unit: line.unit }
  if (line.baseline !== undefined) {
    out.baseline = round(line.baseline)
    out.ratio = round(lowerIsBetter ? line.baseline / line.value : line.value / line.baseline)
  }
  process.stdout.write(`${JSON.stringify(out)}\n`)
  return out
}

export function median(xs: readonly number[]): number {
  if (xs.length === 0) throw new RangeError('median of an empty list')
  const s = [...xs].sort((a, b) => a - b)
  const mid = s.length >> 1
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2
}

export type TimeOptions = {
  /** Timed runs; the median is returned. @default 5 */
  runs?: number
  /** Untimed runs first, to warm caches and the JIT. @default 1 */
  warmup?: number
}

/** Median wall time of `fn` in seconds. */
export async function timeIt(fn: () => unknown, opts: TimeOptions = {}): Promise<number> {
  const { runs = 5, warmup = 1 } = opts
  for (let i = 0; i < warmup; i++) await fn()
  const times: number[] = []
  for (let i = 0; i < runs; i++) {
    const t0 = process.hrtime.bigint()
    await fn()
    times.push(Number(process.hrtime.bigint() - t0) / 1e9)
  }
  return median(times)
}
