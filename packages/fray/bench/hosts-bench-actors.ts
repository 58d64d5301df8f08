/** @module The actor of the cross-host gradient all-reduce rows of `pnpm bench fray` (bench/hosts.bench.ts). */
import { currentMesh } from '../src/context.js'

/** How the gradients of a model's parameters (`sizes` floats each) are all-reduced in one step. */
export type GradPattern = 'one' | 'perParamSequential' | 'perParamConcurrent' | 'buckets'

/** Consecutive parameters grouped until a group holds at least `floats` floats (the last may hold fewer). */
export function bucketsOf(sizes: readonly number[], floats: number): number[] {
  const out: number[] = []
  let acc = 0
  for (const s of sizes) {
    acc += s
    if (acc >= floats) {
      out.push(acc)
      acc = 0
    }
  }
  if (acc > 0) out.push(acc)
  return out
}

export class GradReducer {
  /**
   * Times `iters` all-reduces of gradients laid out as `sizes` (after a barrier each), in ms as this member saw
   * them: `one` all-reduce of the whole flat buffer; one per parameter, each awaited before the next
   * (`perParamSequential`) or all in flight at once (`perParamConcurrent`); or `buckets` of at least
   * `bucketFloats` floats, all in flight at once. Every pattern reduces the same floats in place.
   */
  async timePatterns(
    sizes: number[],
    bucketFloats: number,
    iters: number,
  ): Promise<Record<GradPattern, number[]> & { buckets_count: number }> {
    const mesh = currentMesh()
    const total = sizes.reduce((x, y) => x + y, 0)
    const flat = new Float32Array(total).fill(mesh.rank + 1)
    const parts = (lens: readonly number[]) => {
      let at = 0
      return lens.map((n) => flat.subarray(at, (at += n)))
    }
    const params = parts(sizes)
    const buckets = parts(bucketsOf(sizes, bucketFloats))
    const run: Record<GradPattern, () => Promise<unknown>> = {
      one: () => mesh.allReduce(flat, { out: flat }),
      perParamSequential: async () => {
        for (const p of params) await mesh.allReduce(p, { out: p })
      },
      perParamConcurrent: () => Promise.all(params.map((p) => mesh.allReduce(p, { out: p }))),
      buckets: () => Promise.all(buckets.map((p) => mesh.allReduce(p, { out: p }))),
    }
    const times = { one: [], perParamSequential: [], perParamConcurrent: [], buckets: [] } as Record<
      GradPattern,
      number[]
    >
    for (const pattern of Object.keys(run) as GradPattern[]) await run[pattern]() // warm up links and the JIT
    for (let i = 0; i < iters; i++)
      for (const pattern of Object.keys(run) as GradPattern[]) {
        flat.fill(mesh.rank + 1)
        await mesh.barrier()
        const t0 = performance.now()
        await run[pattern]()
        times[pattern].push(performance.now() - t0)
        const want = (mesh.size * (mesh.size + 1)) / 2
        if (flat[0] !== want || flat[total - 1] !== want) throw new Error(`${pattern}: wrong all-reduce result`)
      }
    return { ...times, buckets_count: buckets.length }
  }
}
