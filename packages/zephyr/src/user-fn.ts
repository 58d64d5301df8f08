/**
 * @module The functions a plan runs, and how they reach a worker process.
 * A function given inline travels as source text, so it must be
 * self-contained; two ways carry context without closures:
 *
 * - bound arguments: `ds.map((r, a) => r.n * a.factor, { args: { factor: 3 } })`.
 *   `args` is structured-cloned when the plan is built (a snapshot, as a worker
 *   gets it) and passed as the function's last argument.
 * - a module reference: `ds.map(fnRef<typeof clean>(import.meta.url, 'clean'))`.
 *   The worker imports the module and calls its export, which may use anything
 *   the module imports. Combine with `args` for per-run settings.
 */
import { isAbsolute } from 'node:path'
import { pathToFileURL } from 'node:url'
import { ZephyrError } from './errors.js'
import type { AnyFn } from './ops.js'

/**
 * An exported function of a module, by URL and export name. The type
 * parameter only carries the function's signature for type inference.
 */
export type FunctionRef<F extends AnyFn = AnyFn> = {
  readonly module: string
  readonly name: string
  /** Never set: the signature, for inference. */
  readonly __signature?: F
}

/** A function given inline, or by module reference. */
export type FnSpec<F extends AnyFn = AnyFn> = F | FunctionRef<F>

/**
 * A reference to the export `name` of `module` (an `import.meta.url`, a
 * `file:` URL or an absolute path).
 * @example ds.map(fnRef<typeof normalize>(import.meta.url, 'normalize'), { args: cfg })
 */
export function fnRef<F extends AnyFn>(module: string | URL, name: string): FunctionRef<F> {
  const url = module instanceof URL ? module.href : module
  return checkRef({ module: url, name }, 'fnRef') as FunctionRef<F>
}

export function isFunctionRef(v: unknown): v is FunctionRef {
  return (
    typeof v === 'object' &&
    v !== null &&
    typeof (v as FunctionRef).module === 'string' &&
    typeof (v as FunctionRef).name === 'string'
  )
}

function checkRef(ref: FunctionRef, what: string): FunctionRef {
  if (typeof ref.name !== 'string' || !/^[A-Za-z_$][\w$]*$/.test(ref.name)) {
    throw new ZephyrError(
      'INVALID_PLAN',
      `${what}: export name ${JSON.stringify(ref.name)} is not an ` +
        `identifier; pass the name of an exported function`,
    )
  }
  if (typeof ref.module !== 'string' || !(/^file:\/\//.test(ref.module) || isAbsolute(ref.module))) {
    throw new ZephyrError(
      'INVALID_PLAN',
      `${what}: module ${JSON.stringify(ref.module)} must be a file: ` +
        `URL or an absolute path (pass import.meta.url), so that every ` +
        `process finds the same file`,
    )
  }
  return { module: isAbsolute(ref.module) ? pathToFileURL(ref.module).href : ref.module, name: ref.name }
}

/** Validates a function argument of a Dataset method: a function, or a module reference. */
export function checkFnSpec<F extends AnyFn>(f: unknown, what: string): FnSpec<F> {
  if (typeof f === 'function') return f as F
  if (isFunctionRef(f)) return checkRef(f, what) as FunctionRef<F>
  throw new ZephyrError(
    'INVALID_PLAN',
    `${what} needs a function or a module reference ` +
      `fnRef(import.meta.url, 'name'), got ` +
      `${f === null ? 'null' : typeof f}`,
  )
}

/** A structured-clone snapshot of bound arguments; `INVALID_PLAN` if they cannot travel. */
export function snapshotArgs(args: unknown, what: string): unknown {
  if (args === undefined) return undefined
  try {
    return structuredClone(args)
  } catch (err) {
    throw new ZephyrError(
      'INVALID_PLAN',
      `${what}: args cannot be sent to a worker (` +
        `${(err as Error).message}); pass plain data (objects, arrays, ` +
        `strings, numbers, typed arrays, Maps), not functions or class instances`,
      false,
      { cause: err },
    )
  }
}

/** Imports the referenced function; `INVALID_PLAN` naming the module when it is missing. */
export async function importFn(ref: FunctionRef, what: string): Promise<AnyFn> {
  let mod: Record<string, unknown>
  try {
    mod = (await import(ref.module)) as Record<string, unknown>
  } catch (err) {
    throw new ZephyrError(
      'INVALID_PLAN',
      `${what}: cannot import ${ref.module} (${(err as Error).message}); check the module URL`,
      false,
      { cause: err },
    )
  }
  const fn = mod[ref.name]
  if (typeof fn !== 'function') {
    const names = Object.keys(mod)
      .filter((k) => typeof mod[k] === 'function')
      .sort()
    throw new ZephyrError(
      'INVALID_PLAN',
      `${what}: ${ref.module} has no exported function "${ref.name}" ` +
        `(its functions: ${names.join(', ') || 'none'})`,
    )
  }
  return fn as AnyFn
}

/** The function to call: imported if referenced, with `args` appended after its `arity` arguments. */
export async function resolveFn(spec: FnSpec, args: unknown, arity: 1 | 2, what: string): Promise<AnyFn> {
  const fn = typeof spec === 'function' ? spec : await importFn(spec, what)
  if (args === undefined) return fn
  return arity === 1 ? (a: unknown) => fn(a, args) : (a: unknown, b: unknown) => fn(a, b, args)
}
