/**
 * The default backend selection (no LEVANTER_BACKEND) in fresh processes with the GPU probe
 * injected: a hardware adapter is picked, and training runs on it (the real SwiftShader device,
 * described as a GPU); a software adapter, a failing probe or none fall through to the CPU kernels
 * without a word above debug level.
 */
import { execFile } from 'node:child_process'
import path from 'node:path'
import { promisify } from 'node:util'
import { beforeAll, expect, test } from 'vitest'

const script = path.join(import.meta.dirname, '..', 'test-support', 'default-backend.ts')

async function select(mode: string): Promise<{ out: Record<string, any>; logs: Record<string, any>[] }> {
  const env: Record<string, string | undefined> = { ...process.env, LOG_LEVEL: 'info', LOG_FORMAT: 'json' }
  delete env.LEVANTER_BACKEND
  const { stdout, stderr } = await promisify(execFile)(process.execPath, ['--import', 'tsx', script, mode], {
    env,
    maxBuffer: 16 << 20,
  })
  const logs = stderr
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, any>)
  return { out: JSON.parse(stdout.trim().split('\n').at(-1)!), logs }
}

/** One driver process (`gpu` mode, LEVANTER_BACKEND unset) trains alone, then over data-parallel replicas, then over
 * fsdp members: the first test checks the run alone, the parallel ones compare their losses with it. The members are
 * processes of their own, without the injected probe: on webgpu only because the driver put them there. A driver
 * that chose webgpu by LEVANTER_BACKEND=webgpu hands its members the same `backend` (parallel/mesh-engine.ts reads
 * `tf.getBackend()`, not how it was chosen): data-parallel.webgpu.test.ts trains such a driver's replica processes,
 * and parallel/mesh.webgpu.test.ts fsdp members, on webgpu. */
type Selected = ReturnType<typeof select>
const runs = new Map<string, Selected>()
const selected = (mode: string): Selected => {
  let run = runs.get(mode)
  if (!run) {
    runs.set(mode, (run = select(mode)))
    run.catch(() => {}) // its test reports a failure: not an unhandled rejection before that test awaits it
  }
  return run
}
const selectGpu = () => selected('gpu')
// The four processes start side by side, the long `gpu` one first: each test awaits its own.
beforeAll(() => {
  for (const mode of ['gpu', 'software', 'throws', 'none']) selected(mode)
})

const GPU = { vendor: 'nvidia', architecture: 'hopper', device: '0x2335', description: 'NVIDIA H200', software: false }

test('with a hardware adapter the default is webgpu: one log line and the run name backend and adapter', async () => {
  const { out, logs } = await selectGpu()
  expect(out.backend).toBe('webgpu')
  expect(out.info).toEqual({ name: 'webgpu', threads: 0, simd: false, adapter: GPU })
  // this process's own lines (its members, processes of their own, log theirs to the same stream)
  const selected = logs.filter((l) => l.msg === 'tensor backend selected' && l.pid === out.pid)
  expect(selected).toHaveLength(1)
  expect(selected[0]).toMatchObject({ name: 'webgpu', adapter: GPU })
  expect(out.run.single.backend).toEqual(out.info) // the run's provenance (and its checkpoints' manifests)
  expect(out.run.single.losses).toHaveLength(2)
  for (const l of out.run.single.losses) expect(Number.isFinite(l)).toBe(true)
}, 300_000)

// Three short processes, started with the `gpu` one.
test.concurrent.for(['software', 'throws', 'none'])(
  'a %s probe falls through to the CPU kernels, quietly',
  { timeout: 120_000 },
  async (mode, { expect }) => {
    const { out, logs } = await selected(mode)
    expect(out.backend).toBe('wasm')
    expect(out.info.name).toBe('wasm')
    expect(out.info.adapter).toBeUndefined()
    expect(logs.filter((l) => l.level === 'warn' || l.level === 'error' || l.level >= 40)).toEqual([])
  },
)

test('under a default-selected webgpu driver, data-parallel replicas train on webgpu, as one process', async () => {
  const driver = await selectGpu()
  const mesh = driver.out.run.mesh
  expect(driver.out.backend).toBe('webgpu')
  expect(mesh.error).toBeUndefined()
  expect(mesh.replicas).toEqual(['webgpu', 'webgpu'])
  expect(driver.logs.filter((l) => /CPU kernels/.test(l.msg))).toEqual([])
  expect(mesh.losses).toHaveLength(2)
  const alone = driver.out.run.single.losses
  mesh.losses.forEach((l: number, i: number) => expect(Math.abs(l - alone[i])).toBeLessThan(1e-4))
}, 300_000)

test('under a default-selected webgpu driver, fsdp members train on webgpu, as one process', async () => {
  const driver = await selectGpu()
  const fsdp = driver.out.run.fsdp
  expect(driver.out.backend).toBe('webgpu')
  expect(fsdp.error).toBeUndefined()
  expect(fsdp.replicas).toEqual(['webgpu', 'webgpu'])
  expect(fsdp.losses).toHaveLength(2)
  const alone = driver.out.run.single.losses
  fsdp.losses.forEach((l: number, i: number) => expect(Math.abs(l - alone[i])).toBeLessThan(1e-4))
}, 300_000)
