import { readFileSync } from 'node:fs'
import { LocalCluster } from '@marin/iris'
import { expect, test } from 'vitest'
import { actorClass } from './actor.js'
import type { Counter } from './fixtures/counter.js'
import { FrayIrisClient } from './iris-client.js'

const CounterClass = actorClass<typeof Counter>(new URL('./fixtures/counter.ts', import.meta.url), 'Counter')

test("FrayIrisClient given a controller's address and token places actors on its workers", async () => {
  const cluster = await LocalCluster.start({ workers: 1, killGraceMs: 1_000 })
  try {
    const client = new FrayIrisClient({
      iris: { controller: cluster.address, token: readFileSync(cluster.tokenFile, 'utf8').trim() },
    })
    const c = await client.createActor(CounterClass, [3])
    expect(await c.add(1)).toBe(4)
    await client.shutdown()
  } finally {
    await cluster.stop()
  }
}, 60_000)

test('FrayIrisClient({ iris: { platform: "local" } }) starts its own cluster and stops it at shutdown', async () => {
  const client = new FrayIrisClient({ iris: { platform: 'local', workers: 1 } })
  const job = await client.submit({
    name: 'hello',
    entrypoint: { command: [process.execPath, '-e', 'console.log("hi")'] },
  })
  expect(await job.wait({ timeoutMs: 60_000 })).toBe('succeeded')
  expect(await job.logs()).toEqual(['hi'])
  await client.shutdown()
}, 60_000)
