/** @module Actors the fray benchmark runs. */
import { currentMesh } from '../src/context.js'

export class Pinger {
  ping(x: number): number {
    return x
  }
}

export class AllReducer {
  /**
   * Times `iters` all-reduces of `n` floats (after a barrier each), in ms, as this member saw
   * them, and the CPU time this process spent per all-reduce (robust to a busy machine).
   * `reuseOut`: results go into one preallocated array (a training loop's pattern) instead of
   * a new 16 MiB array each time, whose page faults and garbage collection cost the member CPU.
   */
  async timeAllReduce(n: number, iters: number, reuseOut = false): Promise<{ wallMs: number[]; cpuMs: number }> {
    const mesh = currentMesh()
    const data = new Float32Array(n).fill(mesh.rank + 1)
    const opts = reuseOut ? { out: new Float32Array(n) } : {}
    await mesh.allReduce(data, opts) // warm up the links and the JIT
    const times: number[] = []
    let cpu = 0
    for (let i = 0; i < iters; i++) {
      await mesh.barrier()
      const c0 = process.cpuUsage()
      const t0 = performance.now()
      const out = await mesh.allReduce(data, opts)
      times.push(performance.now() - t0)
      const c = process.cpuUsage(c0)
      cpu += (c.user + c.system) / 1000
      if (out[n - 1] !== (mesh.size * (mesh.size + 1)) / 2) throw new Error(`wrong all-reduce result ${out[n - 1]}`)
    }
    return { wallMs: times, cpuMs: cpu / iters }
  }

  /**
   * Times `iters` reduce-scatters followed by all-gathers of the shard (`allReduce` in two
   * collectives), as `timeAllReduce` does, into preallocated shard and result arrays.
   */
  async timeScatterGather(n: number, iters: number): Promise<{ wallMs: number[]; cpuMs: number }> {
    const mesh = currentMesh()
    const data = new Float32Array(n).fill(mesh.rank + 1)
    const shard = await mesh.reduceScatter(data) // warm up, and the shard array to reuse
    const full = new Float32Array(n)
    await mesh.allGather(shard, { out: full })
    const times: number[] = []
    let cpu = 0
    for (let i = 0; i < iters; i++) {
      await mesh.barrier()
      const c0 = process.cpuUsage()
      const t0 = performance.now()
      await mesh.reduceScatter(data, { out: shard })
      await mesh.allGather(shard, { out: full })
      times.push(performance.now() - t0)
      const c = process.cpuUsage(c0)
      cpu += (c.user + c.system) / 1000
      if (full[n - 1] !== (mesh.size * (mesh.size + 1)) / 2) throw new Error(`wrong result ${full[n - 1]}`)
    }
    return { wallMs: times, cpuMs: cpu / iters }
  }
}
