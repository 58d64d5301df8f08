import { execFile } from 'node:child_process'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { describe, expect, test } from 'vitest'
import { MeshConfig, ModelConfig, TrainerConfig, trainerConfigIssues } from './config.js'
import type { MeshConfigInput } from './config.js'

/** Every module a fresh process loads to import `spec`. */
async function modulesLoadedBy(spec: string): Promise<string[]> {
  const child = join(import.meta.dirname, 'test-support/loaded-modules.ts')
  const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', child, spec], {
    cwd: import.meta.dirname,
    maxBuffer: 16 << 20,
  })
  return (JSON.parse(stdout) as { modules: string[] }).modules
}

describe('@marin/levanter/config', () => {
  test('loads no @tensorflow module (and the recording sees what it does load)', async () => {
    const [config, optimizer] = await Promise.all([
      modulesLoadedBy('@marin/levanter/config'),
      modulesLoadedBy('../optim/adamw.ts'),
    ])
    expect(config.some((m) => m.includes('/src/config.ts'))).toBe(true)
    expect(config.some((m) => m.includes('zod'))).toBe(true)
    expect(config.filter((m) => m.includes('@tensorflow'))).toEqual([])
    // the same recording on a module that does need tfjs: the check above can fail
    expect(optimizer.some((m) => m.includes('@tensorflow'))).toBe(true)
  }, 120_000)

  test('holds the trainer, mesh and model schemas, with their defaults', () => {
    const t = TrainerConfig.parse({ batchSize: 4, mesh: { data: 2 } })
    expect(t.mesh).toEqual({ data: 2, model: 1 })
    expect(t.beta2).toBe(0.95)
    const mesh: MeshConfigInput = {}
    expect(MeshConfig.parse(mesh)).toEqual({ data: 1, model: 1 })
    expect(ModelConfig.parse({ type: 'gpt2', vocabSize: 10 }).dModel).toBe(768)
  })

  test('trainerConfigIssues names each bad field after the prefix, and the batch rule across fields', () => {
    expect(trainerConfigIssues({ batchSize: 4, mesh: { data: 2, model: 2 }, fsdp: true })).toEqual([])
    expect(trainerConfigIssues({ mesh: { data: 0, pipe: 2 }, fsdp: 'yes' }, 'trainer.')).toEqual([
      'trainer.mesh.data: Too small: expected number to be >0',
      'trainer.mesh.pipe: is not a mesh axis; the axes are data and model',
      'trainer.fsdp: Invalid input: expected boolean, received string',
    ])
    expect(trainerConfigIssues({ batchSize: 3, mesh: { data: 2 } }, 'trainer.')).toEqual([
      'trainer.batchSize 3 must be a multiple of trainer.mesh.data 2',
    ])
    expect(trainerConfigIssues({ lerningRate: 1 })).toEqual(['lerningRate: Unrecognized key: "lerningRate"'])
  })
})
