import { setTimeout as sleep } from 'node:timers/promises'
import { expect, test } from 'vitest'
import { connect } from './client.js'
import { RpcError } from './errors.js'
import { serve } from './server.js'
import { Demo, recordingLogger } from './test-helpers.js'

function makeImpl(seen: { aborted: number; finished: number }) {
  const notUsed = () => {
    throw new RpcError('UNIMPLEMENTED', 'not used here')
  }
  return {
    echo: ({ text }: { text: string }) => ({ text }),
    slow: async ({ ms }: { ms: number }) => {
      await sleep(ms)
      seen.finished++
      return { done: true }
    },
    count: async function* ({ to }: { to: number }, ctx: { signal: AbortSignal }) {
      try {
        for (let i = 0; i < to; i++) {
          await sleep(10)
          if (ctx.signal.aborted) return
          yield { i }
        }
      } finally {
        if (ctx.signal.aborted) seen.aborted++
      }
    },
    tensor: notUsed,
    chunks: notUsed,
    sum: notUsed,
    broken: notUsed,
  }
}

test('shutdown lets in-flight calls finish and refuses new ones', async () => {
  const seen = { aborted: 0, finished: 0 }
  const server = await serve(Demo, makeImpl(seen), { logger: recordingLogger() })
  const client = connect(Demo, server.address, { logger: recordingLogger(), retry: { maxAttempts: 1 } })
  await client.ready()
  const inFlight = [client.slow({ ms: 300 }), client.slow({ ms: 200 })]
  await sleep(50)
  const stopped = server.shutdown({ graceMs: 10_000 })
  const late = await client.echo({ text: 'late' }).catch((e: unknown) => e)
  expect(await Promise.all(inFlight)).toEqual([{ done: true }, { done: true }])
  await stopped
  expect(seen.finished).toBe(2)
  expect(late).toBeInstanceOf(RpcError)
  expect((late as RpcError).code).toBe('UNAVAILABLE')
  client.close()
})

test('calls still running when the grace period ends are cancelled, and shutdown resolves', async () => {
  const seen = { aborted: 0, finished: 0 }
  const server = await serve(Demo, makeImpl(seen), { logger: recordingLogger() })
  const client = connect(Demo, server.address, { logger: recordingLogger() })
  const got: number[] = []
  const streaming = (async () => {
    try {
      for await (const { i } of client.count({ to: 100_000 })) got.push(i)
      return 'ended'
    } catch (e) {
      return e as RpcError
    }
  })()
  while (got.length < 3) await sleep(5)
  await server.shutdown({ graceMs: 200 })
  const outcome = await streaming
  expect(outcome).toBeInstanceOf(RpcError)
  expect(['CANCELLED', 'UNAVAILABLE', 'INTERNAL']).toContain((outcome as RpcError).code)
  expect(got.length).toBeLessThan(100_000)
  await sleep(50)
  expect(seen.aborted).toBe(1)
  client.close()
})
