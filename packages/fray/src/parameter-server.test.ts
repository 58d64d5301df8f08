import { afterAll, expect, test } from 'vitest'
import { actorClass } from './actor.js'
import type { Replica } from './fixtures/replica.js'
import { LocalClient } from './local-client.js'
import { ParameterServer, ParameterServerClient } from './parameter-server.js'

const ReplicaClass = actorClass<typeof Replica>(new URL('./fixtures/replica.ts', import.meta.url), 'Replica')
const client = new LocalClient()
afterAll(() => client.shutdown())

test('replicas push gradients and pull parameters from sharded actors', async () => {
  const init = Float32Array.from({ length: 1001 }, (_, i) => i)
  const ps = await ParameterServer.create(client, { init, shards: 3, lr: 0.5 })
  expect(ps.address().shards.map((s) => [s.lo, s.hi])).toEqual([
    [0, 333],
    [333, 667],
    [667, 1001],
  ])
  // Two replica actors, each in its own process, push a gradient of ones twice.
  const replicas = await client.createActorGroup(ReplicaClass, 2, [ps.address()])
  await replicas.waitReady()
  await replicas.broadcast.pushOnes(2)
  const fromReplica = await replicas.member(0).pull()
  const fromDriver = await ps.pull()
  // Four pushes of ones at lr 0.5: every parameter moved by -2.
  expect(fromDriver[0]).toBe(-2)
  expect(fromDriver[1000]).toBe(998)
  expect(Array.from(fromReplica)).toEqual(Array.from(fromDriver))
  await ps.push(new Float32Array(1001).fill(-2))
  expect((await ps.pull())[500]).toBe(499)
  await expect(ps.push(new Float32Array(3))).rejects.toThrow(/holds 1001 parameters but got a gradient of 3/)
  await ps.shutdown()
  await expect(ParameterServerClient.connect(ps.address())).rejects.toMatchObject({ code: 'PARAMETER_SERVER' })
})
