/**
 * `marin serve` on levanter's webgpu backend (SwiftShader from the registry where there is no GPU):
 * one greedy completion over HTTP gives the cpu backend's tokens. Each backend runs in a child
 * process of its own (a process has one tensor backend).
 */
import { execFile } from 'node:child_process'
import path from 'node:path'
import { promisify } from 'node:util'
import { expect, test } from 'vitest'

const script = path.resolve(import.meta.dirname, '../fixtures/serve-greedy.ts')

type Served = { backend: string; text: string; tokens: string[]; logprobs: number[] }

async function serveOn(backend: string): Promise<Served> {
  const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', script], {
    env: { ...process.env, LEVANTER_BACKEND: backend },
    maxBuffer: 16 << 20,
  })
  return JSON.parse(stdout.trim().split('\n').at(-1)!) as Served
}

test('a tiny model served on webgpu completes greedily with the cpu backend tokens', async () => {
  const [gpu, cpu] = await Promise.all([serveOn('webgpu'), serveOn('cpu')])
  expect(gpu.backend).toBe('webgpu')
  expect(cpu.backend).toBe('cpu')
  expect(gpu.tokens).toHaveLength(6)
  expect(new Set(gpu.tokens).size).toBeGreaterThan(1) // not a flat model repeating one token
  expect(gpu.tokens).toEqual(cpu.tokens)
  expect(gpu.text).toBe(cpu.text)
  gpu.logprobs.forEach((lp, i) => expect(Math.abs(lp - cpu.logprobs[i]!), `token ${i + 1}`).toBeLessThan(1e-4))
}, 240_000)
