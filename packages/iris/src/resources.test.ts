import { describe, expect, test } from 'vitest'
import { isIrisError } from './errors.js'
import { fits, formatResources, parseMemory, parseResources } from './resources.js'

describe('parseResources', () => {
  test('reads cpu, memory and gpu', () => {
    expect(parseResources('cpu=1,memory=2G,gpu=0')).toEqual({ cpu: 1, memory: 2 * 1024 ** 3, gpu: 0 })
    expect(parseResources(' cpu = 0.5 , memory=512M ')).toEqual({ cpu: 0.5, memory: 512 * 1024 ** 2, gpu: 0 })
    expect(parseResources('gpu=8')).toMatchObject({ gpu: 8, cpu: 1 })
  })

  test('memory units', () => {
    expect(parseMemory('1024')).toBe(1024)
    expect(parseMemory('1.5GiB')).toBe(1.5 * 1024 ** 3)
    expect(parseMemory('4k')).toBe(4096)
    expect(parseMemory('1T')).toBe(1024 ** 4)
  })

  test.each([
    ['', /empty/],
    ['cpu', /"cpu" has no "="/],
    ['cpu=', /cpu="" must be a positive number/],
    ['cpu=-1', /cpu="-1" must be a positive number/],
    ['cpu=lots', /cpu="lots"/],
    ['memory=2X', /memory="2X" is not a size/],
    ['gpu=1.5', /gpu="1.5" must be a whole number/],
    ['disk=10G', /unknown key "disk"/],
    ['cpu=1,cpu=2', /"cpu" is given twice/],
  ])('refuses %j', (text, message) => {
    let err: unknown
    try {
      parseResources(text)
    } catch (e) {
      err = e
    }
    expect(isIrisError(err, 'BAD_RESOURCES')).toBe(true)
    expect((err as Error).message).toMatch(message)
  })

  test('format round-trips', () => {
    const r = parseResources('cpu=2,memory=3G,gpu=1')
    expect(formatResources(r)).toBe('cpu=2,memory=3G,gpu=1')
    expect(parseResources(formatResources(r))).toEqual(r)
  })

  test('memory prints in the largest sensible unit', async () => {
    const { formatMemory } = await import('./resources.js')
    expect(formatMemory(24684084 * 1024)).toBe('23.5G')
    expect(formatMemory(512 * 1024 ** 2)).toBe('512M')
    expect(formatMemory(4096)).toBe('4K')
    expect(formatMemory(1000)).toBe('1000')
  })

  test('fits compares every axis', () => {
    expect(fits(parseResources('cpu=1,memory=1G'), parseResources('cpu=1,memory=1G'))).toBe(true)
    expect(fits(parseResources('cpu=1,memory=2G'), parseResources('cpu=4,memory=1G'))).toBe(false)
    expect(fits(parseResources('gpu=1'), parseResources('gpu=0'))).toBe(false)
  })
})
