import { expect, test } from 'vitest'
import { col, evaluate, exprColumns, mayMatch } from './expr.js'
import type { ColumnStats } from './expr.js'

test('evaluate compares like SQL: nulls never match, bigint meets number', () => {
  const e = col('lang').eq('en').and(col('n').gte(3))
  expect(evaluate(e.expr, { lang: 'en', n: 3n })).toBe(true)
  expect(evaluate(e.expr, { lang: 'en', n: 2 })).toBe(false)
  expect(evaluate(col('n').ne(1).expr, { n: null })).toBe(false)
  expect(evaluate(col('n').isNull().expr, {})).toBe(true)
  expect(evaluate(col('x').in(['a', 'b']).or(col('y').lt(0)).expr, { x: 'c', y: -1 })).toBe(true)
  expect(evaluate(col('x').eq('a').not().expr, { x: 'b' })).toBe(true)
  expect(
    exprColumns(
      col('a')
        .eq(1)
        .and(col('b').eq(2).or(col('a').gt(0))).expr,
    ),
  ).toEqual(['a', 'b'])
})

test('mayMatch proves from min/max/null counts that no row can match', () => {
  const stats = (s: Record<string, ColumnStats>) => (c: string) => s[c]
  const g = stats({
    lang: { min: 'de', max: 'en', nullCount: 0, numRows: 10 },
    n: { min: 5, max: 9, nullCount: 10, numRows: 10 },
  })
  expect(mayMatch(col('lang').eq('fr').expr, g)).toBe(false)
  expect(mayMatch(col('lang').eq('en').expr, g)).toBe(true)
  expect(mayMatch(col('lang').in(['zz', 'aa']).expr, g)).toBe(false)
  expect(mayMatch(col('n').gt(9).expr, g)).toBe(false)
  expect(mayMatch(col('n').gte(9).expr, g)).toBe(true)
  expect(mayMatch(col('n').lt(5).expr, g)).toBe(false)
  expect(mayMatch(col('n').notNull().expr, g)).toBe(false)
  expect(mayMatch(col('lang').isNull().expr, g)).toBe(false)
  expect(mayMatch(col('lang').eq('fr').or(col('n').eq(7)).expr, g)).toBe(true)
  expect(mayMatch(col('lang').eq('fr').not().expr, g)).toBe(true)
  expect(mayMatch(col('unknown').eq(1).expr, g)).toBe(true)
})
