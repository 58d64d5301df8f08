import { afterAll, describe, expect, test } from 'vitest'
import { actorClass } from './actor.js'
import { ActorDiedError } from './errors.js'
import type { Counter } from './fixtures/counter.js'
import type { Client } from './client.js'
import { type Mode, openClient, type Opened } from './fixtures/backends.js'

const CounterClass = actorClass<typeof Counter>(new URL('./fixtures/counter.ts', import.meta.url), 'Counter')
const opened: Opened[] = []
async function open(mode: Mode): Promise<Client> {
  const o = await openClient(mode)
  opened.push(o)
  return o.client
}

describe.each(['process', 'grpc', 'iris'] as const)('an actor process killed with SIGKILL (%s mode)', (mode) => {
  let shared: Promise<Client> | null = null
  const client = (_mode: Mode) => (shared ??= open(mode))
  afterAll(async () => {
    await Promise.all(opened.splice(0).map((o) => o.close()))
  })

  test(
    'a SIGKILL rejects pending calls with ActorDiedError carrying ' +
      'the signal; an exit reports its code; the group says who is gone',
    async () => {
      const g = await (await client(mode)).createActorGroup(CounterClass, 3, (i) => [i], {
        name: 'victim',
        maxRestarts: 0,
      })
      await g.waitReady()
      const c = g.member(1)
      const pending = [c.slow(10_000), c.slow(10_000), c.slow(10_000)]
      process.kill(c.$actor.pid()!, 'SIGKILL')
      const errs = await Promise.all(pending.map((p) => p.catch((e: unknown) => e)))
      for (const e of errs) {
        expect(e).toBeInstanceOf(ActorDiedError)
        expect(e).toMatchObject({ code: 'ACTOR_DIED', actor: 'victim/1', signal: 'SIGKILL', exitCode: null })
      }
      expect((errs[0] as Error).message).toMatch(/actor victim\/1 died \(signal SIGKILL\).*maxRestarts/)
      expect(c.$actor.status()).toBe('dead')
      await expect(c.get()).rejects.toBeInstanceOf(ActorDiedError)
      expect(g.gone()).toEqual([1])
      expect(g.alive()).toEqual([0, 2])
      await expect(g.broadcast.get()).rejects.toBeInstanceOf(ActorDiedError)
      expect(await g.member(2).get()).toBe(2)

      // An actor that exits: a pending call learns the code. The exit may overtake exit()'s own answer.
      const exiting = g
        .member(2)
        .slow(10_000)
        .catch((e: unknown) => e)
      await g
        .member(2)
        .exit(3)
        .catch(() => undefined)
      expect(await exiting).toMatchObject({ code: 'ACTOR_DIED', exitCode: 3, signal: null })
      expect(g.gone()).toEqual([1, 2])
    },
  )

  test('maxRestarts brings it back with its constructor arguments, as many times as allowed', async () => {
    const c = await (await client(mode)).createActor(CounterClass, [100], { maxRestarts: 1 })
    expect(await c.add(5)).toBe(105)
    const firstPid = c.$actor.pid()
    const pending = c.slow(10_000)
    process.kill(c.$actor.pid()!, 'SIGKILL')
    await expect(pending).rejects.toMatchObject({ code: 'ACTOR_DIED', signal: 'SIGKILL' })
    // A call made while it restarts waits for the new process; state starts over.
    expect(await c.get()).toBe(100)
    expect(c.$actor.restarts()).toBe(1)
    expect(c.$actor.pid()).not.toBe(firstPid)
    const again = c.slow(10_000)
    c.$actor.kill('SIGKILL')
    await expect(again).rejects.toBeInstanceOf(ActorDiedError)
    expect(c.$actor.status()).toBe('dead')
    await expect(c.get()).rejects.toBeInstanceOf(ActorDiedError)
  })
})

describe('inline mode simulates death the same way', () => {
  afterAll(async () => {
    await Promise.all(opened.splice(0).map((o) => o.close()))
  })
  const client = open

  test('kill rejects pending calls and honours maxRestarts', async () => {
    const c = await (await client('inline')).createActor(CounterClass, [7], { maxRestarts: 1 })
    await c.add(1)
    const pending = c.slow(10_000)
    c.$actor.kill('SIGKILL')
    await expect(pending).rejects.toMatchObject({ code: 'ACTOR_DIED', signal: 'SIGKILL' })
    expect(await c.get()).toBe(7)
    c.$actor.kill()
    expect(c.$actor.status()).toBe('dead')
    await expect(c.get()).rejects.toBeInstanceOf(ActorDiedError)
  })
})
