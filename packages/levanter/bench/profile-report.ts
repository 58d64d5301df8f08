/** @module The per-kernel report of a `tf.profile` that the profiling scripts print (`profile-step.ts`,
 * `profile-webgpu.ts`). */
import type * as tf from '@tensorflow/tfjs'

type Kernel = Awaited<ReturnType<typeof tf.profile>>['kernels'][number]
type Rows = [string, { ms: number; n: number }][]

/** Summed time and count of the kernels that `key` groups together (undefined: left out), largest first. */
export function tally(kernels: readonly Kernel[], key: (k: Kernel) => string | undefined): Rows {
  const by = new Map<string, { ms: number; n: number }>()
  for (const k of kernels) {
    const name = key(k)
    if (name === undefined) continue
    const e = by.get(name) ?? { ms: 0, n: 0 }
    e.ms += k.kernelTimeMs as number
    e.n++
    by.set(name, e)
  }
  return [...by].sort((a, b) => b[1].ms - a[1].ms)
}

/** A kernel's name with its input shapes, `Name [a,b]×[c]`. */
export const withShapes = (k: Kernel): string => `${k.name} ${k.inputShapes.map((s) => `[${s}]`).join('×')}`

/** One line per row: milliseconds (`digits` decimals), count, key. */
export function printTally(rows: Rows, digits: number): void {
  for (const [k, e] of rows)
    console.log(`${e.ms.toFixed(digits).padStart(7 + digits)} ms ${String(e.n).padStart(5)}× ${k}`)
}
