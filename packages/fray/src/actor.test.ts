import { machineSlowdown } from '@marin/rigging/net-hosts'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { type ActorHandle, actorClass } from './actor.js'
import { isFrayError } from './errors.js'
import type { Broken, Counter } from './fixtures/counter.js'
import type { Client } from './client.js'
import { openClient, type Opened } from './fixtures/backends.js'

const CounterClass = actorClass<typeof Counter>(new URL('./fixtures/counter.ts', import.meta.url), 'Counter')
const BrokenClass = actorClass<typeof Broken>(new URL('./fixtures/counter.ts', import.meta.url), 'Broken')

// Limits for an idle machine times how loaded this one is: an actor's process may take long to start.
const SLOW = machineSlowdown()
const MODES = ['process', 'inline', 'grpc', 'iris'] as const
const LIMITS = { timeout: 30_000 * SLOW }

describe.each(MODES)('actors in %s mode', LIMITS, (mode) => {
  let opened: Opened
  let client: Client
  beforeAll(async () => {
    opened = await openClient(mode)
    client = opened.client
  }, 30_000 * SLOW)
  afterAll(() => opened.close())
  // One actor for the tests that do not need a fresh one: creating actors is the slow part.
  let one: Promise<ActorHandle<Counter>> | null = null
  const shared = () => (one ??= client.createActor(CounterClass, [0], { name: 'one' }))

  test('method calls round-trip and keep state', async () => {
    const c = await shared()
    await c.add(10 - (await c.get()))
    expect(await c.add(5)).toBe(15)
    expect(await c.add(-3)).toBe(12)
    expect(await c.get()).toBe(12)
    expect(await c.slow(1)).toBe('done')
    expect(c.$actor.status()).toBe('ready')
  })

  test('runs in its own process only in process mode', async () => {
    const c = await shared()
    const me = await c.whoami()
    expect(me).toMatchObject({ name: 'one', index: 0, groupSize: 1 })
    if (mode !== 'inline') {
      expect(me.pid).not.toBe(process.pid)
      expect(c.$actor.pid()).toBe(me.pid)
    } else expect(me.pid).toBe(process.pid)
  })

  test('typed arrays go through intact', async () => {
    const c = await shared()
    const x = Float32Array.from({ length: 100_000 }, (_, i) => i * 0.5)
    const y = await c.scale(x, 2)
    expect(y).toBeInstanceOf(Float32Array)
    expect(y.length).toBe(x.length)
    expect(y[99_999]).toBe(99_999)
    const bytes = new Uint8Array([1, 2, 255])
    expect(await c.echo(bytes)).toEqual(bytes)
    expect(await c.echo({ a: [1, 'x'], b: null })).toEqual({ a: [1, 'x'], b: null })
  })

  test('a method that throws rejects with ACTOR_METHOD_FAILED and the original message', async () => {
    const c = await shared()
    const before = await c.get()
    const err = await c.fail('bad input x').catch((e: unknown) => e)
    expect(isFrayError(err, 'ACTOR_METHOD_FAILED')).toBe(true)
    expect((err as Error).message).toMatch(/actor one\.fail threw RangeError: bad input x/)
    expect(await c.add(1)).toBe(before + 1) // the actor survives its method's error
  })

  test('an unknown method rejects with ACTOR_NO_SUCH_METHOD', async () => {
    const c = await shared()
    const untyped = c as unknown as Record<string, () => Promise<unknown>>
    await expect(untyped.nope!()).rejects.toMatchObject({
      code: 'ACTOR_NO_SUCH_METHOD',
      message: expect.stringMatching(/no method "nope"/),
    })
    await expect(untyped.toString!()).rejects.toMatchObject({ code: 'ACTOR_NO_SUCH_METHOD' })
  })

  test('a constructor that throws fails creation with ACTOR_START_FAILED', async () => {
    await expect(client.createActor(BrokenClass, [])).rejects.toMatchObject({
      code: 'ACTOR_START_FAILED',
      message: expect.stringMatching(/cannot build Broken/),
    })
  })

  test('a missing export fails creation and lists the exports', async () => {
    const ref = actorClass<typeof Counter>(new URL('./fixtures/counter.ts', import.meta.url), 'Nope')
    await expect(client.createActor(ref, [0])).rejects.toMatchObject({
      code: 'ACTOR_START_FAILED',
      message: expect.stringMatching(/no exported class "Nope".*Counter/),
    })
  })

  test('per-call timeout rejects with CALL_TIMEOUT and the actor stays usable', async () => {
    const c = await shared()
    const before = await c.get()
    await expect(c.$actor.withOptions({ timeoutMs: 30 }).slow(2_000)).rejects.toMatchObject({
      code: 'CALL_TIMEOUT',
      message: expect.stringMatching(/slow did not answer within 30 ms/),
    })
    expect(await c.get()).toBe(before)
  })

  // Two members: an actor process each, the most expensive part of these tests.
  test('a group: per-member arguments, broadcast calls, per-member handles', async () => {
    const g = await client.createActorGroup(CounterClass, 2, (i) => [i * 10], { name: 'grp' })
    const ready = await g.waitReady()
    expect(ready).toHaveLength(2)
    expect(await g.broadcast.add(1)).toEqual([1, 11])
    expect(await g.member(1).get()).toBe(11)
    const who = await g.broadcast.whoami()
    expect(who.map((w) => [w.name, w.index, w.groupSize])).toEqual([
      ['grp/0', 0, 2],
      ['grp/1', 1, 2],
    ])
    expect(g.gone()).toEqual([])
    expect(() => g.member(2)).toThrow(/has 2 members; member 2 does not exist/)
    await g.shutdown()
    expect(g.gone()).toEqual([0, 1])
  })

  test('waitReady rejects when too few members can start', async () => {
    const g = await client.createActorGroup(BrokenClass, 1, [])
    await expect(g.waitReady({ count: 1 })).rejects.toMatchObject({ code: 'ACTOR_START_FAILED' })
  })

  // Process mode only (the others send results over ducky's own encoding, or not at all).
  test.runIf(mode === 'process')('a result that cannot be cloned rejects with NOT_SERIALIZABLE', async () => {
    const c = await shared()
    const before = await c.get()
    await expect(c.returnsFunction()).rejects.toMatchObject({ code: 'NOT_SERIALIZABLE' })
    await expect(c.echo(() => 1)).rejects.toMatchObject({ code: 'NOT_SERIALIZABLE' })
    expect(await c.add(2)).toBe(before + 2)
  })

  const gc = 'a one-core actor runs V8 GC on its own thread; a bigger one keeps the helper threads'
  test.runIf(mode === 'process')(gc, async () => {
    // The shared actor holds the default one core.
    const [small, big] = await Promise.all([shared(), client.createActor(CounterClass, [0], { resources: { cpu: 2 } })])
    expect(await small.nodeFlags()).toContain('--single-threaded-gc')
    expect(await big.nodeFlags()).not.toContain('--single-threaded-gc')
    await big.$actor.stop()
  })
})
