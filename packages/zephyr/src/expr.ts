/**
 * @module Filter expressions as plain data: `col('lang').eq('en')`.
 *
 * Unlike a function, an expression can be inspected: `loadParquet` uses it to
 * skip whole row groups whose min/max statistics prove no row can match, and it
 * travels to worker processes as JSON with no source-code tricks.
 */

export type Scalar = string | number | bigint | boolean | null

export type Expr =
  | { readonly op: 'eq' | 'ne' | 'gt' | 'gte' | 'lt' | 'lte'; readonly column: string; readonly value: Scalar }
  | { readonly op: 'in'; readonly column: string; readonly values: readonly Scalar[] }
  | { readonly op: 'isNull' | 'notNull'; readonly column: string }
  | { readonly op: 'and' | 'or'; readonly args: readonly Expr[] }
  | { readonly op: 'not'; readonly arg: Expr }

/** A column reference; its methods build expressions. */
export type ColumnRef = {
  readonly column: string
  eq(value: Scalar): ExprBuilder
  ne(value: Scalar): ExprBuilder
  gt(value: Scalar): ExprBuilder
  gte(value: Scalar): ExprBuilder
  lt(value: Scalar): ExprBuilder
  lte(value: Scalar): ExprBuilder
  in(values: readonly Scalar[]): ExprBuilder
  isNull(): ExprBuilder
  notNull(): ExprBuilder
}

/** An expression that can be combined further. */
export type ExprBuilder = {
  readonly expr: Expr
  and(other: ExprBuilder): ExprBuilder
  or(other: ExprBuilder): ExprBuilder
  not(): ExprBuilder
}

function builder(expr: Expr): ExprBuilder {
  return {
    expr,
    and: (o) => builder({ op: 'and', args: [expr, o.expr] }),
    or: (o) => builder({ op: 'or', args: [expr, o.expr] }),
    not: () => builder({ op: 'not', arg: expr }),
  }
}

/**
 * A column of the records, for filter expressions.
 * @example ds.loadParquet().filter(col('lang').eq('en').and(col('score').gte(0.5)))
 */
export function col(column: string): ColumnRef {
  const cmp = (op: 'eq' | 'ne' | 'gt' | 'gte' | 'lt' | 'lte') => (value: Scalar) => builder({ op, column, value })
  return {
    column,
    eq: cmp('eq'),
    ne: cmp('ne'),
    gt: cmp('gt'),
    gte: cmp('gte'),
    lt: cmp('lt'),
    lte: cmp('lte'),
    in: (values) => builder({ op: 'in', column, values: [...values] }),
    isNull: () => builder({ op: 'isNull', column }),
    notNull: () => builder({ op: 'notNull', column }),
  }
}

export function isExprBuilder(x: unknown): x is ExprBuilder {
  return typeof x === 'object' && x !== null && 'expr' in x && typeof (x as ExprBuilder).and === 'function'
}

// bigint and number compare across types so an INT64 column matches col('n').eq(3).
function compare(a: unknown, b: unknown): number | undefined {
  if (a === null || a === undefined || b === null || b === undefined) return undefined
  if ((typeof a === 'number' || typeof a === 'bigint') && (typeof b === 'number' || typeof b === 'bigint')) {
    return a < b ? -1 : a > b ? 1 : 0
  }
  if (typeof a === 'string' && typeof b === 'string') return a < b ? -1 : a > b ? 1 : 0
  if (typeof a === 'boolean' && typeof b === 'boolean') return Number(a) - Number(b)
  return undefined
}

/** Whether one record satisfies the expression (`null` compares false, as in SQL). */
export function evaluate(expr: Expr, record: unknown): boolean {
  const get = (c: string) => (record as Record<string, unknown> | null)?.[c]
  switch (expr.op) {
    case 'and':
      return expr.args.every((e) => evaluate(e, record))
    case 'or':
      return expr.args.some((e) => evaluate(e, record))
    case 'not':
      return !evaluate(expr.arg, record)
    case 'isNull':
      return get(expr.column) == null
    case 'notNull':
      return get(expr.column) != null
    case 'in':
      return expr.values.some((v) => compare(get(expr.column), v) === 0)
    default: {
      const c = compare(get(expr.column), expr.value)
      if (c === undefined) return false
      switch (expr.op) {
        case 'eq':
          return c === 0
        case 'ne':
          return c !== 0
        case 'gt':
          return c > 0
        case 'gte':
          return c >= 0
        case 'lt':
          return c < 0
        case 'lte':
          return c <= 0
      }
    }
  }
}

/** What a row group's statistics say about one column; a missing bound means unknown. */
export type ColumnStats = {
  readonly min?: unknown
  readonly max?: unknown
  readonly nullCount?: number
  readonly numRows: number
}

/**
 * Whether any row of a group with these statistics might satisfy `expr`.
 * `false` is a proof (the group is skipped); `true` may be wrong, so rows are still filtered.
 */
export function mayMatch(expr: Expr, stats: (column: string) => ColumnStats | undefined): boolean {
  switch (expr.op) {
    case 'and':
      return expr.args.every((e) => mayMatch(e, stats))
    case 'or':
      return expr.args.some((e) => mayMatch(e, stats))
    case 'not':
      return true // bounds cannot prove a negation false in general
    case 'isNull': {
      const s = stats(expr.column)
      return s?.nullCount === undefined || s.nullCount > 0
    }
    case 'notNull': {
      const s = stats(expr.column)
      return s?.nullCount === undefined || s.nullCount < s.numRows
    }
    case 'in':
      return expr.values.some((value) => mayMatch({ op: 'eq', column: expr.column, value }, stats))
    default: {
      const s = stats(expr.column)
      if (!s) return true
      const lo = compare(s.min, expr.value)
      const hi = compare(s.max, expr.value)
      switch (expr.op) {
        case 'eq':
          return !(lo !== undefined && lo > 0) && !(hi !== undefined && hi < 0)
        case 'ne':
          return !(lo === 0 && hi === 0 && s.nullCount === 0)
        case 'gt':
          return !(hi !== undefined && hi <= 0)
        case 'gte':
          return !(hi !== undefined && hi < 0)
        case 'lt':
          return !(lo !== undefined && lo >= 0)
        case 'lte':
          return !(lo !== undefined && lo > 0)
      }
    }
  }
}

/** The columns an expression reads (to add them to a projection). */
export function exprColumns(expr: Expr): string[] {
  switch (expr.op) {
    case 'and':
    case 'or':
      return [...new Set(expr.args.flatMap(exprColumns))]
    case 'not':
      return exprColumns(expr.arg)
    default:
      return [expr.column]
  }
}
