/**
 * The bench's child processes: a levanter variant (bench/variant.ts) or the PyTorch reference
 * (bench/pytorch-reference.py), each in a process of its own so its peak RSS is its own. Each prints
 * one JSON result line; {@link tryRun} turns a failed run into its error instead of throwing.
 */
import { spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'

export type Result = Record<string, number> & { phasesMs?: Record<string, number>; blas?: string }
export type Outcome = { ok: true; result: Result } | { ok: false; error: string }

const variantFile = fileURLToPath(new URL('./variant.ts', import.meta.url))
const pytorchFile = fileURLToPath(new URL('./pytorch-reference.py', import.meta.url))

/** Model size flags, the same for both programs. */
export type Size = { dModel: number; nLayers: number; nHeads: number }
const sizeArgs = (s?: Size) =>
  s ? ['--d-model', String(s.dModel), '--layers', String(s.nLayers), '--heads', String(s.nHeads)] : []

export type RunSpec = {
  /** What stderr calls the run. */
  label: string
  command: string
  args: string[]
  env?: Record<string, string>
  /** Result lines start with this. */
  prefix: string
  /** Pass stderr through as it comes (progress), or collect it to name the error of a failed run. */
  liveStderr?: boolean
  timeoutMs?: number
}

/** A levanter variant: `levanter`, `levanter-dp2`, `stock`, `generate`, `gemm`. */
export function levanterRun(
  variant: string,
  steps: string,
  opts: { gemm?: string; size?: Size; threads?: number } = {},
): RunSpec {
  const threads = opts.threads ?? 1
  return {
    label:
      `${variant}${opts.gemm ? ` (LEVANTER_GEMM=${opts.gemm})` : ''}` +
      `${threads > 1 ? ` ${threads} threads` : ''}${opts.size ? ` ${opts.size.dModel}/${opts.size.nLayers}` : ''}`,
    command: process.execPath,
    args: ['--import', 'tsx', variantFile, variant, steps, ...sizeArgs(opts.size)],
    // native kernel threads per process: 1 unless asked (data-parallel replicas take the driver's setting)
    env: { LOG_LEVEL: 'warn', LEVANTER_THREADS: String(threads), ...(opts.gemm ? { LEVANTER_GEMM: opts.gemm } : {}) },
    prefix: '{"variant"',
    liveStderr: true,
  }
}

/** The PyTorch reference on `threads` intra-op threads (idle OpenMP threads sleep: OMP_WAIT_POLICY=PASSIVE). */
export function pytorchRun(python: string, threads: number, steps: string, size?: Size): RunSpec {
  return {
    label: `pytorch ${threads} thread${threads > 1 ? 's' : ''}${size ? ` ${size.dModel}/${size.nLayers}` : ''}`,
    command: python,
    args: [pytorchFile, '--threads', String(threads), '--steps', steps, ...sizeArgs(size)],
    env: { OMP_WAIT_POLICY: 'PASSIVE' },
    prefix: '{"variant"',
  }
}

/** The line of a failed run's stderr that says what went wrong: the last that names an error, else the last. */
export function errorLine(stderr: string): string {
  const lines = stderr
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean)
  const named = lines.filter((l) => /error|abort|out of memory|killed|exception/i.test(l) && !l.startsWith('at '))
  return (named.pop() ?? lines.pop() ?? '').slice(0, 400)
}

export function tryRun(spec: RunSpec): Outcome {
  process.stderr.write(`levanter bench: ${spec.label}…\n`)
  const r = spawnSync(spec.command, spec.args, {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', spec.liveStderr ? 'inherit' : 'pipe'],
    env: { ...process.env, ...spec.env },
    maxBuffer: 64 * 1024 * 1024,
    ...(spec.timeoutMs ? { timeout: spec.timeoutMs } : {}),
  })
  // Collected stderr is passed on with long lines cut (a throw inside minified code prints the whole line).
  if (!spec.liveStderr && r.stderr) process.stderr.write(r.stderr.replace(/^(.{300}).+$/gm, '$1…'))
  const line = (r.stdout ?? '')
    .trim()
    .split('\n')
    .filter((l) => l.startsWith(spec.prefix))
    .pop()
  if (line && r.status === 0) return { ok: true, result: JSON.parse(line) }
  const how = r.error ? r.error.message : r.signal ? `killed by ${r.signal}` : `exit ${r.status}`
  const why = errorLine(r.stderr ?? '') || errorLine(r.stdout ?? '')
  return { ok: false, error: `${spec.label}: ${how}${why ? `: ${why}` : ''}` }
}

/** {@link tryRun}, throwing when the run printed no result. */
export function run(spec: RunSpec): Result {
  const o = tryRun(spec)
  if (!o.ok) throw new Error(`bench run failed: ${o.error}`)
  return o.result
}

/**
 * The Python that imports torch: LEVANTER_BENCH_PYTHON, else `python3` on PATH, else the system's
 * /usr/bin/python3 (Debian's python3-torch lives there even where another python3 comes first).
 * Returns why not when none does.
 */
export function findTorch(): { python: string; torch: string } | { why: string } {
  const own = process.env.LEVANTER_BENCH_PYTHON
  const candidates = own ? [own] : ['python3', '/usr/bin/python3']
  const whys: string[] = []
  for (const python of candidates) {
    const r = spawnSync(python, ['-c', 'import torch; print(torch.__version__)'], { encoding: 'utf8' })
    if (r.status === 0) return { python, torch: r.stdout.trim() }
    whys.push(`${python}: ${r.error ? r.error.message : errorLine(r.stderr)}`)
  }
  return { why: whys.join('; ') }
}
