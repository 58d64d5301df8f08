/**
 * @module The device check's mesh case: fsdp over `{ data: 2 }` and tensor parallel over `{ model: 2 }`,
 * each member its own process on the driver's GPU, train a few steps and must match one process on
 * the GPU within 1e-4 (losses, gradient norms, every weight). Each member says which backend and
 * adapter it computes on; a member off the driver's adapter (a machine whose members fell back to
 * SwiftShader or to the CPU kernels) fails the case by name, as does a member that does not start.
 */
import path from 'node:path'
import { LocalClient, withClient } from '@marin/fray'
import type { BackendInfo } from '../src/backend.js'
import { Dataset } from '../src/data/dataset.js'
import { LocalEngine } from '../src/engine.js'
import type { StepResult, TrainTensors } from '../src/engine.js'
import { ModelConfig } from '../src/models/config.js'
import type { ModelConfigInput } from '../src/models/config.js'
import { createModel } from '../src/models/lm.js'
import { AdamWConfig } from '../src/optim/adamw.js'
import { MeshEngine } from '../src/parallel/mesh-engine.js'

export const MESH_TOLERANCE = 1e-4
/** Steps each layout trains. */
export const MESH_STEPS = 3
/** Sequences in each step's global batch. */
export const MESH_BATCH = 4
const STEPS = MESH_STEPS
const BATCH = MESH_BATCH
const LR = 1e-2

/** What one layout's case found; `pass` only when every step and weight was compared and within the tolerance. */
export type MeshCheck = {
  readonly check: 'mesh'
  readonly layout: string
  readonly members: readonly { readonly backend: string; readonly adapter: string | null }[]
  readonly steps: number
  readonly maxLossErr: number
  readonly maxGradNormErr: number
  readonly maxWeightErr: number
  readonly weightsCompared: number
  readonly pass: boolean
  readonly error?: string
}

const LAYOUTS = [
  { name: 'fsdp', layout: 'data 2 fsdp', mesh: { data: 2, model: 1 }, fsdp: true },
  { name: 'model', layout: 'model 2', mesh: { data: 1, model: 2 }, fsdp: false },
] as const

/** The layouts the case can run, by the names `pnpm device-check --mesh` takes. */
export const MESH_LAYOUTS = LAYOUTS.map((l) => l.name)
export type MeshLayoutName = (typeof LAYOUTS)[number]['name']

const describe = (i: BackendInfo | undefined) =>
  i?.adapter
    ? `${i.adapter.description || i.adapter.vendor} (${i.adapter.device}${i.adapter.software ? ', software' : ''})`
    : null

/** Why the members are not all on the driver's GPU (naming the first that is not), or undefined when they are. */
export function memberOffDriver(members: readonly BackendInfo[], driver: BackendInfo): string | undefined {
  if (members.length === 0) return 'no member answered'
  const off = members.findIndex((i) => i.name !== 'webgpu' || !i.adapter || describe(i) !== describe(driver))
  if (off < 0) return undefined
  return (
    `member ${off} computes on ${members[off]!.name} ${describe(members[off]) ?? '(no adapter)'}, ` +
    `not on the driver's ${driver.name} ${describe(driver) ?? '(no adapter)'}`
  )
}

/** Whether a layout's case passes: no error, every step run, weights compared, every error a number within 1e-4. */
export function meshPasses(
  c: Pick<MeshCheck, 'steps' | 'maxLossErr' | 'maxGradNormErr' | 'maxWeightErr' | 'weightsCompared' | 'error'>,
): boolean {
  return (
    c.error === undefined &&
    c.steps === STEPS &&
    c.weightsCompared > 0 &&
    [c.maxLossErr, c.maxGradNormErr, c.maxWeightErr].every((e) => e >= 0 && e < MESH_TOLERANCE)
  )
}

/** Largest |a − b| over two arrays (Infinity when their lengths differ). */
export function maxAbs(a: ArrayLike<number>, b: ArrayLike<number>): number {
  if (a.length !== b.length) return Infinity
  let worst = 0
  for (let i = 0; i < a.length; i++) worst = Math.max(worst, Math.abs(a[i]! - b[i]!))
  return Number.isNaN(worst) ? Infinity : worst
}

async function reference(
  cfg: ModelConfigInput,
  data: Dataset,
): Promise<{ results: StepResult[]; state: TrainTensors }> {
  const engine = new LocalEngine(createModel(cfg, 2), AdamWConfig.parse({}))
  try {
    const results: StepResult[] = []
    for (let s = 0; s < STEPS; s++)
      results.push(await engine.step(await data.trainBatch(s, BATCH, engine.model.config.seqLen, 0), LR))
    return { results, state: await engine.state() }
  } finally {
    await engine.close()
    engine.model.dispose()
  }
}

/**
 * Runs the layouts named in `only` (default both, fsdp first) against one process on the driver's
 * backend `driver` (which must be webgpu). Members start as processes of their own (each starts the
 * GPU backend itself), every layout's at once, and train while this process trains the reference;
 * with a Vulkan loader brought from the registry (`broughtLoader`) they find it on their library path.
 */
export async function meshEquality(
  cfg: ModelConfigInput,
  driver: BackendInfo,
  broughtLoader?: string,
  only: readonly MeshLayoutName[] = MESH_LAYOUTS,
): Promise<MeshCheck[]> {
  const layouts = LAYOUTS.filter((l) => only.includes(l.name))
  if (driver.name !== 'webgpu' || !driver.adapter)
    throw new Error(`device-check mesh: the driver runs on ${driver.name} without a GPU adapter; nothing to compare`)
  if (broughtLoader)
    process.env.LD_LIBRARY_PATH = [path.dirname(broughtLoader), process.env.LD_LIBRARY_PATH].filter(Boolean).join(':')
  const { seqLen: T, vocabSize } = ModelConfig.parse(cfg)
  const tokens = Array.from({ length: BATCH * (T + 1) * (STEPS + 1) }, (_, i) => (i * 7919) % vocabSize)
  const data = Dataset.fromTokens(tokens, { evalFraction: 0 })
  const client = new LocalClient()
  // Every layout's members start at once, while this process trains the reference.
  const starting = layouts.map(({ mesh, fsdp }) => {
    const model = createModel(cfg, 2)
    const p = withClient(client, () => MeshEngine.create(model, AdamWConfig.parse({}), { mesh, fsdp })).finally(() =>
      model.dispose(),
    )
    p.catch(() => {}) // read below, in order
    return p
  })
  // Each layout trains as soon as its members are up, alongside the reference (their first steps compile their
  // shaders meanwhile); the comparison waits for both.
  const members: MeshCheck['members'][] = layouts.map(() => [])
  const training = starting.map(async (p, k) => {
    const engine = await p
    const infos = await engine.group.broadcast.backendInfo()
    members[k] = infos.map((i) => ({ backend: i.name, adapter: describe(i) }))
    const off = memberOffDriver(infos, driver)
    if (off) throw new Error(off)
    const got: StepResult[] = []
    for (let s = 0; s < STEPS; s++) got.push(await engine.step(await data.trainBatch(s, BATCH, T, 0), LR))
    return { got, state: await engine.state() }
  })
  for (const t of training) t.catch(() => {}) // read below, in order
  const out: MeshCheck[] = []
  try {
    const one = await reference(cfg, data)
    for (const [k, { layout }] of layouts.entries()) {
      const found = { steps: 0, maxLossErr: Infinity, maxGradNormErr: Infinity }
      let maxWeightErr = Infinity,
        weightsCompared = 0,
        error: string | undefined
      try {
        const { got, state } = await training[k]!
        found.steps = got.length
        found.maxLossErr = maxAbs(
          got.map((r) => r.loss),
          one.results.map((r) => r.loss),
        )
        found.maxGradNormErr = maxAbs(
          got.map((r) => r.gradNorm),
          one.results.map((r) => r.gradNorm),
        )
        maxWeightErr = 0
        for (const [name, w] of one.state.weights) {
          const v = state.weights.get(name)
          maxWeightErr = Math.max(maxWeightErr, v ? maxAbs(v, w) : Infinity)
          weightsCompared++
        }
        if (state.weights.size !== one.state.weights.size) maxWeightErr = Infinity
      } catch (err) {
        error = (err as Error).message
      }
      const c = { members: members[k]!, ...found, maxWeightErr, weightsCompared, ...(error ? { error } : {}) }
      out.push({ check: 'mesh', layout, ...c, pass: meshPasses(c) })
    }
  } finally {
    await Promise.allSettled(training)
    await Promise.allSettled(starting.map((p) => p.then((e) => e.close())))
    await client.shutdown()
  }
  return out
}
