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
   */
  async timeAllReduce(n: number, iters: number): Promise<{ wallMs: number[]; cpuMs: number }> {
    const mesh = currentMesh()
    const data = new Float32Array(n).fill(mesh.rank + 1)
    await mesh.allReduce(data) // warm up the links and the JIT
    const times: number[] = []
    let cpu = 0
    for (let i = 0; i < iters; i++) {
      await mesh.barrier()
      const c0 = process.cpuUsage()
      const t0 = performance.now()
      const out = await mesh.allReduce(data)
      times.push(performance.now() - t0)
      const c = process.cpuUsage(c0)
      cpu += (c.user + c.system) / 1000
      if (out[n - 1] !== (mesh.size * (mesh.size + 1)) / 2) throw new Error(`wrong all-reduce result ${out[n - 1]}`)
    }
    return { wallMs: times, cpuMs: cpu / iters }
  }
}
