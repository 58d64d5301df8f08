import { describe, expect, test } from 'vitest'
import { formatByteSize, parseByteSize } from './byte-size.js'
import { isRiggingError } from './errors.js'

describe('parseByteSize', () => {
  test('reads sizes by the Kubernetes quantity rule', () => {
    const table: [string | number, number][] = [
      ['0', 0],
      ['1048576', 1048576],
      [1048576, 1048576],
      ['1k', 1e3],
      ['4k', 4e3],
      ['512M', 512e6],
      ['4G', 4e9],
      ['2T', 2e12],
      ['1Ki', 1024],
      ['512Mi', 512 * 2 ** 20],
      ['4Gi', 4 * 2 ** 30],
      ['1Ti', 2 ** 40],
      ['1.5Gi', 1.5 * 2 ** 30],
      ['0.5k', 500],
      // A fraction of a byte rounds up, as Kubernetes does.
      ['1.0001k', 1001],
    ]
    for (const [text, bytes] of table) expect([text, parseByteSize(text)]).toEqual([text, bytes])
  })

  test('anything else is refused with the field named and examples', () => {
    const bad = [
      '',
      ' 4G',
      '4 G',
      '4K',
      '4g',
      '4GB',
      '4GiB',
      '4gi',
      '4m',
      '4Mb',
      '-1',
      '1e9',
      'lots',
      '4Pi',
      '.5G',
      '4.G',
    ]
    for (const text of bad) {
      let err: unknown
      try {
        parseByteSize(text, 'resources.memory')
      } catch (e) {
        err = e
      }
      expect(isRiggingError(err, 'BYTE_SIZE_INVALID'), text).toBe(true)
      expect((err as Error).message).toContain(`resources.memory="${text}"`)
      expect((err as Error).message).toMatch(/4G.*4Gi/)
    }
    for (const n of [-1, 1.5, Number.NaN, Infinity]) expect(() => parseByteSize(n, 'memory')).toThrow(/memory=/)
  })
})

describe('formatByteSize', () => {
  test('prints the largest exact unit, binary before decimal', () => {
    const table: [number, string][] = [
      [0, '0'],
      [1000, '1k'],
      [1024, '1Ki'],
      [4e9, '4G'],
      [4 * 2 ** 30, '4Gi'],
      [512 * 2 ** 20, '512Mi'],
      [2 ** 40, '1Ti'],
      [1023, '1023'],
      // Machine totals are rarely whole units: one decimal of Gi or Mi reads better.
      [24684084 * 1024, '23.5Gi'],
      [5 * 2 ** 20 + 1, '5Mi'],
    ]
    for (const [bytes, text] of table) expect([bytes, formatByteSize(bytes)]).toEqual([bytes, text])
  })

  test('every exact print reads back to the same bytes', () => {
    for (const bytes of [0, 1, 999, 1000, 1024, 3e9, 3 * 2 ** 30, 7 * 2 ** 40, 123000, 5e6]) {
      expect(parseByteSize(formatByteSize(bytes))).toBe(bytes)
    }
  })
})
