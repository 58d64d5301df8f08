/**
 * @module The cross-host all-reduce of `pnpm bench fray`, run on one network host (`ip netns exec`): two
 * `AllReducer` members on the hosts given (argv[2], JSON `{ driverHost, hosts }`), a mesh over them, then
 * 16 MiB all-reduces into a reused array; prints `{"ms": [...]}`, the slowest member's time per all-reduce.
 */
import { actorClass } from '../src/actor.js'
import { type DriverHost, NetHostsClient } from '../src/fixtures/net-hosts-client.js'
import { Mesh } from '../src/mesh.js'
import type { AllReducer } from './bench-actors.js'

const { driverHost, hosts, floats, rounds } = JSON.parse(process.argv[2] ?? '{}') as {
  driverHost: string
  hosts: DriverHost[]
  floats: number
  rounds: number
}
const client = new NetHostsClient(driverHost, hosts)
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
