/**
 * @module `pnpm bench levanter` across network hosts (where network namespaces can be made: root, iproute2; skipped
 * saying why elsewhere): data-parallel training of the quickstart-sized model (GPT-2, vocab 512, context 128,
 * d_model 128, 2 layers, batch 16) with `{ data: 2 }`, one replica on each of hosts B and C (iris workers; the
 * controller and the driver on host A), against both replicas on host A. The link between B and C direct, then
 * through rigging's delaying relay (`delayLink`) at 0, 1 and 10 ms one way; at 10 ms, the gradients all-reduced
 * in one collective after the backward pass, against in buckets during it (the default 4 MiB, which is one bucket
 * for this model's 1.8 MiB of gradients, and 256 KiB). Rounds interleave every configuration; a row is the
 * median of the timed steps of all rounds (`_best`: the fastest step, less disturbed by a busy machine); the
 * replicas' all-reduce time is the part of the step the slowest replica spent in it.
 *
 * HOSTS_BENCH_STEPS sets the timed steps per run @default 4; HOSTS_BENCH_ROUNDS the rounds @default 2.
 */
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { emit, median } from '@marin/rigging/bench'
import { delayLink, makeNetHosts, type NetHost, netHostsSupport } from '@marin/rigging/net-hosts'

const raw = process.env.HOSTS_BENCH_STEPS
const STEPS = raw ? Number(raw) : 4
if (!(Number.isInteger(STEPS) && STEPS >= 1)) {
  process.stderr.write(`levanter hosts bench: HOSTS_BENCH_STEPS must be a whole number ≥ 1, got "${raw}"\n`)
  process.exit(2)
}
const rawRounds = process.env.HOSTS_BENCH_ROUNDS
const ROUNDS = rawRounds ? Number(rawRounds) : 2
if (!(Number.isInteger(ROUNDS) && ROUNDS >= 1)) {
  process.stderr.write(`levanter hosts bench: HOSTS_BENCH_ROUNDS must be a whole number ≥ 1, got "${rawRounds}"\n`)
  process.exit(2)
}
const why = netHostsSupport()
if (why !== undefined) {
  process.stderr.write(`levanter hosts bench: skipped: ${why}\n`)
  process.exit(0)
}

const require = createRequire(import.meta.url)
const TSX = pathToFileURL(require.resolve('tsx')).href
// iris is fray's backend: its command line comes with fray.
const IRIS_BIN = join(
  dirname(createRequire(require.resolve('@marin/fray')).resolve('@marin/iris')),
  '..',
  'bin',
  'iris.js',
)
const DRIVER = fileURLToPath(new URL('./hosts-bench-driver.ts', import.meta.url))
const TOKEN = 'levanter-hosts-bench-token-0123456789'
const b = 'levanter'
type Run = { label: string; overlapReduce: boolean; bucketBytes?: number }
type Measured = { label: string; stepMs: number[]; allReduceMs: number[]; buckets: number; during: number }

const net = makeNetHosts(3)
try {
  const [a, hb, hc] = net.hosts as [NetHost, NetHost, NetHost]
  const env = (h: NetHost) => ({ MARIN_PREFIX: join(h.dir, '.marin'), IRIS_TOKEN: TOKEN, LOG_LEVEL: 'warn' })
  const controller = `${a.address}:10000`
  const ctl = a.spawn(
    process.execPath,
    [IRIS_BIN, 'controller', '--host', a.address, '--port', '10000', '--heartbeat', '500ms'],
    { env: env(a) },
  )
  await ctl.waitFor(/listening on (\S+)/, 20_000)
  // One core each: one replica per host.
  for (const [h, id] of [
    [hb, 'wb'],
    [hc, 'wc'],
  ] as const)
    h.spawn(
      process.execPath,
      [IRIS_BIN, 'worker', '--controller', controller, '--worker-id', id, '--resources', 'cpu=1,memory=8G'],
      { env: env(h) },
    )
  const drive = async (runs: Run[], local = false): Promise<Measured[]> => {
    const config = JSON.stringify({ controller, driverHost: a.address, local, steps: STEPS, runs })
    const r = await a.exec(process.execPath, ['--import', TSX, DRIVER, config], { env: env(a), timeoutMs: 300_000 })
    const out = r.stdout
      .split('\n')
      .filter((l) => l.startsWith('{"label"'))
      .map((l) => JSON.parse(l) as Measured)
    if (out.length !== runs.length)
      throw new Error(`levanter hosts bench: the driver failed (${r.code}): ${r.stderr.slice(-1500)}`)
    return out
  }
  const byDefault: Run = { label: 'default', overlapReduce: true }
  const AT_10MS: Run[] = [
    { label: 'after', overlapReduce: false },
    byDefault,
    { label: 'small', overlapReduce: true, bucketBytes: 256 * 1024 },
  ]
  // Every configuration's measurements, pooled over the rounds.
  const got = new Map<string, Measured>()
  const keep = (where: string, ms: Measured[]) => {
    for (const m of ms) {
      const key = `${where}/${m.label}`
      const was = got.get(key)
      got.set(
        key,
        was ? { ...m, stepMs: [...was.stepMs, ...m.stepMs], allReduceMs: [...was.allReduceMs, ...m.allReduceMs] } : m,
      )
    }
  }
  for (let round = 0; round < ROUNDS; round++) {
    process.stderr.write(`levanter hosts bench: round ${round + 1} of ${ROUNDS}\n`)
    keep('one_host', await drive([byDefault], true))
    keep('no_relay', await drive([byDefault]))
    for (const delay of [0, 1, 10]) {
      const link = await delayLink(hb, hc, delay)
      try {
        keep(`delay_${delay}ms`, await drive(delay === 10 ? AT_10MS : [byDefault]))
        if (link.accepted() === 0) throw new Error(`levanter hosts bench: the relays carried nothing at ${delay} ms`)
      } finally {
        await link.close()
      }
    }
  }
  const of = (key: string) => got.get(key)!
  const oneHost = of('one_host/default')
  emit({ bench: b, metric: 'hosts_dp_quickstart_step_one_host', value: median(oneHost.stepMs), unit: 'ms' })
  emit({ bench: b, metric: 'hosts_dp_quickstart_step_one_host_best', value: Math.min(...oneHost.stepMs), unit: 'ms' })
  for (const where of ['no_relay', 'delay_0ms', 'delay_1ms', 'delay_10ms']) {
    const m = of(`${where}/default`)
    for (const [suffix, pick] of [
      ['', median],
      ['_best', (xs: number[]) => Math.min(...xs)],
    ] as const)
      emit({
        bench: b,
        metric: `hosts_dp_quickstart_step_2_hosts_${where}${suffix}`,
        value: pick(m.stepMs),
        unit: 'ms',
        baseline: pick(oneHost.stepMs),
        lowerIsBetter: true,
      })
    emit({
      bench: b,
      metric: `hosts_dp_quickstart_all_reduce_2_hosts_${where}`,
      value: median(m.allReduceMs),
      unit: 'ms',
    })
  }
  const after = of('delay_10ms/after')
  emit({
    bench: b,
    metric: 'hosts_dp_quickstart_10ms_step_all_reduce_after_backward',
    value: median(after.stepMs),
    unit: 'ms',
  })
  // The time left waiting on the all-reduce once the backward pass is done: what buckets could hide.
  emit({
    bench: b,
    metric: 'hosts_dp_quickstart_10ms_all_reduce_wait_after_backward',
    value: median(after.allReduceMs),
    unit: 'ms',
  })
  for (const [name, m] of [
    ['4mib', of('delay_10ms/default')],
    ['256kib', of('delay_10ms/small')],
  ] as const) {
    emit({
      bench: b,
      metric: `hosts_dp_quickstart_10ms_step_buckets_${name}_${m.buckets}_during_backward_${m.during}`,
      value: median(m.stepMs),
      unit: 'ms',
      baseline: median(after.stepMs),
      lowerIsBetter: true,
    })
    emit({
      bench: b,
      metric: `hosts_dp_quickstart_10ms_all_reduce_wait_buckets_${name}`,
      value: median(m.allReduceMs),
      unit: 'ms',
      baseline: median(after.allReduceMs),
      lowerIsBetter: true,
    })
  }
} finally {
  net.close()
}
