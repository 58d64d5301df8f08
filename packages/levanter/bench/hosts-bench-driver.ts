/**
 * @module The driver of the cross-host rows of `pnpm bench levanter` (bench/hosts.bench.ts), run on
 * host A: for each run given, a `{ data: 2 }` mesh engine (data parallel) of the quickstart-sized
 * model whose two replicas are iris tasks of the workers on hosts B and C (or, with `local`,
 * processes on this host), then the median time of its timed steps and what the replicas measured
 * of them. argv[2]: JSON `{ controller, driverHost, local, steps, runs }`, each run
 * `{ label, overlapReduce, bucketBytes? }`. Prints one line
 * `{"label","stepMs","allReduceMs","buckets","during"}` per run: each timed step's time, and the
 * time the slowest replica spent in its all-reduce at each.
 */
import { FrayIrisClient, LocalClient, withClient } from '@marin/fray'
import { initBackend } from '../src/backend.js'
import { Dataset } from '../src/data/dataset.js'
import { Gpt2LM } from '../src/models/lm.js'
import { MeshEngine } from '../src/parallel/mesh-engine.js'

type Run = { label: string; overlapReduce: boolean; bucketBytes?: number }
const { controller, driverHost, local, steps, runs } = JSON.parse(process.argv[2] ?? '{}') as {
  controller: string
  driverHost: string
  local: boolean
  steps: number
  runs: Run[]
}
/** experiments/quickstart.ts's model and batch. */
const MODEL = { vocabSize: 512, seqLen: 128, dModel: 128, nLayers: 2, nHeads: 4 }
const BATCH = 16
const ADAMW = { beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0.1, maxGradNorm: 1 }
const tokens = Array.from({ length: 100_000 }, (_, i) => (i * 7919 + (i >> 7)) % 512)
const dataset = Dataset.fromTokens(tokens, { evalFraction: 0 })

await initBackend()
const client = local
  ? new LocalClient()
  : new FrayIrisClient({ iris: { controller, token: process.env.IRIS_TOKEN }, driverHost, hostListen: '0.0.0.0' })
try {
  for (const run of runs) {
    const model = new Gpt2LM(MODEL, 0)
    const opts = {
      mesh: { data: 2, model: 1 },
      overlapReduce: run.overlapReduce,
      ...(run.bucketBytes ? { bucketBytes: run.bucketBytes } : {}),
    }
    const engine = await withClient(client, () => MeshEngine.create(model, ADAMW, opts))
    model.dispose()
    try {
      const times: number[] = []
      for (let s = 0; s <= steps; s++) {
        const batch = await dataset.trainBatch(s, BATCH, MODEL.seqLen, 0)
        const t = performance.now()
        await engine.step(batch, 1e-3)
        if (s > 0) times.push(performance.now() - t) // step 0 warms up
      }
      const phases = (await engine.group.broadcast.phases()).map((p) => p.slice(-steps))
      const line = {
        label: run.label,
        stepMs: times,
        allReduceMs: phases[0]!.map((_, i) => Math.max(...phases.map((p) => p[i]!.dataReduce))),
        buckets: phases[0]!.at(-1)!.buckets,
        during: phases[0]!.at(-1)!.bucketsDuringBackward,
      }
      process.stdout.write(`${JSON.stringify(line)}\n`)
    } finally {
      await engine.close()
    }
  }
} finally {
  await Promise.race([client.shutdown(), new Promise((r) => setTimeout(r, 15_000))])
}
process.exit(0)
