/**
 * @module Redaction of secrets: by key name (any depth of a logged object) and by value
 * (every value a `SecretStore` resolved is scrubbed from each finished log line).
 */

/** What a redacted field or a scrubbed secret value becomes. */
export const REDACTED = '[REDACTED]'

// Keys are compared with case, `-`, `_` and `.` removed, so `api_key`, `apiKey` and
// `API-KEY` are one key. Anything ending in `token` is secret (`hf_token`, `accessToken`),
// except the special tokens of tokenizers (`eos_token`, `pad_token`); plurals and longer
// words (`numTokens`, `tokenizer`) are ordinary training vocabulary and stay readable.
const SECRET_KEY =
  /^(?:.*(?:password|passwd|secrets?|apikey|privatekey|secretkey|secretaccesskey|signingkey|encryptionkey|token|credentials?)|auth|authorization|proxyauthorization|cookie|setcookie|pwd)$/
const TOKENIZER_TOKEN = /^(?:eos|bos|pad|unk|sep|cls|mask|special|start|end|stop|begin)token$/

/**
 * Whether a field with this key holds a secret and is redacted in logs.
 * @example isSecretKey('apiKey') // true
 * @example isSecretKey('numTokens') // false
 */
export function isSecretKey(key: string): boolean {
  let known = keyCache.get(key)
  if (known === undefined) {
    const k = key.toLowerCase().replace(/[-_.]/g, '')
    known = SECRET_KEY.test(k) && !TOKENIZER_TOKEN.test(k)
    // Log keys repeat endlessly; a bounded cache saves the regexes on every line.
    if (keyCache.size >= 10_000) keyCache.clear()
    keyCache.set(key, known)
  }
  return known
}
const keyCache = new Map<string, boolean>()

// Deeper than this a value is cut rather than printed unread: redaction must not be skippable.
const MAX_DEPTH = 32

/**
 * `value` with every field whose key looks secret (see {@link isSecretKey}), at any depth,
 * replaced by `[REDACTED]`. The input is never modified: objects on the way to a redacted
 * field are copied, and a value with nothing to redact is returned as is. Objects are read
 * the way `JSON.stringify` reads them (own enumerable keys); a cycle becomes `[Circular]` and
 * anything nested deeper than 32 levels becomes `[Truncated]`.
 */
export function redactSecrets<T>(value: T): T {
  return redactAt(value, 0, []) as T
}

// `path` holds the objects from the root to here (at most 33): cheaper than a WeakSet per line.
function redactAt(value: unknown, depth: number, path: object[]): unknown {
  if (value === null || typeof value !== 'object') return value
  if (depth > MAX_DEPTH) return '[Truncated]'
  if (!isWalkable(value)) return value
  // A cycle is cut here: returning the object itself would let the serializer print it unredacted.
  if (path.includes(value)) return '[Circular]'
  path.push(value)
  let out: unknown = value
  if (Array.isArray(value)) {
    let copy: unknown[] | undefined
    for (let i = 0; i < value.length; i++) {
      const r = redactAt(value[i], depth + 1, path)
      if (r !== value[i]) (copy ??= value.slice())[i] = r
    }
    if (copy !== undefined) out = copy
  } else {
    const obj = value as Record<string, unknown>
    let copy: Record<string, unknown> | undefined
    for (const key of Object.keys(obj)) {
      const v = obj[key]
      const r = isSecretKey(key) && v !== undefined && v !== null ? REDACTED : redactAt(v, depth + 1, path)
      if (r !== v) (copy ??= { ...obj })[key] = r
    }
    if (copy !== undefined) out = copy
  }
  path.pop()
  return out
}

// Errors go through the error serializer (which redacts its own output); values with
// `toJSON`, binary data and collections serialize themselves and hold no keyed fields.
function isWalkable(value: object): boolean {
  if (Array.isArray(value)) return true
  const proto: unknown = Object.getPrototypeOf(value)
  if (proto === Object.prototype || proto === null) return typeof (value as { toJSON?: unknown }).toJSON !== 'function'
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
