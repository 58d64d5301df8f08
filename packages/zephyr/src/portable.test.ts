import { expect, test } from 'vitest'
import { Dataset } from './dataset.js'
import { planStages } from './plan.js'
import type { tag } from './fixtures/user-fns.js'
import { fromPortable, functionSource, toPortable } from './portable.js'
import { resolveStage } from './resolve-stage.js'
import { fnRef } from './user-fn.js'

test('a plan survives the trip to a worker: functions as source, data as data', async () => {
  const obj = {
    half(x: number) {
      return x / 2
    },
  }
  const ds = Dataset.fromList([1, 2, 3, 4], { numShards: 2 })
    .map(obj.half)
    .groupBy(
      (x: number) => x > 1,
      (k: boolean, xs: number[]) => ({ k, n: xs.length }),
    )
  const stages = await planStages(ds.source, ds.ops)
  const wire = structuredClone(stages.map(toPortable))
  const back = wire.map(fromPortable)
  const map = back[0]!.ops[0]!
  expect(map.kind === 'map' && (map.fn as (x: number) => number)(8)).toBe(4)
  const input = back[1]!.input
  expect(
    input.kind === 'shuffle' &&
      input.reduce.kind === 'group' &&
      (input.reduce.reducer as (k: boolean, xs: number[]) => unknown)(true, [1, 2]),
  ).toEqual({ k: true, n: 2 })
  expect(back[0]!.input).toEqual(stages[0]!.input)
})

test('native and bound functions are FUNCTION_NOT_PORTABLE', () => {
  expect(() => functionSource(Math.max, 'stage 0 map')).toThrow(
    /stage 0 map: a native or bound function cannot be sent to a worker/,
  )
  expect(() => functionSource(((x: number) => x).bind(null), 'stage 0 map')).toThrow(/native or bound/)
})

test('bound args and module references travel as data and resolve in the worker', async () => {
  const fns = new URL('./fixtures/user-fns.ts', import.meta.url)
  const ds = Dataset.fromList([{ id: 1, text: 'ab' }], { numShards: 1 })
    .map(fnRef<typeof tag>(fns, 'tag'), { args: { salt: 'x' } })
    .filter((d, a) => d.id >= a.min, { args: { min: 1, keep: new Uint8Array([1, 0, 1]) } })
  const [stage] = await planStages(ds.source, ds.ops)
  const wire = structuredClone(toPortable(stage!)) as { ops: { fn: unknown; args: unknown }[] }
  expect(wire.ops[0]!.fn).toEqual({ module: fns.href, name: 'tag' })
  expect(wire.ops[1]!.args).toEqual({ min: 1, keep: new Uint8Array([1, 0, 1]) })
  const resolved = await resolveStage(fromPortable(wire))
  const [map, filter] = resolved.ops as unknown as { fn: (r: unknown) => unknown }[]
  expect(map!.fn({ id: 1, text: 'ab' })).toMatchObject({ id: 1, digest: expect.stringMatching(/^[0-9a-f]{8}$/) })
  expect([filter!.fn({ id: 0 }), filter!.fn({ id: 1 })]).toEqual([false, true])
})
