/**
 * Logging throughput into /dev/null. Baseline: bare pino with the same sink,
 * without our redaction (by key at any depth, and of registered secret values). The ratio
 * is what redaction costs: 1 would be free.
 */
import { pino } from 'pino'
import { emit, median, timeIt } from '../src/bench.js'
import { configureLogging, logger } from '../src/logger.js'
import { registerSecretValue } from '../src/redaction.js'

const N = 200_000
// A real file sink (/dev/null through pino's synchronous SonicBoom), as in production.
const sink = pino.destination({ dest: '/dev/null', sync: true })
const fields = (i: number) => ({
  jobId: `job-${i & 1023}`,
  attempt: i & 7,
  resources: { cpu: 2, memory: '4GiB', env: { MARIN_PREFIX: '/data' } },
})

configureLogging({ destination: sink, pretty: false, level: 'info' })
for (const v of ['sk-live-0123456789abcdef', 'hf_abcdefghijklmnop', 'ghp_0123456789']) registerSecretValue(v)
const ours = logger('bench')
const bare = pino({ level: 'info' }, sink).child({ pkg: 'bench' })

// Alternate the two so that JIT warm-up and machine noise fall on both alike.
const oursTimes: number[] = []
const bareTimes: number[] = []
for (let r = 0; r < 7; r++) {
  oursTimes.push(
    await timeIt(
      () => {
        for (let i = 0; i < N; i++) ours.info(fields(i), 'job scheduled')
      },
      { runs: 1, warmup: r === 0 ? 1 : 0 },
    ),
  )
  bareTimes.push(
    await timeIt(
      () => {
        for (let i = 0; i < N; i++) bare.info(fields(i), 'job scheduled')
      },
      { runs: 1, warmup: r === 0 ? 1 : 0 },
    ),
  )
}
emit({
  bench: 'rigging',
  metric: 'log_lines_per_s',
  value: N / median(oursTimes),
  unit: 'lines/s',
  baseline: N / median(bareTimes),
})
