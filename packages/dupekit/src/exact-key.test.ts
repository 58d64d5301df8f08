import { expect, test } from 'vitest'
import { exactKey, exactKeys } from './exact-key.js'
import { hashHex, xxh128 } from './hash.js'

test('the key is the XXH3-128 hex of the normalized text', () => {
  expect(exactKey('Hello,  World')).toBe(hashHex(xxh128('hello, world'), 128))
  expect(exactKey('Hello,  World')).toMatch(/^[0-9a-f]{32}$/)
})

test('equal after normalization ⇔ equal keys', () => {
  expect(exactKey('  Ｃafé\tau lait ')).toBe(exactKey('café au lait'))
  expect(exactKey('café au lait')).not.toBe(exactKey('cafe au lait'))
  expect(exactKey('a, b!', { stripPunctuation: true })).toBe(exactKey('a b'))
  expect(exactKey('a, b!')).not.toBe(exactKey('a b'))
})

test('batch keys equal single keys', () => {
  const texts = ['one', 'Two', 'THREE  ', '', '日本語']
  expect(exactKeys(texts)).toEqual(texts.map((t) => exactKey(t)))
})
