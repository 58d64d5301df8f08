import { describe, expect, test } from 'vitest'
import { isIrisError } from './errors.js'
import { DEFAULT_RESOURCES, fits, formatResources, parseResources } from './resources.js'

describe('parseResources', () => {
  test('reads cpu, memory and gpu', () => {
    expect(parseResources('cpu=1,memory=2Gi,gpu=0')).toEqual({ cpu: 1, memory: 2 * 1024 ** 3, gpu: 0 })
    expect(parseResources(' cpu = 0.5 , memory=512Mi ')).toEqual({ cpu: 0.5, memory: 512 * 1024 ** 2, gpu: 0 })
    expect(parseResources('gpu=8')).toMatchObject({ gpu: 8, cpu: 1 })
  })

  test('memory follows the Kubernetes rule: G is 10⁹ bytes, Gi is 2³⁰', () => {
    const memory = (m: string) => parseResources(`memory=${m}`).memory
    expect(memory('1024')).toBe(1024)
    expect(memory('4G')).toBe(4e9)
    expect(memory('1.5Gi')).toBe(1.5 * 1024 ** 3)
    expect(memory('4k')).toBe(4000)
    expect(memory('1Ti')).toBe(1024 ** 4)
    expect(DEFAULT_RESOURCES.memory).toBe(memory('1Gi'))
  })

  test.each([
    ['', /empty/],
    ['cpu', /"cpu" has no "="/],
    ['cpu=', /cpu="" must be a positive number/],
    ['cpu=-1', /cpu="-1" must be a positive number/],
    ['cpu=lots', /cpu="lots"/],
    ['memory=2X', /memory="2X" is not a byte size.*4Gi/],
    ['memory=1.5GiB', /memory="1.5GiB" is not a byte size/],
    ['memory=4K', /memory="4K" is not a byte size/],
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

  test('memory prints in the largest sensible unit', () => {
    const print = (memory: number) => formatResources({ cpu: 1, memory, gpu: 0 })
    expect(print(24684084 * 1024)).toBe('cpu=1,memory=23.5Gi,gpu=0')
    expect(print(512 * 1024 ** 2)).toBe('cpu=1,memory=512Mi,gpu=0')
    expect(print(4e9)).toBe('cpu=1,memory=4G,gpu=0')
    expect(print(4096)).toBe('cpu=1,memory=4Ki,gpu=0')
    expect(print(1000)).toBe('cpu=1,memory=1k,gpu=0')
  })

  test('fits compares every axis', () => {
    expect(fits(parseResources('cpu=1,memory=1G'), parseResources('cpu=1,memory=1G'))).toBe(true)
    expect(fits(parseResources('cpu=1,memory=2G'), parseResources('cpu=4,memory=1G'))).toBe(false)
    expect(fits(parseResources('gpu=1'), parseResources('gpu=0'))).toBe(false)
  })
})
