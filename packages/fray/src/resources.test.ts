import { describe, expect, test } from 'vitest'
import { isFrayError } from './errors.js'
import { resolveAxes } from './mesh-axes.js'
import { memoryBytes, resources } from './resources.js'

describe('resources', () => {
  test('defaults fill in and valid input passes', () => {
    expect(resources()).toEqual({ cpu: 1, memory: '1Gi', gpu: 0, replicas: 1 })
    expect(resources({ cpu: 0.5, memory: '512Mi', gpu: 2, replicas: 4 })).toEqual({
      cpu: 0.5,
      memory: '512Mi',
      gpu: 2,
      replicas: 4,
    })
  })

  test('bad fields throw INVALID_RESOURCES naming the field', () => {
    const cases: [unknown, RegExp][] = [
      [{ cpu: 0 }, /resources\.cpu/],
      [{ gpu: 1.5 }, /resources\.gpu/],
      [{ memory: 'lots' }, /resources\.memory/],
      [{ memory: '4g' }, /resources\.memory: memory="4g" is not a byte size/],
      [{ replicas: 0 }, /resources\.replicas/],
      [{ tpu: 1 }, /allowed keys are cpu, memory, gpu, replicas/],
    ]
    for (const [input, msg] of cases) {
      let err: unknown
      try {
        resources(input as never)
      } catch (e) {
        err = e
      }
      expect(isFrayError(err, 'INVALID_RESOURCES')).toBe(true)
      expect((err as Error).message).toMatch(msg)
    }
  })

  test('memory sizes', () => {
    expect(memoryBytes('512Mi')).toBe(512 * 1024 * 1024)
    expect(memoryBytes('4G')).toBe(4e9)
    expect(memoryBytes('4Gi')).toBe(4 * 2 ** 30)
    expect(() => memoryBytes('4GB')).toThrow(/resources\.memory="4GB" is not a byte size/)
    expect(memoryBytes(123)).toBe(123)
  })
})

describe('mesh axes', () => {
  test('-1 takes the rest, in declaration order', () => {
    expect(resolveAxes({ data: -1, model: 2 }, 8)).toEqual([
      ['data', 4],
      ['model', 2],
    ])
    expect(resolveAxes({ data: -1 }, 3)).toEqual([['data', 3]])
  })

  test('bad axes are refused with what to do', () => {
    expect(() => resolveAxes({ data: -1, model: -1 }, 4)).toThrow(/at most one axis may take the rest/)
    expect(() => resolveAxes({ data: 3 }, 4)).toThrow(/do not fit 4 members/)
    expect(() => resolveAxes({ data: -1, model: 3 }, 4)).toThrow(/do not fit 4 members/)
    expect(() => resolveAxes({ data: 0 }, 4)).toThrow(/positive integer or -1/)
    expect(() => resolveAxes({}, 4)).toThrow(/at least one axis/)
  })
})
