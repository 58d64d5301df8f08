/**
 * Where a GPT-2 training step's time goes, counted at the native addon: every call into native/ (the GEMM by shape
 * and transposes, the fused affine forward, attention, cross-entropy, AdamW, …) timed by this process's CPU time and
 * by wall time, per step, largest first, and the step's CPU time outside them. CPU time is what a shared machine
 * cannot inflate (tf.profile's wall-time scopes can: they counted the fused forward products at about half the rate
 * of the backward products of the same shapes, which CPU time per call does not show).
 * `node --import tsx bench/profile-native.ts [small|small_ctx1024|medium] [steps]` (LEVANTER_THREADS=1 for one
 * thread; the wrapper's own cost is a few microseconds a call; LEVANTER_PROFILE_ADDON as below).
 */
import { Module, createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'

const ADDON = fileURLToPath(new URL('../native/build/Release/levanter_gemm.node', import.meta.url))
const size = process.argv[2] ?? 'small'
const steps = Number(process.argv[3] ?? 2)
if (!Number.isInteger(steps) || steps < 1)
  throw new Error(`profile-native: steps must be a whole number ≥ 1, got ${process.argv[3]}`)

// The addon's exports are read-only: put a timing copy in the require cache before levanter loads it.
// LEVANTER_PROFILE_ADDON=<path> profiles another build of the addon (a saved copy: before/after in one session).
const req = createRequire(import.meta.url)
const other = process.env.LEVANTER_PROFILE_ADDON
const real = req(other || ADDON) as Record<string, unknown>
const stats = new Map<string, { cpu: number; wall: number; n: number }>()
let active = false
const floats = (x: unknown) => (x as Float32Array).length
const keyOf = (name: string, a: unknown[]) => {
  if (name === 'gemm') {
    const flags = `${a[7] ? ' tA' : ''}${a[8] ? ' tB' : ''}${Number(a[9]) > 1 ? ` ×${a[9]}` : ''}`
    return `gemm M${a[4]} K${a[5]} N${a[6]}${flags}`
  }
  if (name === 'affineForward') {
    const out = floats(a[2])
    return `affineForward [${floats(a[0]) / (floats(a[1]) / out)}, ${floats(a[1]) / out}]·[.., ${out}]`
  }
  return name
}
const timed: Record<string, unknown> = {}
for (const name of Object.getOwnPropertyNames(real)) {
  const f = real[name]
  if (typeof f !== 'function') {
    timed[name] = f
    continue
  }
  timed[name] = (...args: unknown[]) => {
    if (!active) return f(...args)
    const c0 = process.cpuUsage(),
      t0 = performance.now()
    try {
      return f(...args)
    } finally {
      const c = process.cpuUsage(c0)
      const key = keyOf(name, args)
      const e = stats.get(key) ?? { cpu: 0, wall: 0, n: 0 }
      e.cpu += (c.user + c.system) / 1000
      e.wall += performance.now() - t0
      e.n++
      stats.set(key, e)
    }
  }
}
// (not both builds loaded: their inline statics, the thread pool included, would be shared between them)
const entry = new Module(ADDON)
entry.exports = timed
entry.loaded = true
req.cache[ADDON] = entry

const tf = await import('@tensorflow/tfjs')
const { initBackend } = await import('../src/backend.js')
const { Dataset } = await import('../src/data/dataset.js')
const { maskCount } = await import('../src/data/batch.js')
const { Gpt2LM } = await import('../src/models/lm.js')
const { AdamW, AdamWConfig } = await import('../src/optim/adamw.js')
const { computeGrads } = await import('../src/train-step.js')
const { GPT2_SIZES } = await import('./gpt2-sizes.js')
if (!Object.hasOwn(GPT2_SIZES, size)) throw new Error(`profile-native: size must be one of ${Object.keys(GPT2_SIZES)}`)
const { config: c, batch } = GPT2_SIZES[size as keyof typeof GPT2_SIZES]
const info = await initBackend()
console.log(`backend ${info.name}, gemm ${info.gemm}, native ${JSON.stringify(info.native ?? null)}, ${size}`)
const model = new Gpt2LM(c, 0)
const opt = new AdamW(AdamWConfig.parse({}), model)
const tokens = Array.from({ length: 200_000 }, (_, i) => (i * 7919 + (i >> 7)) % c.vocabSize)
const dataset = Dataset.fromTokens(tokens, { evalFraction: 0 })
const cpuMs = (u: NodeJS.CpuUsage) => (u.user + u.system) / 1000
let stepCpu = 0,
  stepWall = 0
const step = async (s: number) => {
  const b = await dataset.trainBatch(s, batch, c.seqLen, 0)
  const c0 = process.cpuUsage(),
    t0 = performance.now()
  const { grads } = computeGrads(model, b, maskCount(b))
  opt.apply(grads, 1e-3)
  tf.dispose([...grads.values()])
  return { cpu: cpuMs(process.cpuUsage(c0)), wall: performance.now() - t0 }
}
await step(0)
active = true
for (let s = 1; s <= steps; s++) {
  const r = await step(s)
  stepCpu += r.cpu
  stepWall += r.wall
  console.log(JSON.stringify({ step: s, cpuMs: Math.round(r.cpu), wallMs: Math.round(r.wall) }))
}
const rows = [...stats].sort((a, b) => b[1].cpu - a[1].cpu)
let inside = 0
console.log(' cpu ms/step  share  wall ms/step  calls  native call')
for (const [k, e] of rows) {
  inside += e.cpu
  const share = ((100 * e.cpu) / stepCpu).toFixed(1)
  const cpu = (e.cpu / steps).toFixed(1).padStart(11),
    wall = (e.wall / steps).toFixed(1).padStart(12)
  console.log(`${cpu} ${share.padStart(5)}% ${wall} ${String(e.n / steps).padStart(6)}  ${k}`)
}
const outside = stepCpu - inside
console.log(
  `step: ${(stepCpu / steps).toFixed(0)} ms CPU, ${(stepWall / steps).toFixed(0)} ms wall; ` +
    `outside native calls ${(outside / steps).toFixed(0)} ms CPU (${((100 * outside) / stepCpu).toFixed(1)}%)`,
)
