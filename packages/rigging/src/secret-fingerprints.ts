/**
 * @module Fingerprints of the secret values a process registered, for another process to scrub them from data
 * the first one wrote: a step reads a key and writes it into a dataset row, and the publisher of the report, which
 * never read that key, must still leave it out of the site. A fingerprint holds no value: a salted sha256 of it,
 * its length and a 24-bit rolling hash (enough to find candidates in one pass over a text, too little to matter
 * next to the sha256). Like the executor's status files, fingerprints belong in files only their owner reads.
 */
import { createHash, randomBytes } from 'node:crypto'
import { REDACTED, registeredSecretValues } from './redaction.js'

/** What `secretFingerprints` gives: one salt and, per registered value (raw and JSON-escaped), its fingerprint. */
export type SecretFingerprints = {
  readonly salt: string
  readonly values: readonly { readonly length: number; readonly roll: number; readonly sha256: string }[]
}

const BASE = 0x01000193

/** The polynomial hash of `s[from, from + length)` over UTF-16 code units, mod 2^32. */
function hashOf(s: string, from: number, length: number): number {
  let h = 0
  for (let i = from; i < from + length; i++) h = (Math.imul(h, BASE) + s.charCodeAt(i)) >>> 0
  return h
}

const salted = (salt: string, v: string) => createHash('sha256').update(salt).update(v).digest('hex')

/**
 * Fingerprints of every secret value this process registered (see `registerSecretValue`; `SecretStore`
 * registers each value it resolves), under a fresh salt.
 * @example writeFileSync(join(dir, '.secrets'), JSON.stringify(secretFingerprints()), { mode: 0o600 })
 */
export function secretFingerprints(): SecretFingerprints {
  const salt = randomBytes(16).toString('hex')
  const values = registeredSecretValues().map((v) => ({
    length: v.length,
    roll: hashOf(v, 0, v.length) >>> 8,
    sha256: salted(salt, v),
  }))
  return { salt, values }
}

/** Whether `o` has the shape of `SecretFingerprints` (read back from a file others may have written). */
export function isSecretFingerprints(o: unknown): o is SecretFingerprints {
  const f = o as SecretFingerprints
  return (
    !!f &&
    typeof f.salt === 'string' &&
    Array.isArray(f.values) &&
    f.values.every(
      (v) =>
        !!v &&
        Number.isInteger(v.length) &&
        v.length > 0 &&
        Number.isInteger(v.roll) &&
        typeof v.sha256 === 'string' &&
        /^[0-9a-f]{64}$/.test(v.sha256),
    )
  )
}

/**
 * `text` with every value fingerprinted in `prints` replaced by `[REDACTED]`, longest first, in one pass per
 * distinct length (a rolling hash proposes a window; its salted sha256 decides).
 * @example scrubFingerprinted(`row with ${key}`, [fingerprintsFromTheStep]) // 'row with [REDACTED]'
 */
export function scrubFingerprinted(text: string, prints: readonly SecretFingerprints[]): string {
  const byLength = new Map<number, Map<number, { salt: string; sha256: string }[]>>()
  for (const p of prints)
    for (const v of p.values) {
      if (v.length > text.length) continue
      const rolls = byLength.get(v.length) ?? byLength.set(v.length, new Map()).get(v.length)!
      const list = rolls.get(v.roll) ?? rolls.set(v.roll, []).get(v.roll)!
      list.push({ salt: p.salt, sha256: v.sha256 })
    }
  if (byLength.size === 0) return text
  const found: [number, number][] = []
  for (const [length, rolls] of byLength) {
    // A table of the rolls' top 16 bits turns away nearly every window before the map is asked.
    const maybe = new Uint8Array(1 << 16)
    for (const r of rolls.keys()) maybe[r >>> 8] = 1
    let top = 1
    for (let i = 1; i < length; i++) top = Math.imul(top, BASE) >>> 0
    let h = hashOf(text, 0, length)
    for (let i = 0; ; i++) {
      const candidates = maybe[h >>> 16] === 1 ? rolls.get(h >>> 8) : undefined
      if (candidates) {
        const window = text.slice(i, i + length)
        if (candidates.some((c) => salted(c.salt, window) === c.sha256)) found.push([i, i + length])
      }
      if (i + length >= text.length) break
      h = (Math.imul((h - Math.imul(text.charCodeAt(i), top)) >>> 0, BASE) + text.charCodeAt(i + length)) >>> 0
    }
  }
  if (found.length === 0) return text
  // Longest first where two overlap, as `scrubSecretValues` replaces a secret holding another whole.
  found.sort((a, b) => a[0] - b[0] || b[1] - a[1])
  let out = ''
  let at = 0
  for (const [from, to] of found) {
    if (from < at) {
      if (to > at) at = to
      continue
    }
    out += text.slice(at, from) + REDACTED
    at = to
  }
  return out + text.slice(at)
}
