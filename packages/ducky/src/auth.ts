/**
 * @module Bearer-token auth: the client sends `authorization: Bearer <token>` on every call; the
 * server compares SHA-256 digests of the sent and expected tokens with `timingSafeEqual`, so the
 * comparison takes the same time whatever the token and whatever its length.
 */
import { createHash, timingSafeEqual } from 'node:crypto'
import type { Metadata } from '@grpc/grpc-js'
import { RpcError } from './errors.js'

/** Anything with `get(name)`, such as rigging's `SecretStore`. */
export type SecretGetter = { get(name: string): string | Promise<string> }

/**
 * Where a bearer token comes from: the token itself, a function (read on every call, so a rotated
 * secret takes effect without a restart), or a named secret in a store.
 * @example
 * { token: { secrets: store, name: 'iris_token' } }
 */
export type TokenSource = string | (() => string | Promise<string>) | { secrets: SecretGetter; name: string }

export type ResolvedToken = { sync: string } | { load: () => Promise<string> }

/** Prepares a token source: a literal string stays synchronous (no promise per call). */
export function prepareToken(src: TokenSource): ResolvedToken {
  if (typeof src === 'string') return { sync: checkToken(src, 'token') }
  if (typeof src === 'function') return { load: async () => checkToken(await src(), 'token()') }
  return { load: async () => checkToken(await src.secrets.get(src.name), `secret ${src.name}`) }
}

function checkToken(token: unknown, what: string): string {
  if (typeof token !== 'string' || token.length === 0 || /[\r\n]/.test(token)) {
    throw new RpcError(
      'INVALID_ARGUMENT',
      `${what}: a bearer token must be a non-empty single-line string; check the secret's value`,
    )
  }
  return token
}

export function digest(token: string): Buffer {
  return createHash('sha256').update(token, 'utf8').digest()
}

/** Why a call was refused, for the log line (never the token itself). */
export type AuthRefusal = 'missing' | 'malformed' | 'wrong'

/** Checks the `authorization` metadata against the expected token's digest. */
export function checkBearer(metadata: Metadata, expected: Buffer): AuthRefusal | undefined {
  const values = metadata.get('authorization')
  const header = values[0]
  if (header === undefined) return 'missing'
  if (typeof header !== 'string' || values.length !== 1 || !header.startsWith('Bearer ')) return 'malformed'
  // Equal-length digests: timingSafeEqual neither throws nor leaks the token's length.
  return timingSafeEqual(digest(header.slice(7)), expected) ? undefined : 'wrong'
}
