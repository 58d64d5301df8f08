import { describe, expect, test } from 'vitest'
import { coordsByName, resolveAxes, subgroup } from './mesh-axes.js'
import { Mesh } from './mesh.js'

describe('rank → coordinates', () => {
  test('row-major in the order the shape names its axes, the last fastest', () => {
    const shape = { data: 2, model: 3 }
    expect(Array.from({ length: 6 }, (_, r) => coordsByName(shape, r))).toEqual([
      { data: 0, model: 0 },
      { data: 0, model: 1 },
      { data: 0, model: 2 },
      { data: 1, model: 0 },
      { data: 1, model: 1 },
      { data: 1, model: 2 },
    ])
    expect(coordsByName({ model: 3, data: 2 }, 1)).toEqual({ model: 0, data: 1 })
    expect(Mesh.coordsOf({ pipe: 2, data: 2, model: 2 }, 5)).toEqual({ pipe: 1, data: 0, model: 1 })
  })

  test('agrees with the subgroups collectives run in', () => {
    const axes = resolveAxes({ data: -1, model: 2 }, 6)
    for (let r = 0; r < 6; r++) {
      const { data, model } = coordsByName(Object.fromEntries(axes), r)
      expect(subgroup(axes, r, ['model']).ranks).toEqual([data! * 2, data! * 2 + 1])
      expect(subgroup(axes, r, ['data']).ranks).toEqual([model!, model! + 2, model! + 4])
    }
  })

  test('a rank outside the mesh is INVALID_MESH naming the range', () => {
    expect(() => coordsByName({ data: 2, model: 2 }, 4)).toThrow(
      expect.objectContaining({
        code: 'INVALID_MESH',
        message: expect.stringMatching(/rank 4 is not a member; ranks are 0 to 3/),
      }),
    )
    expect(() => Mesh.coordsOf({ data: 2 }, 0.5)).toThrow(/rank 0.5 is not a member/)
  })
})
