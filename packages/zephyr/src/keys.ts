/**
 * @module Keys for groupBy/deduplicate: a field name or a function, turned into
 * a canonical string and a 64-bit XXH3 hash (dupekit). The hash picks the
 * output shard and orders groups, so results do not depend on worker count.
 */
import { xxh3Batch } from '@marin/dupekit'
import type { FunctionRef } from './user-fn.js'

/** A field name, a function of the record, or a module reference to one. */
export type KeySpec<T = unknown> = string | ((record: T) => unknown) | FunctionRef<(record: T) => unknown>

/** The key function of a resolved spec (module references are imported before a task runs). */
export function keyFunction<T>(spec: KeySpec<T>): (record: T) => unknown {
  if (typeof spec === 'function') return spec
  if (typeof spec !== 'string') throw new Error(`key ${spec.module}#${spec.name} was not resolved before the task ran`)
  return (r) => (r as Record<string, unknown> | null)?.[spec]
}

/** A string that is equal for equal keys and differs across types (`1` ≠ `"1"`). */
export function canonicalKey(value: unknown): string {
  switch (typeof value) {
    case 'string':
      return `s${value}`
    case 'number':
      return `n${value}`
    case 'bigint':
      return `b${value}`
    case 'boolean':
      return `t${value}`
    case 'undefined':
      return 'u'
  }
  return `j${JSON.stringify(value, (_k, v: unknown) => (typeof v === 'bigint' ? `${v}n` : v))}`
}

/** Hashes of many canonical keys in one call into WebAssembly. */
export function hashKeys(keys: readonly string[]): BigUint64Array {
  return xxh3Batch(keys)
}

/** The shard a hash goes to: low bits, so that spill partitioning (high bits) stays independent. */
export function shardOf(hash: bigint, numShards: number): number {
  return Number(hash % BigInt(numShards))
}
