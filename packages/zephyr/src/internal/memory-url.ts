/** @module `memory://` storage lives in one process: plans that touch it cannot run on worker processes. */
import type { StagePlan } from '../plan.js'

const isMemory = (u: unknown): u is string => typeof u === 'string' && u.startsWith('memory://')

/**
 * A `memory://` URL the plan reads or writes, if any. Memory storage lives in
 * one process, so such a plan runs in process even on a worker context.
 */
export function memoryUrl(stages: readonly StagePlan[], scratch?: string): string | undefined {
  if (isMemory(scratch)) return scratch
  for (const s of stages) {
    if (s.input.kind === 'files') {
      const u = s.input.urls.find(isMemory)
      if (u) return u
    }
    if (s.input.kind === 'list') {
      for (const shard of s.input.shards) {
        const u = shard.find(isMemory)
        if (u) return u
      }
    }
    if (s.output.kind === 'write' && isMemory(s.output.writer.pattern)) return s.output.writer.pattern
  }
  return undefined
}
