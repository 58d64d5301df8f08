/**
 * @module Redaction of secrets: by key name (any depth of a logged object) and by value
 * (every value a `SecretStore` resolved is scrubbed from each finished log line).
 */

/** What a redacted field or a scrubbed secret value becomes. */
export const REDACTED = '[REDACTED]'

// Keys are compared with case, `-`, `_` and `.` removed, so `api_key`, `apiKey` and
// `API-KEY` are one key. `token` alone is secret, but `tokens`, `numTokens`, `eosToken`
// and `tokenizer` are ordinary training vocabulary and must stay readable.
const SECRET_KEY =
  /^(?:.*(?:password|passwd|secrets?|apikey|privatekey|secretkey|accesstoken|refreshtoken|idtoken|authtoken|sessiontoken|bearertoken|credentials?)|token|auth|authorization|proxyauthorization|cookie|setcookie|pwd|xapikey)$/

/**
 * Whether a field with this key holds a secret and is redacted in logs.
 * @example isSecretKey('apiKey') // true
 * @example isSecretKey('numTokens') // false
 */
export function isSecretKey(key: string): boolean {
  return SECRET_KEY.test(key.toLowerCase().replace(/[-_.]/g, ''))
}

// Deeper than this a value is cut rather than printed unread: redaction must not be skippable.
const MAX_DEPTH = 32

/**
 * A copy of `value` where every field with a secret-looking key (see {@link isSecretKey}),
 * at any depth, is replaced by `[REDACTED]`. The input is never modified. Objects are read
 * the way `JSON.stringify` reads them (own enumerable keys); a cycle becomes `[Circular]` and
 * anything nested deeper than 32 levels becomes `[Truncated]`.
 */
export function redactSecrets<T>(value: T): T {
  return redactAt(value, 0, new WeakSet()) as T
}

function redactAt(value: unknown, depth: number, seen: WeakSet<object>): unknown {
  if (value === null || typeof value !== 'object') return value
  if (depth > MAX_DEPTH) return '[Truncated]'
  if (!isWalkable(value)) return value
  // A cycle is cut here: returning the object itself would let the serializer print it unredacted.
  if (seen.has(value)) return '[Circular]'
  seen.add(value)
  let out: unknown
  if (Array.isArray(value)) {
    out = value.map((v) => redactAt(v, depth + 1, seen))
  } else {
    const copy: Record<string, unknown> = {}
    for (const key of Object.keys(value)) {
      const v = (value as Record<string, unknown>)[key]
      copy[key] = isSecretKey(key) && v !== undefined && v !== null ? REDACTED : redactAt(v, depth + 1, seen)
    }
    out = copy
  }
  seen.delete(value)
  return out
}

// Errors go through the error serializer (which redacts its own output); values with
// `toJSON`, binary data and collections serialize themselves and hold no keyed fields.
function isWalkable(value: object): boolean {
  if (Array.isArray(value)) return true
  if (value instanceof Error || ArrayBuffer.isView(value) || value instanceof ArrayBuffer) return false
  if (value instanceof Map || value instanceof Set || value instanceof Date || value instanceof RegExp) return false
  return typeof (value as { toJSON?: unknown }).toJSON !== 'function'
}

// Shorter values would turn ordinary words into `[REDACTED]` all over a log and are not
// secrets worth the name; they are not scrubbed by value (they are still hidden by key).
const MIN_SCRUB_LENGTH = 4
const secretValues = new Set<string>()
let sortedValues: string[] = []

/**
 * Registers a secret value: from now on it is replaced by `[REDACTED]` wherever it occurs in
 * a log line, in the message, a field or an error stack, in its raw and its JSON-escaped form.
 * `SecretStore` registers every value it resolves.
 */
export function registerSecretValue(value: string): void {
  if (value.length < MIN_SCRUB_LENGTH) return
  const before = secretValues.size
  secretValues.add(value)
  const escaped = JSON.stringify(value).slice(1, -1)
  if (escaped !== value) secretValues.add(escaped)
  // Longest first, so a secret that contains another is replaced whole.
  if (secretValues.size !== before) sortedValues = [...secretValues].sort((a, b) => b.length - a.length)
}

/** Replaces every registered secret value in `text` by `[REDACTED]`. */
export function scrubSecretValues(text: string): string {
  let out = text
  for (const v of sortedValues) if (out.includes(v)) out = out.split(v).join(REDACTED)
  return out
}
