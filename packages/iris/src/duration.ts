/** @module Durations such as `5m`, `90s`, `1h30m`, `2d` or `250ms`, in milliseconds. */
import { IrisError } from './errors.js'

const UNIT: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }

/**
 * Parses a duration; a bare number is seconds.
 * @example parseDuration('1h30m') // 5400000
 */
export function parseDuration(text: string, field = 'duration'): number {
  const t = text.trim()
  if (/^\d+(\.\d+)?$/.test(t)) return Number(t) * 1000
  const re = /(\d+(?:\.\d+)?)(ms|s|m|h|d)/gy
  let total = 0
  let matched = 0
  let m: RegExpExecArray | null
  while ((m = re.exec(t)) !== null) {
    total += Number(m[1]) * UNIT[m[2]!]!
    matched = re.lastIndex
  }
  if (t === '' || matched !== t.length) {
    throw new IrisError('BAD_DURATION', `${field}="${text}" is not a duration; write e.g. 30s, 5m, 1h30m or 2d`)
  }
  return total
}
