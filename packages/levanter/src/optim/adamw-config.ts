/**
 * @module AdamW's settings as a zod schema, in a file of its own so that config code (src/config.ts,
 * `@marin/levanter/config`) reads it without loading tfjs, which the optimizer itself needs.
 */
import { z } from 'zod'

export const AdamWConfig = z.strictObject({
  beta1: z.number().min(0).lt(1).default(0.9),
  beta2: z.number().min(0).lt(1).default(0.95),
  eps: z.number().positive().default(1e-8),
  weightDecay: z.number().min(0).default(0.1).describe('decoupled: p ← p − lr·wd·p, on matrices and embeddings only'),
  maxGradNorm: z
    .number()
    .positive()
    .nullable()
    .default(1)
    .describe('clip the global L2 norm of the gradient; null disables'),
})
export type AdamWConfigInput = z.input<typeof AdamWConfig>
export type AdamWConfig = z.output<typeof AdamWConfig>
