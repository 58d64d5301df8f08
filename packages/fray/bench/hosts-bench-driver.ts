/**
 * @module The cross-host all-reduce of `pnpm bench fray`, run on one network host (`ip netns exec`): two
 * `AllReducer` members on the hosts given (argv[2], JSON `{ driverHost, hosts }`), a mesh over them, then
 * 16 MiB all-reduces into a reused array; prints `{"ms": [...]}`, the slowest member's time per all-reduce.
 * With `sizes` (floats per parameter) and `bucketFloats`: `GradReducer` members time each way of all-reducing those
 * gradients instead and it prints `{"patterns": {pattern: [ms, …]}, "buckets": n}` (the slowest member's times).
 */
import { actorClass } from '../src/actor.js'
import { type DriverHost, NetHostsClient } from '../src/fixtures/net-hosts-client.js'
import { Mesh } from '../src/mesh.js'
import type { AllReducer } from './bench-actors.js'
import type { GradPattern, GradReducer } from './hosts-bench-actors.js'

const { driverHost, hosts, floats, rounds, sizes, bucketFloats } = JSON.parse(process.argv[2] ?? '{}') as {
  driverHost: string
  hosts: DriverHost[]
  floats: number
  rounds: number
  sizes?: number[]
  bucketFloats?: number
}
const client = new NetHostsClient(driverHost, hosts)
if (sizes) {
  const grads = await client.createActorGroup(
    actorClass<typeof GradReducer>(new URL('./hosts-bench-actors.ts', import.meta.url), 'GradReducer'),
    2,
    [],
    { startTimeoutMs: 30_000 },
  )
  await Mesh.create(grads, { data: -1 })
  const perMember = await grads.broadcast.timePatterns(sizes, bucketFloats ?? 2 ** 20, rounds)
  const patterns = Object.fromEntries(
    (['one', 'perParamSequential', 'perParamConcurrent', 'buckets'] as GradPattern[]).map((p) => [
      p,
      perMember[0]![p].map((_, i) => Math.max(...perMember.map((t) => t[p][i]!))),
    ]),
  )
  process.stdout.write(`${JSON.stringify({ patterns, buckets: perMember[0]!.buckets_count })}\n`)
  await Promise.race([client.shutdown(), new Promise((r) => setTimeout(r, 10_000))])
  process.exit(0)
}
const group = await client.createActorGroup(
  actorClass<typeof AllReducer>(new URL('./bench-actors.ts', import.meta.url), 'AllReducer'),
  2,
  [],
  { startTimeoutMs: 30_000 },
)
await Mesh.create(group, { data: -1 })
const ms: number[] = []
for (let r = 0; r < rounds; r++) {
  const perMember = await group.broadcast.timeAllReduce(floats, 10, true)
  ms.push(...perMember[0]!.wallMs.map((_, i) => Math.max(...perMember.map((t) => t.wallMs[i]!))))
}
process.stdout.write(`${JSON.stringify({ ms })}\n`)
await Promise.race([client.shutdown(), new Promise((r) => setTimeout(r, 10_000))])
process.exit(0)
