import { expect, test } from 'vitest'
import { Dataset } from './dataset.js'
import { planStages } from './plan.js'
import { fromPortable, functionSource, toPortable } from './portable.js'

test('a plan survives the trip to a worker: functions as source, data as data', async () => {
  const obj = {
    half(x: number) {
      return x / 2
    },
  }
  const ds = Dataset.fromList([1, 2, 3, 4], { numShards: 2 })
    .map(obj.half)
    .groupBy((x: number) => x > 1, (k: boolean, xs: number[]) => ({ k, n: xs.length }))
  const stages = await planStages(ds.source, ds.ops)
  const wire = structuredClone(stages.map(toPortable))
  const back = wire.map(fromPortable)
  const map = back[0]!.ops[0]!
  expect(map.kind === 'map' && (map.fn as (x: number) => number)(8)).toBe(4)
  const input = back[1]!.input
  expect(input.kind === 'shuffle' && input.reduce.kind === 'group' && (input.reduce.reducer as (k: boolean, xs: number[]) => unknown)(true, [1, 2])).toEqual({ k: true, n: 2 })
  expect(back[0]!.input).toEqual(stages[0]!.input)
})

test('native and bound functions are FUNCTION_NOT_PORTABLE', () => {
  expect(() => functionSource(Math.max, 'stage 0 map')).toThrow(/stage 0 map: a native or bound function cannot be sent to a worker/)
  expect(() => functionSource(((x: number) => x).bind(null), 'stage 0 map')).toThrow(/native or bound/)
})
