import { expect, test } from 'vitest'
import { actorClass } from './actor.js'
import { currentClient, setDefaultClient, withClient } from './client.js'
import { currentActor } from './context.js'
import type { Counter } from './fixtures/counter.js'
import { LocalClient } from './local-client.js'

const CounterClass = actorClass<typeof Counter>(new URL('./fixtures/counter.ts', import.meta.url), 'Counter')

test('withClient makes a client current for everything it awaits', async () => {
  const a = new LocalClient({ mode: 'inline' })
  const b = new LocalClient({ mode: 'inline' })
  const seen = await withClient(a, async () => {
    await new Promise((r) => setTimeout(r, 1))
    const inner = await withClient(b, async () => currentClient())
    return [currentClient(), inner]
  })
  expect(seen[0]).toBe(a)
  expect(seen[1]).toBe(b)
  const c = await withClient(a, () => currentClient().createActor(CounterClass, [3]))
  expect(await c.add(1)).toBe(4)
  await a.shutdown()
  await expect(a.createActor(CounterClass, [0])).rejects.toMatchObject({ code: 'CLIENT_SHUT_DOWN' })
})

test('without withClient, the default client is used (a process LocalClient unless set)', async () => {
  const fallback = currentClient()
  expect(fallback).toBeInstanceOf(LocalClient)
  expect(fallback.backend).toBe('process')
  expect(currentClient()).toBe(fallback)
  const mine = new LocalClient({ mode: 'inline' })
  setDefaultClient(mine)
  expect(currentClient()).toBe(mine)
  setDefaultClient(null)
  await fallback.shutdown()
})

test('currentActor outside an actor says where to call it', () => {
  expect(() => currentActor()).toThrow(/outside an actor; call it from an actor method/)
})
