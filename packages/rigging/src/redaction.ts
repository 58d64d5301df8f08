/**
 * @module Redaction of secrets: by key name (any depth of a logged object) and by value
 * (every value a `SecretStore` resolved is scrubbed from each finished log line, and from
 * whatever else is persisted or printed through `scrubSecrets`, `scrubWrites` or a
 * `scrubbingStorage`).
 */

/** What a redacted field or a scrubbed secret value becomes. */
export const REDACTED = '[REDACTED]'

// Keys are compared with case, `-`, `_` and `.` removed, so `api_key`, `apiKey` and
// `API-KEY` are one key. Anything ending in `token` is secret (`hf_token`, `accessToken`),
// except the special tokens of tokenizers (`eos_token`, `pad_token`); plurals and longer
// words (`numTokens`, `tokenizer`) are ordinary training vocabulary and stay readable.
const SECRET_WORDS =
  'password|passwd|secrets?|apikey|privatekey|secretkey|secretaccesskey|signingkey|encryptionkey|token|credentials?'
const SECRET_KEY = new RegExp(`^(?:.*(?:${SECRET_WORDS})|auth|authorization|proxyauthorization|cookie|setcookie|pwd)$`)
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
  return rewrite(value, BY_KEY, 0, []) as T
}

const BY_KEY: Rewrite = {
  leaf: (v) => v,
  enter: isWalkable,
  field: (key, v, next) => (isSecretKey(key) && v !== undefined && v !== null ? REDACTED : next(v)),
}

/** How {@link rewrite} treats a tree: what a non-object becomes, which objects it enters, what a field becomes. */
type Rewrite = {
  readonly leaf: (value: unknown) => unknown
  readonly enter: (value: object) => boolean
  readonly field: (name: string, value: unknown, next: (value: unknown) => unknown) => unknown
}

// A copy of `value` rewritten by `w`, copying only the objects on the way to a change. Arrays
// and plain objects are read by own enumerable keys; errors by own names (an error's message,
// stack and cause are not enumerable) and copied with their class. `path` holds the objects
// from the root to here (at most 33): cheaper than a WeakSet per line.
function rewrite(value: unknown, w: Rewrite, depth: number, path: object[]): unknown {
  if (value === null || typeof value !== 'object') return w.leaf(value)
  if (depth > MAX_DEPTH) return '[Truncated]'
  if (!w.enter(value)) return value
  // A cycle is cut here: returning the object itself would let the serializer print it unchanged.
  if (path.includes(value)) return '[Circular]'
  path.push(value)
  const next = (v: unknown) => rewrite(v, w, depth + 1, path)
  let out: unknown = value
  if (Array.isArray(value)) {
    let copy: unknown[] | undefined
    for (let i = 0; i < value.length; i++) {
      const r = next(value[i])
      if (r !== value[i]) (copy ??= value.slice())[i] = r
    }
    if (copy !== undefined) out = copy
  } else {
    const obj = value as Record<string, unknown>
    const isError = value instanceof Error
    const names = isError ? Object.getOwnPropertyNames(obj) : Object.keys(obj)
    const changed = new Map<string, unknown>()
    for (const name of names) {
      let v: unknown
      try {
        v = obj[name]
      } catch {
        continue
      }
      const r = w.field(name, v, next)
      if (r !== v) changed.set(name, r)
    }
    if (changed.size > 0) out = isError ? copyError(obj, names, changed) : { ...obj, ...Object.fromEntries(changed) }
  }
  path.pop()
  return out
}

function copyError(
  err: Record<string, unknown>,
  names: readonly string[],
  changed: ReadonlyMap<string, unknown>,
): object {
  const copy = Object.create(Object.getPrototypeOf(err) as object) as Record<string, unknown>
  for (const name of names) {
    const d = Object.getOwnPropertyDescriptor(err, name)!
    const v = changed.has(name) ? changed.get(name) : 'value' in d ? d.value : err[name]
    Object.defineProperty(copy, name, {
      value: v,
      writable: true,
      configurable: true,
      enumerable: d.enumerable ?? false,
    })
  }
  return copy
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

/**
 * The registered secret values, longest first, for `secretFingerprints` (which hands out only salted hashes);
 * not part of the package's API: a value read here must never be written anywhere.
 */
export function registeredSecretValues(): readonly string[] {
  return sortedValues
}

/** Replaces every registered secret value in `text` by `[REDACTED]`. */
export function scrubSecretValues(text: string): string {
  let out = text
  for (const v of sortedValues) if (out.includes(v)) out = out.split(v).join(REDACTED)
  return out
}

/**
 * `value` with every registered secret value (see {@link registerSecretValue}) replaced by
 * `[REDACTED]` in every string it holds, at any depth: strings, arrays, plain objects and
 * errors (message, stack, cause, `errors` of an AggregateError and any other own field). An
 * error comes back as an error of the same class. Like {@link redactSecrets} it never
 * modifies its input, copies only what it changes, and cuts cycles and deep nesting.
 * Call it on whatever leaves the process that read a secret (an error sent to another process,
 * a result written for one) when it is not written as text through a `scrubbingStorage`.
 * @example scrubSecrets(new Error(`bad key ${key}`)).message // 'bad key [REDACTED]'
 */
export function scrubSecrets<T>(value: T): T {
  return sortedValues.length === 0 ? value : (rewrite(value, BY_VALUE, 0, []) as T)
}

const BY_VALUE: Rewrite = {
  leaf: (v) => (typeof v === 'string' ? scrubSecretValues(v) : v),
  enter: (v) => {
    const proto: unknown = Object.getPrototypeOf(v)
    return v instanceof Error || Array.isArray(v) || proto === Object.prototype || proto === null
  },
  field: (_name, v, next) => next(v),
}

const scrubbedStreams = new WeakSet<object>()

/**
 * Makes `stream` replace every registered secret value by `[REDACTED]` in what is written
 * to it from now on, text or bytes; a second call on the same stream changes nothing. A value
 * split across two writes is not caught: `console.log` and loggers write whole lines.
 * @example scrubWrites(process.stdout)
 */
export function scrubWrites(stream: NodeJS.WritableStream): void {
  if (scrubbedStreams.has(stream)) return
  scrubbedStreams.add(stream)
  const write = stream.write as (this: NodeJS.WritableStream, chunk: unknown, ...rest: unknown[]) => boolean
  stream.write = function (this: NodeJS.WritableStream, chunk: unknown, ...rest: unknown[]): boolean {
    return write.call(this, scrubChunk(chunk, rest[0]), ...rest)
  } as NodeJS.WritableStream['write']
}

/** Scrubs what this process writes to its stdout and stderr (see {@link scrubWrites}). */
export function scrubProcessOutput(): void {
  scrubWrites(process.stdout)
  scrubWrites(process.stderr)
}

function scrubChunk(chunk: unknown, encoding: unknown): unknown {
  if (sortedValues.length === 0) return chunk
  if (typeof chunk === 'string') {
    // Text in another encoding (hex, base64) is data, not a message.
    return typeof encoding !== 'string' || /^utf-?8$/i.test(encoding) ? scrubSecretValues(chunk) : chunk
  }
  if (!(chunk instanceof Uint8Array)) return chunk
  // Bytes are searched as bytes, so that whatever surrounds a secret is kept exactly.
  let buf = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength)
  for (const v of sortedValues) {
    let at = buf.indexOf(v)
    if (at < 0) continue
    const parts: Buffer[] = []
    let from = 0
    const len = Buffer.byteLength(v)
    while (at >= 0) {
      parts.push(buf.subarray(from, at), Buffer.from(REDACTED))
      from = at + len
      at = buf.indexOf(v, from)
    }
    parts.push(buf.subarray(from))
    buf = Buffer.concat(parts)
  }
  return buf.byteLength === chunk.byteLength && buf.buffer === chunk.buffer ? chunk : buf
}
