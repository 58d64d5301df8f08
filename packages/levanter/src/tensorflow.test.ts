/**
 * The TensorFlow backend (tfjs-node, an optional peer whose install needs libtensorflow): where its
 * binding loads, tiny GPT-2 trains on it, on the device-resident step, within 1e-4 of wasm. Each
 * backend runs in its own child process. Where the binding does not load (no libtensorflow, the
 * default here) the test is skipped, and says so.
 */
import { execFile } from 'node:child_process'
import path from 'node:path'
import { promisify } from 'node:util'
import { expect, test } from 'vitest'

const script = path.join(import.meta.dirname, 'test-support', 'backend-train.ts')

async function losses(backend: string): Promise<number[]> {
  const spec = JSON.stringify([{ model: 'gpt2', maxSteps: 10 }])
  const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', script, spec], {
    env: { ...process.env, LEVANTER_BACKEND: backend },
  })
  return (JSON.parse(stdout.trim().split('\n').at(-1)!) as { losses: number[][] }).losses[0]!
}

async function bindingLoads(): Promise<boolean> {
  for (const spec of ['@tensorflow/tfjs-node-gpu', '@tensorflow/tfjs-node']) {
    try {
      await import(/* @vite-ignore */ spec)
      return true
    } catch {}
  }
  return false
}

const loads = await bindingLoads()
if (!loads) console.info('tensorflow.test: the tfjs-node binding does not load here (no libtensorflow); skipped')

test.runIf(loads)(
  'where the TensorFlow binding loads, tiny GPT-2 trains on it within 1e-4 of wasm',
  async () => {
    const [tf, wasm] = await Promise.all([losses('tensorflow'), losses('wasm')])
    expect(tf).toHaveLength(10)
    for (let i = 0; i < 10; i++) expect(Math.abs(tf[i]! - wasm[i]!), `step ${i + 1}`).toBeLessThan(1e-4)
  },
  300_000,
)
