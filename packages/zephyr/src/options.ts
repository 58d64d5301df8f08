/**
 * @module The options of a run, as a zod schema: defaults and docs in one
 * place, unknown keys rejected, and a bad value reported as `INVALID_PLAN`
 * naming the option.
 */
import { z } from 'zod'
import { ZephyrError } from './errors.js'

export const ExecuteOptionsSchema = z.strictObject({
  skipExisting: z.boolean().optional().describe('keep finished output shards; run only the missing ones'),
  overwrite: z.boolean().optional().describe('replace existing outputs'),
  scratch: z.string().min(1).optional().describe('URL of the shuffle folder'),
  memoryBudget: z
    .number()
    .int()
    .positive()
    .optional()
    .describe('bytes a groupBy/deduplicate task holds before spilling'),
  maxAttempts: z.number().int().min(1).optional().describe('attempts per task'),
  progress: z.enum(['auto', 'bar', 'log', 'off']).optional(),
  spillRoot: z.string().min(1).optional().describe('local folder for spill files'),
  cacheDir: z.string().min(1).optional().describe('local folder caching non-local inputs'),
})

export const ContextOptionsSchema = ExecuteOptionsSchema.extend({
  client: z
    .custom<object>(
      (v) =>
        typeof v === 'object' &&
        v !== null &&
        typeof (v as { createActorGroup?: unknown }).createActorGroup === 'function',
      {
        message: 'expected a fray client (e.g. new LocalClient())',
      },
    )
    .optional(),
  maxWorkers: z.number().int().positive().optional().describe('worker actors at most, or tasks in flight in process'),
  inProcess: z.boolean().optional().describe('run tasks in this process'),
  workerResources: z
    .record(z.string(), z.unknown())
    .optional()
    .describe('fray resources of each worker, e.g. { cpu: 1, memory: "2Gi" }'),
})

/** Validates options; the error names each bad option and what it expects. */
export function checkOptions<T>(schema: z.ZodType<T>, input: unknown, where: string): T {
  const r = schema.safeParse(input)
  if (r.success) return r.data
  const issues = r.error.issues.map((i) => `${i.path.join('.') || '(options)'}: ${i.message}`).join('; ')
  throw new ZephyrError('INVALID_PLAN', `${where}: invalid options (${issues}); fix them and retry`)
}
