/** @module Resources an actor or job asks for, as validated plain data (what iris schedules on). */
import { z } from 'zod'
import { FrayError } from './errors.js'

/**
 * What one actor or one job replica needs. Plain data: it is passed to iris as is.
 * `memory` is in bytes or a string with a unit (`'512Mi'`, `'4G'`).
 */
export const Resources = z.strictObject({
  /** Cores. @default 1 */
  cpu: z.number().positive().max(1024).default(1).describe('cores (fractions allowed)'),
  /** Bytes, or a size with a unit such as `'512Mi'` or `'4G'`. @default '1Gi' */
  memory: z
    .union([z.number().int().positive(), z.string().regex(/^\d+(\.\d+)?\s*(B|K|Ki|M|Mi|G|Gi|T|Ti)?$/)])
    .default('1Gi')
    .describe('bytes or a size with a unit'),
  /** Accelerators. @default 0 */
  gpu: z.number().int().min(0).max(64).default(0).describe('accelerators'),
  /** Copies of a job or members of a group. @default 1 */
  replicas: z.number().int().min(1).max(4096).default(1).describe('copies'),
})
export type ResourcesInput = z.input<typeof Resources>
export type Resources = z.output<typeof Resources>

const UNITS: Record<string, number> = {
  B: 1, K: 1e3, Ki: 1024, M: 1e6, Mi: 1024 ** 2, G: 1e9, Gi: 1024 ** 3, T: 1e12, Ti: 1024 ** 4,
}

/** `'512Mi'` → 536870912. Numbers pass through. */
export function memoryBytes(memory: number | string): number {
  if (typeof memory === 'number') return memory
  const m = /^(\d+(?:\.\d+)?)\s*([A-Za-z]*)$/.exec(memory)
  const unit = UNITS[m?.[2] || 'B']
  if (!m || unit === undefined) throw new FrayError('INVALID_RESOURCES', `resources.memory: cannot read "${memory}"; write bytes or a size such as "512Mi" or "4G"`)
  return Math.round(Number(m[1]) * unit)
}

/**
 * Validates resources and fills defaults; a bad field throws `INVALID_RESOURCES` naming it.
 * @example resources({ cpu: 2, memory: '4Gi' }) // → { cpu: 2, memory: '4Gi', gpu: 0, replicas: 1 }
 */
export function resources(input: ResourcesInput = {}): Resources {
  const r = Resources.safeParse(input)
  if (!r.success) {
    const issue = r.error.issues[0]!
    const field = issue.path.length ? issue.path.join('.') : Object.keys(input).join(',')
    throw new FrayError('INVALID_RESOURCES', `resources.${field}: ${issue.message}; allowed keys are cpu, memory, gpu, replicas`)
  }
  return r.data
}
