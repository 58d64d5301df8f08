/**
 * @module Output names: `part-{shard:05d}-of-{total:05d}.parquet` → `part-00003-of-00008.parquet`.
 * `{shard}` and `{total}` take an optional zero-padded width (`:05d`).
 */
import { ZephyrError } from './errors.js'

const FIELD = /\{(shard|total)(?::0?(\d+)d)?\}/g

/** Checks that a pattern names each shard distinctly; returns it unchanged. */
export function checkPattern(pattern: string, writer: string): string {
  if (typeof pattern !== 'string' || pattern.length === 0) {
    throw new ZephyrError(
      'INVALID_PLAN',
      `${writer}: the output pattern is empty; pass e.g. "out/part-{shard:05d}-of-{total:05d}.jsonl"`,
    )
  }
  if (!/\{shard(:0?\d+d)?\}/.test(pattern)) {
    throw new ZephyrError(
      'INVALID_PLAN',
      `${writer}: output pattern ${JSON.stringify(pattern)} has no ` +
        `{shard} field, so shards would overwrite each other; add e.g. ` +
        `"part-{shard:05d}-of-{total:05d}"`,
    )
  }
  const stray = pattern.replace(FIELD, '').match(/\{[^}]*\}/)
  if (stray)
    throw new ZephyrError(
      'INVALID_PLAN',
      `${writer}: unknown field ${stray[0]} in output pattern ` +
        `${JSON.stringify(pattern)}; use {shard}, {total}, {shard:05d} ` +
        `or {total:05d}`,
    )
  return pattern
}

/** The output path of one shard. */
export function formatPattern(pattern: string, shard: number, total: number): string {
  return pattern.replace(FIELD, (_m, name: string, width?: string) => {
    const v = String(name === 'shard' ? shard : total)
    return width ? v.padStart(Number(width), '0') : v
  })
}
