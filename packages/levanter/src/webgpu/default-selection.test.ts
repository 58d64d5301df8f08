/**
 * The default backend selection (no LEVANTER_BACKEND) in fresh processes with the GPU probe
 * injected: a hardware adapter is picked, and training runs on it (the real SwiftShader device,
 * described as a GPU); a software adapter, a failing probe or none fall through to the CPU kernels
 * without a word above debug level.
 */
import { execFile } from 'node:child_process'
import path from 'node:path'
import { promisify } from 'node:util'
import { expect, test } from 'vitest'

const script = path.join(import.meta.dirname, '..', 'test-support', 'default-backend.ts')

async function select(
  mode: string,
  backend?: string,
): Promise<{ out: Record<string, any>; logs: Record<string, any>[] }> {
  const env: Record<string, string | undefined> = { ...process.env, LOG_LEVEL: 'info', LOG_FORMAT: 'json' }
  delete env.LEVANTER_BACKEND
  if (backend) env.LEVANTER_BACKEND = backend
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

/** The data-parallel and the fsdp run under one driver process, once for each LEVANTER_BACKEND; with it unset the
 * driver (`gpu`) first trains alone: the first test checks that run, the data-parallel ones compare their losses
 * with it. */
const parallelRuns = new Map<string | undefined, ReturnType<typeof select>>()
function selectParallel(backend: string | undefined) {
  if (!parallelRuns.has(backend)) parallelRuns.set(backend, select(backend ? 'gpu-parallel' : 'gpu', backend))
  return parallelRuns.get(backend)!
}
const selectGpu = () => selectParallel(undefined)

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

// Three short processes, side by side.
test.concurrent.for(['software', 'throws', 'none'])(
  'a %s probe falls through to the CPU kernels, quietly',
  { timeout: 120_000 },
  async (mode, { expect }) => {
    const { out, logs } = await select(mode)
    expect(out.backend).toBe('wasm')
    expect(out.info.name).toBe('wasm')
    expect(out.info.adapter).toBeUndefined()
    expect(logs.filter((l) => l.level === 'warn' || l.level === 'error' || l.level >= 40)).toEqual([])
  },
)

test.each([undefined, 'webgpu'])(
  'under a webgpu driver (LEVANTER_BACKEND=%s), data-parallel replicas train on webgpu, as one process',
  async (backend) => {
    const [single, driver] = [await selectGpu(), await selectParallel(backend)]
    const mesh = driver.out.run.mesh
    expect(driver.out.backend).toBe('webgpu')
    expect(mesh.error).toBeUndefined()
    expect(mesh.replicas).toEqual(['webgpu', 'webgpu'])
    expect(driver.logs.filter((l) => /CPU kernels/.test(l.msg))).toEqual([])
    expect(mesh.losses).toHaveLength(2)
    const alone = single.out.run.single.losses
    mesh.losses.forEach((l: number, i: number) => expect(Math.abs(l - alone[i])).toBeLessThan(1e-4))
  },
  300_000,
)

test.each([undefined, 'webgpu'])(
  'under a webgpu driver (LEVANTER_BACKEND=%s), fsdp members train on webgpu, as one process',
  async (backend) => {
    const [single, driver] = [await selectGpu(), await selectParallel(backend)]
    const fsdp = driver.out.run.fsdp
    expect(driver.out.backend).toBe('webgpu')
    expect(fsdp.error).toBeUndefined()
    expect(fsdp.replicas).toEqual(['webgpu', 'webgpu'])
    expect(fsdp.losses).toHaveLength(2)
    const alone = single.out.run.single.losses
    fsdp.losses.forEach((l: number, i: number) => expect(Math.abs(l - alone[i])).toBeLessThan(1e-4))
  },
  300_000,
)
