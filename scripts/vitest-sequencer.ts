/**
 * @module The order `pnpm test` starts its files in: the longest first, across all projects. vitest's own order goes
 * project by project (by name), and on a fresh clone, where it knows no durations, by file size within each: the
 * webgpu files, short files that train on SwiftShader for a minute, then start late, and with two workers the last
 * slow file to start holds the run's tail alone. Durations come from vitest's cache of earlier runs
 * (node_modules/.vite); files it has not timed take the estimates of `ESTIMATES` (seconds on a quiet 2-core
 * machine: an order, not a limit), else count as quick, larger files first. `--sequence.shuffle` orders the files at
 * random instead, by `--sequence.seed` (as vitest's own sequencer does): how a run shows files that depend on
 * each other's order.
 */
import { relative } from 'node:path'
import { BaseSequencer } from 'vitest/node'
import type { TestSpecification } from 'vitest/node'

/** The slowest files, `<project>:<path from the repository root>`, in seconds: update it as the ten slowest change. */
export const ESTIMATES: Readonly<Record<string, number>> = {
  'levanter:packages/levanter/src/webgpu/default-selection.test.ts': 45,
  'levanter:packages/levanter/src/webgpu/device-check.test.ts': 54,
  'scripts:scripts/docs-site.test.ts': 36,
  'experiments:experiments/guides/guides.test.ts': 32,
  'levanter:packages/levanter/src/parallel/hosts.test.ts': 30,
  'experiments:experiments/quickstart.test.ts': 28,
  'levanter:packages/levanter/src/webgpu/webgpu.test.ts': 26,
  'marin:packages/marin/src/s3-prefix.test.ts': 24,
  'levanter:packages/levanter/src/parallel/mesh.webgpu.test.ts': 23,
  'levanter:packages/levanter/src/parallel/big-model.test.ts': 20,
  'datakit:packages/datakit/src/store-faults.test.ts': 12,
  'levanter:packages/levanter/src/parallel/data-parallel.test.ts': 12,
  'levanter:packages/levanter/src/parallel/mesh.test.ts': 12,
  'levanter:packages/levanter/src/webgpu/data-parallel.webgpu.test.ts': 10,
  'levanter:packages/levanter/src/models/architecture-mesh.test.ts': 10,
  'levanter:packages/levanter/src/webgpu/decode.webgpu.test.ts': 8,
}

/** Where `file` goes in the order: a larger key starts earlier. Known durations (ms) first, then estimates. */
export function startKey(
  key: string,
  cached: { duration: number } | undefined,
  size: number | undefined,
): [number, number] {
  const seconds = cached ? cached.duration / 1000 : ESTIMATES[key]
  return [seconds ?? 0, size ?? 0]
}

/** `items` in an order drawn from `seed` (a Fisher-Yates shuffle over a 32-bit LCG): the same seed, the same order. */
export function seededShuffle<T>(items: readonly T[], seed: number): T[] {
  const out = [...items]
  let state = seed >>> 0
  for (let i = out.length - 1; i > 0; i--) {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0
    const j = state % (i + 1)
    ;[out[i], out[j]] = [out[j]!, out[i]!]
  }
  return out
}

export default class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const { shuffle, seed } = this.ctx.config.sequence
    if (shuffle) return seededShuffle(files, seed)
    const cache = this.ctx.cache
    const keyed = files.map((spec) => {
      const key = `${spec.project.name}:${relative(this.ctx.config.root, spec.moduleId)}`
      return { spec, at: startKey(key, cache.getFileTestResults(key), cache.getFileStats(key)?.size) }
    })
    keyed.sort((a, b) => b.at[0] - a.at[0] || b.at[1] - a.at[1])
    return keyed.map((k) => k.spec)
  }
}
