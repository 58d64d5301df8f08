/** @module Canonical JSON (sorted keys, no whitespace) and its sha256: the basis of step versions. */
import { createHash } from 'node:crypto'
import { MarinError } from '../errors.js'

/**
 * JSON with object keys sorted at every depth, so that the same value always
 * gives the same text whatever order its keys were written in.
 * `undefined` fields are dropped (as JSON.stringify does); non-finite numbers,
 * functions, symbols and bigints are refused because JSON cannot hold them faithfully.
 */
export function canonicalJson(value: unknown, where = 'config'): string {
  if (value === null) return 'null'
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return JSON.stringify(value)
    case 'number':
      if (!Number.isFinite(value))
        throw new MarinError(
          'BAD_CONFIG',
          `${where}: ${value} cannot be part of a version; use a finite number or a string`,
        )
      return JSON.stringify(value)
    case 'object': {
      if (Array.isArray(value))
        return `[${value.map((v, i) => (v === undefined ? 'null' : canonicalJson(v, `${where}[${i}]`))).join(',')}]`
      if (value instanceof Date) return JSON.stringify(value.toISOString())
      const keys = Object.keys(value).sort()
      const parts: string[] = []
      for (const k of keys) {
        const v = (value as Record<string, unknown>)[k]
        if (v === undefined) continue
        parts.push(`${JSON.stringify(k)}:${canonicalJson(v, `${where}.${k}`)}`)
      }
      return `{${parts.join(',')}}`
    }
    default:
      throw new MarinError(
        'BAD_CONFIG',
        `${where}: a ${typeof value} cannot be part of a version; use ` +
          `plain JSON data (strings, numbers, booleans, arrays, objects)`,
      )
  }
}

/** Hex sha256 of a string. */
export function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex')
}
