/** @module Resources an actor or job asks for, as validated plain data (what iris schedules on). */
import { isRiggingError, parseByteSize } from '@marin/rigging'
import { z } from 'zod'
import { FrayError } from './errors.js'

/**
 * What one actor or one job replica needs. Plain data: it is passed to iris as is.
 * `memory` is in bytes or a size read by rigging's `parseByteSize`, the rule iris uses too:
 * `'4G'` is 4×10⁹ bytes, `'4Gi'` is 4×2³⁰. The default, 1Gi, is iris's default as well.
 */
export const Resources = z.strictObject({
  /** Cores. @default 1 */
  cpu: z.number().positive().max(1024).default(1).describe('cores (fractions allowed)'),
  /** Bytes, or a size with a unit such as `'512Mi'` or `'4G'`. @default '1Gi' */
  memory: z
    .union([z.number().int().positive(), z.string()])
    .superRefine((m, ctx) => {
      const error = typeof m === 'string' ? byteSizeError(m) : undefined
      if (error) ctx.addIssue({ code: 'custom', message: error })
    })
    .default('1Gi')
    .describe('bytes or a size with a unit'),
  /** Accelerators. @default 0 */
  gpu: z.number().int().min(0).max(64).default(0).describe('accelerators'),
  /** Copies of a job or members of a group. @default 1 */
  replicas: z.number().int().min(1).max(4096).default(1).describe('copies'),
})
export type ResourcesInput = z.input<typeof Resources>
export type Resources = z.output<typeof Resources>

function byteSizeError(memory: string): string | undefined {
  try {
    parseByteSize(memory, 'memory')
    return undefined
  } catch (err) {
    if (isRiggingError(err, 'BYTE_SIZE_INVALID')) return err.message
    throw err
  }
}

/** Bytes of a validated `memory`: `'512Mi'` → 536870912, `'4G'` → 4000000000; numbers pass through. */
export function memoryBytes(memory: number | string): number {
  try {
    return parseByteSize(memory, 'resources.memory')
  } catch (err) {
    if (isRiggingError(err, 'BYTE_SIZE_INVALID')) throw new FrayError('INVALID_RESOURCES', err.message, { cause: err })
    throw err
  }
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
    throw new FrayError(
      'INVALID_RESOURCES',
      `resources.${field}: ${issue.message}; allowed keys are cpu, memory, gpu, replicas`,
    )
  }
  return r.data
}
