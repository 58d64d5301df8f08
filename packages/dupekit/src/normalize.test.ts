import { expect, test } from 'vitest'
import { collapseWhitespace, normalizeText } from './normalize.js'

test.each([
  ['Hello World', 'hello world'],
  ['  leading and trailing  ', 'leading and trailing'],
  ['tabs\tand\nnewlines\r\n  mixed', 'tabs and newlines mixed'],
  ['non\u00a0breaking\u3000ideographic\u2003em', 'non breaking ideographic em'],
  ['ＦＵＬＬ－ｗｉｄｔｈ', 'full-width'],
  ['ﬁne ligature', 'fine ligature'],
  ['Café', 'café'],
  ['Cafe\u0301', 'café'], // combining accent composes under NFKC
  ['①②', '12'],
  ['ÀÉÎ', 'àéî'],
  ['\ufeffbom', 'bom'],
  ['', ''],
  ['   ', ''],
  ['a b', 'a b'],
])('normalizeText(%j) = %j', (input, want) => {
  expect(normalizeText(input)).toBe(want)
})

test.each([
  ['Hello, World!', 'hello world'],
  ["don't stop-believing...", 'dont stopbelieving'],
  ['a - b', 'a b'],
  ['price: $5 + 10% <off>', 'price 5 10 off'],
  ['«quoted» — em dash', 'quoted em dash'],
  ['tilde~ caret^ pipe| backtick`', 'tilde caret pipe backtick'],
])('with stripPunctuation, %j → %j', (input, want) => {
  expect(normalizeText(input, { stripPunctuation: true })).toBe(want)
})

test('normalization is idempotent', () => {
  for (const s of ['  Ｈello,\n\tWORLD!  ', 'Cafe\u0301 ①', 'x\u2028y']) {
    const once = normalizeText(s)
    expect(normalizeText(once)).toBe(once)
    const stripped = normalizeText(s, { stripPunctuation: true })
    expect(normalizeText(stripped, { stripPunctuation: true })).toBe(stripped)
  }
})

test('collapseWhitespace equals the regex definition on random whitespace-heavy strings', () => {
  const alphabet = [
    'a',
    'b',
    ' ',
    ' ',
    '\t',
    '\n',
    '\r\n',
    '\u00a0',
    '\u2003',
    '\u3000',
    '\ufeff',
    '\u2028',
    'é',
    '\u180e',
    '\u200b',
  ]
  let s = 12345
  const next = () => ((s = (Math.imul(s, 1103515245) + 12345) >>> 0), s >>> 8)
  for (let k = 0; k < 3000; k++) {
    const len = next() % 12
    let str = ''
    for (let i = 0; i < len; i++) str += alphabet[next() % alphabet.length]
    expect(collapseWhitespace(str), JSON.stringify(str)).toBe(str.replace(/\s+/g, ' ').trim())
  }
})
