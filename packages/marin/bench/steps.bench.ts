/**
 * @module `pnpm bench steps`: what the executor costs a trivial step, with steps run as iris jobs on a
 * local cluster (the default) and in the driver's process (`--local`, the baseline). Chains of 5, 20 and
 * 80 steps (each needs the one before, so they run one at a time) of `fixtures/chain.ts`, each chain a
 * driver process of its own on a fresh prefix. Per step: the run's duration from its record (planning
 * to record, without the driver's start) over the steps; marginal: (run of 80 − run of 5) / 75, what one
 * more step adds. CHAIN_BENCH_SIZES=5,20 picks other chain lengths.
 */
import { spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { emit } from '@marin/rigging/bench'

const script = join(import.meta.dirname, 'fixtures', 'chain.ts')
const sizes = (process.env.CHAIN_BENCH_SIZES ?? '5,20,80').split(',').map(Number)

type Run = { runS: number; wallS: number }

/** Runs a chain of `n` steps in a driver process of its own; the run's seconds and the process's. */
async function chain(n: number, local: boolean): Promise<Run> {
  const prefix = mkdtempSync(join(tmpdir(), 'marin-bench-steps-'))
  try {
    const t0 = performance.now()
    const args = ['--import', 'tsx', script, ...(local ? ['--local'] : [])]
    const child = spawn(process.execPath, args, {
      env: {
        LOG_LEVEL: 'warn',
        ...process.env,
        MARIN_PREFIX: prefix,
        CHAIN_STEPS: String(n),
        CHAIN_SALT: `${Date.now()}`,
      },
      stdio: ['ignore', 'ignore', 'inherit'],
    })
    const code = await new Promise<number>((r) => child.on('exit', (c) => r(c ?? 1)))
    const wallS = (performance.now() - t0) / 1000
    if (code !== 0) throw new Error(`chain of ${n} (${local ? 'local' : 'iris'}) exited ${code}`)
    const dir = join(prefix, 'experiments', 'chain')
    const rec = JSON.parse(readFileSync(join(dir, readdirSync(dir)[0]!), 'utf8')) as {
      startedAt: string
      finishedAt: string
      status: string
    }
    if (rec.status !== 'SUCCESS') throw new Error(`chain of ${n}: ${rec.status}`)
    return { runS: (Date.parse(rec.finishedAt) - Date.parse(rec.startedAt)) / 1000, wallS }
  } finally {
    rmSync(prefix, { recursive: true, force: true })
  }
}

const results = new Map<string, Run>()
for (const local of [true, false]) {
  for (const n of sizes) {
    const mode = local ? 'local' : 'iris'
    process.stderr.write(`steps: ${n} chained steps, ${mode}\n`)
    const r = await chain(n, local)
    results.set(`${mode}:${n}`, r)
    const base = results.get(`local:${n}`)!
    emit({
      bench: 'marin',
      metric: `executor_step_s_${mode}_${n}_chained`,
      value: r.runS / n,
      unit: 's/step',
      ...(local ? {} : { baseline: base.runS / n, lowerIsBetter: true }),
    })
    emit({ bench: 'marin', metric: `executor_driver_wall_s_${mode}_${n}_chained`, value: r.wallS, unit: 's' })
  }
}
const lo = Math.min(...sizes),
  hi = Math.max(...sizes)
if (hi > lo) {
  const marginal = (mode: string) =>
    (results.get(`${mode}:${hi}`)!.runS - results.get(`${mode}:${lo}`)!.runS) / (hi - lo)
  emit({
    bench: 'marin',
    metric: 'executor_step_marginal_s_iris',
    value: marginal('iris'),
    unit: 's/step',
    baseline: marginal('local'),
    lowerIsBetter: true,
  })
}
