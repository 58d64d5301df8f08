/** @module Arguments of the `finestore` CLI: the store under a prefix, durations. */
import { MARIN_LAYOUT, prefixDir, prefixPath, prefixUrl } from '@marin/rigging'
import { UsageError } from '@marin/rigging/cli'

/** `1h`, `30m`, `10s`, `250ms` or a plain number of milliseconds. */
export function parseDuration(text: string, flag = '--grace'): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)?$/.exec(text.trim())
  if (!m) throw new UsageError(`${flag} "${text}" is not a duration; use e.g. 0, 30s, 10m, 1h`)
  const unit = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[(m[2] ?? 'ms') as 'ms']
  return Number(m[1]) * unit
}

/** The store under a prefix (a local path or a storage URL): its URL, and its folder when it is local. */
export function storeLocation(prefix: string): { url: string; localDir?: string } {
  const url = prefixPath(prefixUrl(prefix), MARIN_LAYOUT.store)
  const localDir = prefixDir(url)
  return localDir === undefined ? { url } : { url, localDir }
}
