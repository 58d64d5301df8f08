/**
 * @module Byte sizes (memory requests, capacities) read and printed by one rule, the one
 * Kubernetes uses for quantities, so that a size means the same in every package and on a cluster:
 *
 * - a plain number is bytes: `1048576`;
 * - decimal suffixes are powers of 1000: `k` (lower case), `M`, `G`, `T` — `4G` is 4 000 000 000;
 * - binary suffixes are powers of 1024: `Ki`, `Mi`, `Gi`, `Ti` — `4Gi` is 4 294 967 296;
 * - a decimal fraction is allowed (`1.5Gi`); a fraction of a byte rounds up;
 * - case matters and nothing else is read: `4K`, `4g`, `4GB`, `4GiB`, `4 G` and `1e9` are refused.
 */
import { RiggingError } from './errors.js'

const UNITS: Record<string, number> = {
  '': 1,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
}

// Largest first, binary before decimal of the same order (Ti > T > Gi > G ...).
const PRINT_ORDER = (['Ti', 'T', 'Gi', 'G', 'Mi', 'M', 'Ki', 'k'] as const).map((u) => [u, UNITS[u]!] as const)

const EXAMPLES =
  'write bytes (1048576), a decimal size (512M, 4G = 4×10⁹ bytes) ' +
  'or a binary size (512Mi, 4Gi = 4×2³⁰ bytes); suffixes are k, M, ' +
  'G, T, Ki, Mi, Gi, Ti'

function invalid(field: string, value: string | number): RiggingError {
  return new RiggingError('BYTE_SIZE_INVALID', `${field}="${value}" is not a byte size; ${EXAMPLES}`)
}

/**
 * A size in bytes; a number passes through when it is a whole number of bytes.
 * `field` names the setting in the error (`BYTE_SIZE_INVALID`).
 * @example parseByteSize('4G') // 4000000000
 * @example parseByteSize('4Gi') // 4294967296
 */
export function parseByteSize(value: string | number, field = 'size'): number {
  if (typeof value === 'number') {
    if (!Number.isSafeInteger(value) || value < 0) throw invalid(field, value)
    return value
  }
  const m = /^(\d+(?:\.\d+)?)([a-zA-Z]*)$/.exec(value)
  const unit = m ? UNITS[m[2]!] : undefined
  if (!m || unit === undefined) throw invalid(field, value)
  // The small offset keeps float noise (1.1 × 1000 = 1100.0000000000002) from rounding up.
  const bytes = Math.max(0, Math.ceil(Number(m[1]) * unit - 1e-6))
  if (!Number.isSafeInteger(bytes)) throw invalid(field, value)
  return bytes
}

/**
 * Prints bytes in the form `parseByteSize` reads: the largest unit that divides them exactly
 * (binary before decimal; `Ki`/`k` only below a mebibyte), else, from one mebibyte up, one decimal
 * of `Gi` or `Mi` (machine totals are rarely whole units; such a print is for reading, not exact).
 * @example formatByteSize(4e9) // '4G'
 * @example formatByteSize(2 ** 31) // '2Gi'
 */
export function formatByteSize(bytes: number): string {
  for (const [unit, size] of PRINT_ORDER) {
    // From a mebibyte up, 24684084Ki reads worse than 23.5Gi.
    if (bytes >= UNITS.Mi! && size < UNITS.M!) break
    if (bytes > 0 && bytes % size === 0) return `${bytes / size}${unit}`
  }
  if (bytes >= UNITS.Gi!) return `${Number((bytes / UNITS.Gi!).toFixed(1))}Gi`
  if (bytes >= UNITS.Mi!) return `${Number((bytes / UNITS.Mi!).toFixed(1))}Mi`
  return String(bytes)
}
