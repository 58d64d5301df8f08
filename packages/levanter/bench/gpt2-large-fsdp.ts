/**
 * GPT-2 large (774 M parameters: vocab 50257, 36 layers × 1280, 20 heads, context 256) trained on `{ data: 2 }` fsdp,
 * against the PyTorch reference (bench/pytorch-reference.py: the same architecture, optimizer and FLOP formula) in
 * one process on 2 threads, run after ours (never beside it) at each batch asked: a model one process of ours cannot
 * hold, at speed. Our side is the engine a Trainer with `mesh: { data: 2 }, fsdp: true` runs (MeshEngine), started
 * with `MeshEngine.init` so that the members draw their own halves of the initial weights and no process ever holds
 * the whole model (a Pipeline would build it in the driver first); each member computes on one core.
 *
 * Lines: `gpt2_large_fsdp_2_train_tokens_per_s` (median of the timed steps; baseline and ratio against PyTorch's best
 * batch), `…_step` and `…_members_cpu_per_step` (every thread of both members: what a shared machine's scheduling
 * cannot inflate), `…_init`, the members' largest peak RSS and their sum (driver included), the largest wasm heap
 * and the bytes of parameters + AdamW moments a member owns; per PyTorch batch b
 * `pytorch_gpt2_large_train_tokens_per_s_batch_<b>`, `…_peak_rss_batch_<b>` and `…_cpu_per_step_batch_<b>`; the
 * 1-minute load average and the memory available (from /proc/meminfo) before each run. A run that fails prints its
 * error on stderr
 * and leaves its lines out (exit 1).
 *
 * Settings: GPT2_LARGE_BATCH sequences per step, split over the 2 members @default 2; GPT2_LARGE_CONTEXT @default 256;
 * GPT2_LARGE_STEPS timed steps after 1 warm-up @default 2; GPT2_LARGE_PYTORCH_BATCHES a list @default 1,2,4 (empty:
 * no PyTorch); GPT2_LARGE_OURS=0 leaves our run out; GPT2_LARGE_MIN_FREE_GIB: a run does not start while less memory
 * is available @default 14 (the machine is shared; a run that cannot fit would push the others out), nor PyTorch at
 * batch b below its own need, about 12.5 + 1.4·b GiB (its peak RSS was 13.5, 14.7 and 17.5 GiB at batch 1, 2, 4).
 * `node_modules/.bin/tsx packages/levanter/bench/gpt2-large-fsdp.ts`
 */
import { readFileSync } from 'node:fs'
import os from 'node:os'
import { emit, median } from '@marin/rigging/bench'
import { findTorch, pytorchRun, tryRun } from './processes.js'
import type { Result } from './processes.js'

export const GPT2_LARGE = { vocabSize: 50257, seqLen: 256, dModel: 1280, nLayers: 36, nHeads: 20 }
const ADAMW = { beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0.1, maxGradNorm: 1 }
const b = 'levanter'

/** A whole-number env setting of at least `min`; anything else exits 2 naming it. */
function setting(name: string, dflt: number, min: number): number {
  const raw = process.env[name]
  if (raw === undefined || raw === '') return dflt
  const n = Number(raw)
  if (Number.isInteger(n) && n >= min) return n
  process.stderr.write(`gpt2-large bench: ${name} must be a whole number ≥ ${min}, got "${raw}"\n`)
  process.exit(2)
}

const batch = setting('GPT2_LARGE_BATCH', 2, 2)
if (batch % 2) {
  process.stderr.write(`gpt2-large bench: GPT2_LARGE_BATCH ${batch} must split evenly over the 2 members\n`)
  process.exit(2)
}
const context = setting('GPT2_LARGE_CONTEXT', 256, 1)
const steps = setting('GPT2_LARGE_STEPS', 2, 1)
const minFreeGiB = setting('GPT2_LARGE_MIN_FREE_GIB', 14, 0)
const ours = setting('GPT2_LARGE_OURS', 1, 0) > 0
const rawBatches = process.env.GPT2_LARGE_PYTORCH_BATCHES ?? '1,2,4'
const ptBatches = rawBatches.trim() === '' ? [] : rawBatches.split(',').map((s) => Number(s.trim()))
if (ptBatches.some((n) => !(Number.isInteger(n) && n >= 1))) {
  process.stderr.write(
    `gpt2-large bench: GPT2_LARGE_PYTORCH_BATCHES must list whole numbers ≥ 1, got "${rawBatches}"\n`,
  )
  process.exit(2)
}
const config = { ...GPT2_LARGE, seqLen: context }
const tokensPerStep = batch * context
const MiB = 2 ** 20

/** MemAvailable in GiB (the kernel's estimate of what can be allocated without swapping). */
function availableGiB(): number {
  const m = /^MemAvailable:\s+(\d+) kB/m.exec(readFileSync('/proc/meminfo', 'utf8'))
  return m ? Number(m[1]) / 2 ** 20 : Number.NaN
}

/** CPU seconds (user + system, every thread) process `pid` has used so far, from /proc/<pid>/stat. */
function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ') // the fields after the command name, from the 3rd
  return (Number(f[11]) + Number(f[12])) / 100 // utime, stime in clock ticks (USER_HZ 100)
}

/** Whether a heavy run that needs `needGiB` may start: false (saying why on stderr) while less than that, or than
 * the setting, is available. */
function roomFor(what: string, at: string, needGiB = 0): boolean {
  const free = availableGiB(),
    need = Math.max(minFreeGiB, needGiB)
  emit({ bench: b, metric: `${at}_memory_available_before`, value: free, unit: 'GiB' })
  emit({ bench: b, metric: `${at}_load_average_1m_before`, value: os.loadavg()[0]!, unit: 'runnable' })
  if (free >= need) return true
  process.stderr.write(
    `gpt2-large bench: ${what} not started: ${free.toFixed(1)} GiB available, it needs ${need.toFixed(1)} ` +
      `(GPT2_LARGE_MIN_FREE_GIB is ${minFreeGiB})\n`,
  )
  return false
}

type Ours = { tokensPerSec: number; stepMs: number; cpuMsPerStep: number; losses: number[] }

/** Our run: the members start (each drawing its part of the weights), 1 + `steps` steps; what they measured. */
async function runOurs(): Promise<Ours> {
  const { initBackend } = await import('../src/backend.js')
  const { Dataset } = await import('../src/data/dataset.js')
  const { MeshEngine } = await import('../src/parallel/mesh-engine.js')
  const info = await initBackend()
  process.stderr.write(
    `gpt2-large bench: levanter { data: 2 } fsdp on ${info.name}, batch ${batch}, context ${context}, ` +
      `1 + ${steps} steps\n`,
  )
  // The token stream of bench/variant.ts and the PyTorch reference, in this vocabulary.
  const tokens = Array.from({ length: 200_000 }, (_, i) => (i * 7919 + (i >> 7)) % config.vocabSize)
  const dataset = Dataset.fromTokens(tokens, { evalFraction: 0 })
  const t0 = performance.now()
  const engine = await MeshEngine.init({ type: 'gpt2', ...config }, 0, ADAMW, {
    mesh: { data: 2, model: 1 },
    fsdp: true,
  })
  emit({ bench: b, metric: 'gpt2_large_fsdp_2_init', value: performance.now() - t0, unit: 'ms' })
  try {
    const times: number[] = [],
      cpu: number[] = [],
      losses: number[] = []
    const cpuNow = () => engine.pids.reduce((a, pid) => a + cpuSeconds(pid), 0)
    for (let s = 0; s <= steps; s++) {
      const batchData = await dataset.trainBatch(s, batch, context, 0)
      const t = performance.now(),
        c = cpuNow()
      const r = await engine.step(batchData, 1e-3)
      const ms = performance.now() - t
      losses.push(r.loss)
      if (s > 0) {
        times.push(ms)
        cpu.push((cpuNow() - c) * 1000)
      }
      process.stderr.write(`gpt2-large bench: step ${s} ${(ms / 1000).toFixed(1)} s, loss ${r.loss.toFixed(4)}\n`)
    }
    const mem = await engine.group.broadcast.memory()
    const rss = mem.map((m) => m.peakRssMiB)
    emit({ bench: b, metric: 'gpt2_large_fsdp_2_member_peak_rss', value: Math.max(...rss), unit: 'MiB' })
    const driver = process.resourceUsage().maxRSS / 1024
    emit({
      bench: b,
      metric: 'gpt2_large_fsdp_2_peak_rss_members_and_driver',
      value: rss.reduce((a, x) => a + x, driver),
      unit: 'MiB',
    })
    emit({ bench: b, metric: 'gpt2_large_fsdp_2_driver_peak_rss', value: driver, unit: 'MiB' })
    const heap = Math.max(...mem.map((m) => m.heapBytes)) / MiB
    emit({ bench: b, metric: 'gpt2_large_fsdp_2_member_wasm_heap', value: heap, unit: 'MiB' })
    const owned = Math.max(...mem.map((m) => m.ownedBytes)) / MiB
    emit({ bench: b, metric: 'gpt2_large_fsdp_2_member_params_and_adamw', value: owned, unit: 'MiB' })
    const stepMs = median(times)
    return { tokensPerSec: (tokensPerStep * 1000) / stepMs, stepMs, cpuMsPerStep: median(cpu), losses }
  } finally {
    await engine.close()
  }
}

const errors: string[] = []
let mine: Ours | undefined
if (ours && roomFor('levanter', 'gpt2_large_fsdp_2')) {
  try {
    mine = await runOurs()
    emit({ bench: b, metric: 'gpt2_large_fsdp_2_step', value: mine.stepMs, unit: 'ms' })
    emit({ bench: b, metric: 'gpt2_large_fsdp_2_members_cpu_per_step', value: mine.cpuMsPerStep, unit: 'ms' })
    process.stderr.write(`gpt2-large bench: levanter losses ${mine.losses.map((l) => l.toFixed(4)).join(' ')}\n`)
  } catch (err) {
    errors.push(`levanter: ${(err as Error).message}`)
  }
}

// PyTorch, one batch at a time, after ours has closed its members.
const torch = ptBatches.length ? findTorch() : undefined
const python = torch && 'python' in torch ? torch.python : undefined
if (torch && !python) errors.push(`no PyTorch reference (${'why' in torch ? torch.why : ''})`)
const pt = new Map<number, Result>()
for (const n of python ? ptBatches : []) {
  if (!roomFor(`PyTorch batch ${n}`, `pytorch_gpt2_large_batch_${n}`, 12.5 + 1.4 * n)) continue
  const spec = pytorchRun(python!, 2, String(steps), config)
  const o = tryRun({
    ...spec,
    label: `pytorch gpt2-large batch ${n}, 2 threads`,
    args: [...spec.args, '--vocab', String(config.vocabSize), '--context', String(context), '--batch', String(n)],
    timeoutMs: 60 * 60 * 1000,
  })
  if (!o.ok) {
    errors.push(o.error)
    continue
  }
  pt.set(n, o.result)
  emit({
    bench: b,
    metric: `pytorch_gpt2_large_train_tokens_per_s_batch_${n}`,
    value: o.result.tokensPerSec!,
    unit: 'tokens/s',
  })
  emit({ bench: b, metric: `pytorch_gpt2_large_peak_rss_batch_${n}`, value: o.result.peakRssMiB!, unit: 'MiB' })
  emit({ bench: b, metric: `pytorch_gpt2_large_cpu_per_step_batch_${n}`, value: o.result.cpuMsPerStep!, unit: 'ms' })
}

if (mine) {
  const best = [...pt.values()].reduce<number | undefined>((a, r) => Math.max(a ?? 0, r.tokensPerSec!), undefined)
  emit({
    bench: b,
    metric: 'gpt2_large_fsdp_2_train_tokens_per_s',
    value: mine.tokensPerSec,
    unit: 'tokens/s',
    ...(best !== undefined ? { baseline: best } : {}),
  })
}
for (const e of errors) process.stderr.write(`gpt2-large bench: ${e}\n`)
if (errors.length) process.exitCode = 1
