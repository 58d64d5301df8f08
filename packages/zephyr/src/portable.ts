/**
 * @module Stage plans that travel to worker processes. A plan is data except
 * for user functions, which go as their source text and are rebuilt in the
 * worker. Such a function must therefore be self-contained: it may use its
 * arguments, globals (`Math`, `JSON`, `process`) and `process.getBuiltinModule`,
 * but not variables captured from the surrounding code; a function that does
 * fails with `FUNCTION_NOT_PORTABLE` naming the variable. Context travels as
 * bound `args` (structured clone) or through a module reference that the
 * worker imports (`user-fn.ts`); `inProcess: true` allows closures.
 */
import { ZephyrError } from './errors.js'
import type { StagePlan } from './plan.js'

type FnRef = { readonly $fn: string }

/** Source text that evaluates to the function, or an error saying why it cannot. */
export function functionSource(fn: (...args: never[]) => unknown, where: string): string {
  let src = fn.toString()
  if (/\{\s*\[native code\]\s*\}$/.test(src)) {
    throw new ZephyrError(
      'FUNCTION_NOT_PORTABLE',
      `${where}: a native or bound function cannot be sent to a worker; pass an inline function like (r) => ...`,
    )
  }
  // method shorthand `m(x) {…}` / `async m(x) {…}` / `*m(x) {…}` is not an expression; make it one
  const method = /^(async\s+)?(\*\s*)?([\w$]+)\s*\(/.exec(src)
  if (method && !/^(async\s+)?function\b/.test(src) && !/^(async\s+)?[\w$]+\s*=>/.test(src)) {
    src = `${method[1] ?? ''}function${method[2] ? '*' : ''} ${src.slice(method[0].length - 1)}`
  }
  try {
    const revived = new Function(`return (${src})`)()
    if (typeof revived !== 'function') throw new Error('not a function')
  } catch (err) {
    throw new ZephyrError(
      'FUNCTION_NOT_PORTABLE',
      `${where}: its source cannot be rebuilt in a worker (` +
        `${(err as Error).message}); pass an inline arrow or function expression`,
      false,
      { cause: err },
    )
  }
  return src
}

// Data the user gave (bound args, list items) travels as is: never searched for functions.
const DATA_KEYS = new Set(['args', 'shards'])

function walk(value: unknown, fnToValue: (fn: unknown, path: string) => unknown, path: string): unknown {
  if (typeof value === 'function') return fnToValue(value, path)
  if (
    value &&
    typeof value === 'object' &&
    (value as FnRef).$fn !== undefined &&
    typeof (value as FnRef).$fn === 'string'
  )
    return fnToValue(value, path)
  if (Array.isArray(value)) return value.map((v, i) => walk(v, fnToValue, `${path}[${i}]`))
  if (value && typeof value === 'object' && Object.getPrototypeOf(value) === Object.prototype) {
    const o: Record<string, unknown> = {}
    for (const [k, v] of Object.entries(value)) o[k] = DATA_KEYS.has(k) ? v : walk(v, fnToValue, `${path}.${k}`)
    return o
  }
  return value
}

/** The plan with every function replaced by `{ $fn: source }`. */
export function toPortable(stage: StagePlan): unknown {
  if (stage.input.kind === 'iterable')
    throw new Error('an iterable source must be materialized before it goes to a worker')
  return walk(
    stage,
    (fn, path) => {
      if (typeof fn !== 'function') return fn
      const op = /ops\[(\d+)\]/.exec(path)
      const label = op
        ? `stage ${stage.index} ${stage.ops[Number(op[1])]!.kind}`
        : `stage ${stage.index} ${path.replace(/^\./, '')}`
      return { $fn: functionSource(fn as () => unknown, label) }
    },
    '',
  )
}

/** Rebuilds the plan in a worker. */
export function fromPortable(data: unknown): StagePlan {
  return walk(data, (ref) => new Function(`return (${(ref as FnRef).$fn})`)(), '') as StagePlan
}
