/**
 * The default backend selection in a fresh process, with the GPU probe injected:
 * `tsx default-backend.ts <gpu|software|throws|none|gpu-mesh|gpu-fsdp>` hands the selection the real
 * SwiftShader device described as an NVIDIA GPU (`gpu`) or as itself (`software`), a probe that
 * fails, or no adapter; with `gpu` it then trains the tiny quickstart model two steps through
 * `Pipeline`, with `gpu-mesh` the same over two data-parallel replicas (and the run names their
 * backends), with `gpu-fsdp` over two fsdp members (errors printed). Prints `{ info, backend, run }`
 * as its last stdout line (logs go to stderr).
 */
import * as tf from '@tensorflow/tfjs'
import { initBackend } from '../backend.js'
import { Dataset } from '../data/dataset.js'
import { createModel } from '../models/lm.js'
import { Pipeline } from '../pipeline.js'
import { MemoryTracker } from '../trackers.js'
import { Trainer } from '../trainer.js'
import type { ProbedAdapter } from '../webgpu/adapter.js'
import { swiftShaderAdapter } from '../webgpu/adapter.js'
import { TINY_MODELS } from './backend-train.js'

export const INJECTED_GPU = {
  vendor: 'nvidia',
  architecture: 'hopper',
  device: '0x2335',
  description: 'NVIDIA H200',
  isFallbackAdapter: false,
}

const mode = process.argv[2]
async function swiftShader(): Promise<ProbedAdapter> {
  const ss = (await swiftShaderAdapter())!
  return { gpu: ss.gpu, adapter: ss.adapter, description: ss.adapter.info }
}
const probes: Record<string, () => Promise<ProbedAdapter | undefined>> = {
  gpu: async () => ({ ...(await swiftShader()), description: INJECTED_GPU }),
  software: swiftShader,
  throws: async () => {
    throw new Error('vkCreateInstance failed')
  },
  none: async () => undefined,
}
const info = await initBackend(undefined, { probeAdapter: probes[mode!.replace(/-(mesh|fsdp)$/, '')]! })
let run: unknown
if (mode === 'gpu' || mode === 'gpu-mesh' || mode === 'gpu-fsdp') {
  const model = createModel(TINY_MODELS.gpt2, 1)
  const mesh = mode === 'gpu' ? { data: 1 } : { data: 2 }
  const trainer = new Trainer(
    { batchSize: 2, logEvery: 1, mesh, fsdp: mode === 'gpu-fsdp' },
    { trackers: [new MemoryTracker()] },
  )
  let pipeline: Pipeline | undefined
  let replicas: string[] | undefined
  trainer.addHook(2, async () => {
    const engine = pipeline?.engine as { group?: { broadcast: { backend(): Promise<string[]> } } } | undefined
    if (engine?.group) replicas = await engine.group.broadcast.backend()
  })
  const tokens = Array.from({ length: 2000 }, (_, i) => (i * 37) % 383)
  try {
    const dataset = Dataset.fromTokens(tokens, { evalFraction: 0 })
    pipeline = new Pipeline({ dataset, model, trainer, maxSteps: 2 })
    const r = await pipeline.run()
    run = { backend: r.backend, losses: r.losses, replicas }
  } catch (err) {
    run = { error: (err as Error).message, code: (err as { code?: string }).code }
  }
  model.dispose()
}
process.stdout.write(`${JSON.stringify({ info, backend: tf.getBackend(), run })}\n`)
