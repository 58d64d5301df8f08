import { afterAll, beforeAll, expect, test } from 'vitest'
import { actorClass } from './actor.js'
import type { ActorGroup } from './actor-group.js'
import { ActorPool } from './actor-pool.js'
import type { Counter } from './fixtures/counter.js'
import { LocalClient } from './local-client.js'

const CounterClass = actorClass<typeof Counter>(new URL('./fixtures/counter.ts', import.meta.url), 'Counter')
const client = new LocalClient()
// One group for every test (starting processes is the slow part); the test that kills a member runs last.
let g: ActorGroup<Counter>
beforeAll(async () => {
  g = await client.createActorGroup(CounterClass, 3, [0])
  await g.waitReady()
})
afterAll(() => client.shutdown())

test('a pool runs every task once, in input order, on free members', async () => {
  const pool = new ActorPool(g)
  const out = await pool.map(
    Array.from({ length: 30 }, (_, i) => i),
    async (w, x) => Number(await w.echo(x)) * 2,
  )
  expect(out).toEqual(Array.from({ length: 30 }, (_, i) => i * 2))
  // Every member got work: each starts with a task of its own.
  const pids = await pool.map(
    Array.from({ length: 9 }, (_, i) => i),
    async (w) => (await w.whoami()).pid,
  )
  expect(new Set(pids).size).toBe(3)
})

test('an error other than death fails the map', async () => {
  const pool = new ActorPool(g)
  await expect(pool.map([1, 2, 3], (w, x) => (x === 2 ? w.fail('bad item') : w.echo(x)))).rejects.toMatchObject({
    code: 'ACTOR_METHOD_FAILED',
  })
})

test('tasks of a member that dies go to the others', async () => {
  const victim = g.member(0)
  const done = new ActorPool(g).map(
    Array.from({ length: 6 }, (_, i) => i),
    async (w, x) => {
      if (w === victim && x === 0) setTimeout(() => victim.$actor.kill('SIGKILL'), 50)
      // Long only where it is killed: the retry on another member is quick.
      await w.slow(x === 0 && w === victim ? 5_000 : 10)
      return x
    },
  )
  expect(await done).toEqual([0, 1, 2, 3, 4, 5])
  expect(g.gone()).toEqual([0])
})
