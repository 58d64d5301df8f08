/** @module Learning-rate schedules: linear warmup, then cosine, linear or constant decay to a minimum ratio. */
import { z } from 'zod'

export const LrSchedule = z.strictObject({
  decay: z.enum(['cosine', 'linear', 'constant']).default('cosine').describe('shape after warmup'),
  warmupSteps: z.number().int().nonnegative().default(0).describe('steps of linear warmup from 0'),
  minLrRatio: z.number().min(0).max(1).default(0.1).describe('final LR as a fraction of the peak'),
})
export type LrScheduleInput = z.input<typeof LrSchedule>
export type LrSchedule = z.output<typeof LrSchedule>

/** LR at step (0-based) of a run of `totalSteps`, peaking at `peak`. */
export function learningRateAt(s: LrSchedule, peak: number, step: number, totalSteps: number): number {
  if (step < s.warmupSteps) return (peak * (step + 1)) / s.warmupSteps
  const min = peak * s.minLrRatio
  if (s.decay === 'constant') return peak
  const span = Math.max(1, totalSteps - s.warmupSteps)
  const frac = Math.min(1, (step - s.warmupSteps) / span)
  if (s.decay === 'linear') return peak - (peak - min) * frac
  return min + 0.5 * (peak - min) * (1 + Math.cos(Math.PI * frac))
}
