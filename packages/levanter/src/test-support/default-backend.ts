/**
 * The default backend selection in a fresh process, with the GPU probe injected:
 * `tsx default-backend.ts <gpu|software|throws|none>` hands the selection the real
 * SwiftShader device described as an NVIDIA GPU (`gpu`) or as itself (`software`), a probe that
 * fails, or no adapter. With `gpu` it then trains the tiny GPT-2 (test-support/backend-train.ts) two steps
 * through `Pipeline` alone, over two data-parallel replicas, then over two fsdp members (`run` is
 * `{ single, mesh, fsdp }`; each names its members' backends, errors printed).
 * Prints `{ info, backend, pid, run }` as its last stdout line (logs go to stderr, the members' among them: `pid`
 * tells this process's own). The modules of training are loaded in `gpu` mode only: a process that only selects
 * loads what the selection does (backend.ts), not the models, the pipeline and their schemas.
 */
import * as tf from '@tensorflow/tfjs'
import { initBackend } from '../backend.js'
import type { ProbedAdapter } from '../webgpu/adapter.js'
import { swiftShaderAdapter } from '../webgpu/adapter.js'

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
const info = await initBackend(undefined, { probeAdapter: probes[mode!]! })
/** Train the tiny GPT-2 two steps through `Pipeline` over `mesh`: its backend and losses, and the backends its
 * replicas or members name; or the error it failed with. */
async function train(mesh: { data: number }, fsdp: boolean): Promise<unknown> {
  const [{ Dataset }, { createModel }, { Pipeline }, { MemoryTracker }, { Trainer }, { TINY_MODELS, TINY_TOKENS }] =
    await Promise.all([
      import('../data/dataset.js'),
      import('../models/lm.js'),
      import('../pipeline.js'),
      import('../trackers.js'),
      import('../trainer.js'),
      import('./backend-train.js'),
    ])
  const model = createModel(TINY_MODELS.gpt2, 1)
  const trainer = new Trainer({ batchSize: 2, logEvery: 1, mesh, fsdp }, { trackers: [new MemoryTracker()] })
  let pipeline: InstanceType<typeof Pipeline> | undefined
  let replicas: string[] | undefined
  trainer.addHook(2, async () => {
    const engine = pipeline?.engine as { group?: { broadcast: { backend(): Promise<string[]> } } } | undefined
    if (engine?.group) replicas = await engine.group.broadcast.backend()
  })
  try {
    const dataset = Dataset.fromTokens(TINY_TOKENS, { evalFraction: 0 })
    pipeline = new Pipeline({ dataset, model, trainer, maxSteps: 2 })
    const r = await pipeline.run()
    return { backend: r.backend, losses: r.losses, replicas }
  } catch (err) {
    return { error: (err as Error).message, code: (err as { code?: string }).code }
  } finally {
    model.dispose()
  }
}

// One process for the run alone and both layouts: each member process compiles its own shaders, the driver need not
// start again.
let run: unknown
if (mode === 'gpu')
  run = {
    single: await train({ data: 1 }, false),
    mesh: await train({ data: 2 }, false),
    fsdp: await train({ data: 2 }, true),
  }
process.stdout.write(`${JSON.stringify({ info, backend: tf.getBackend(), pid: process.pid, run })}\n`)
