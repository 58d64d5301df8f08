/**
 * `pnpm device-check` as a real child process: bad usage exits 2 naming the flag; with
 * `--software --quick` it runs whole on SwiftShader (or this machine's GPU) and prints its JSON lines,
 * model-axis members on the same adapter among them. One mesh layout (`--mesh model`) proves the mesh
 * case end to end: its members are processes of their own, each compiling its shaders on SwiftShader,
 * so a second layout doubles the case's cost; both layouts' numerics on webgpu are
 * src/parallel/mesh.webgpu.test.ts's, and the case's pass rules scripts/device-mesh-check.test.ts's.
 */
import { execFile } from 'node:child_process'
import path from 'node:path'
import { expect, test } from 'vitest'

const script = path.join(import.meta.dirname, '..', '..', 'scripts', 'device-check.ts')

function run(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, ['--import', 'tsx', script, ...args], { maxBuffer: 16 << 20 }, (err, stdout, stderr) =>
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    )
  })
}

test('bad usage exits 2 and names the flag', async () => {
  const [r, unknown, mesh] = await Promise.all([run(['--steps', '0']), run(['--gpu']), run(['--mesh', 'model,pp'])])
  expect(r.code).toBe(2)
  expect(r.stderr).toMatch(/--steps 0: give a positive integer/)
  expect(r.stderr).toMatch(/usage: pnpm device-check/)
  expect(unknown.code).toBe(2)
  expect(unknown.stderr).toMatch(/--gpu/)
  expect(mesh.code).toBe(2)
  expect(mesh.stderr).toMatch(/--mesh model,pp: "pp" is not a layout; give fsdp, model/)
})

test('--software --quick prints the adapter, passing kernel and mesh checks, a training line per model', async () => {
  const r = await run(['--software', '--quick', '--steps', '1', '--mesh', 'model'])
  expect(r.stderr.replace(/Warning: vkCreateInstance[^\n]*\n|\s+at CheckVkSuccessImpl[^\n]*\n/g, '')).not.toMatch(
    /Error/,
  )
  const lines = r.stdout
    .trim()
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>)
  const adapter = lines.find((l) => l.check === 'adapter')
  expect(adapter?.backend).toBe('webgpu')
  const kernels = lines.filter((l) => l.check === 'kernel')
  expect(kernels.length).toBeGreaterThanOrEqual(14)
  // levanter's WGSL kernels (src/webgpu/kernels/) against the composite ops on cpu
  for (const name of [
    'causal softmax kernel',
    'bias softmax kernel',
    'layer norm kernel',
    'column sum kernel',
    'AdamW kernels',
  ])
    expect(
      kernels.map((k) => String(k.name)).some((n) => n.startsWith(name)),
      name,
    ).toBe(true)
  for (const k of kernels) expect(k.pass, String(k.name)).toBe(true)
  // tensor-parallel members, each a process of its own on the same adapter, against one process
  const meshes = lines.filter((l) => l.check === 'mesh')
  expect(meshes.map((m) => m.layout)).toEqual(['model 2'])
  for (const m of meshes) {
    expect(m.error, String(m.layout)).toBeUndefined()
    expect(m.members).toEqual([
      { backend: 'webgpu', adapter: expect.any(String) },
      { backend: 'webgpu', adapter: expect.any(String) },
    ])
    expect(m.steps).toBe(3)
    expect(m.weightsCompared).toBeGreaterThan(0)
    for (const k of ['maxLossErr', 'maxGradNormErr', 'maxWeightErr']) expect(m[k], k).toBeLessThan(1e-4)
    expect(m.pass).toBe(true)
  }
  const train = lines.filter((l) => l.check === 'train')
  expect(train.map((t) => t.model)).toEqual(['reference', 'gpt2-small'])
  for (const t of train) {
    expect(t.tokensPerSec).toBeGreaterThan(0)
    expect(t.peakGpuBytes).toBeGreaterThan(0)
    expect(t.hostDeviceBytesPerStep).toEqual({ toDevice: expect.any(Number), toHost: 8 })
  }
  expect(lines.at(-1)).toMatchObject({ check: 'done', ok: true })
  expect(r.code).toBe(0)
}, 600_000)
