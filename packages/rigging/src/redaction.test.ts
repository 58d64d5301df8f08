import { describe, expect, test } from 'vitest'
import { REDACTED, isSecretKey, redactSecrets, registerSecretValue, scrubSecretValues } from './redaction.js'

describe('isSecretKey', () => {
  test.each([
    'password', 'db_password', 'PASSWD', 'pwd', 'secret', 'clientSecret', 'secrets', 'apiKey', 'api_key', 'X-API-KEY',
    'token', 'hf_token', 'accessToken', 'refresh-token', 'authorization', 'Proxy-Authorization', 'auth', 'cookie',
    'set-cookie', 'credentials', 'privateKey', 'aws_secret_access_key', 'signingKey',
  ])('%s is secret', (key) => expect(isSecretKey(key)).toBe(true))

  test.each([
    'user', 'key', 'tokens', 'numTokens', 'max_tokens', 'tokenizer', 'eos_token', 'pad_token', 'bos_token', 'author',
    'secretsDir', 'passwordPolicyUrl', 'keyId', 'accessKeyId', 'path',
  ])('%s is not secret', (key) => expect(isSecretKey(key)).toBe(false))
})

describe('redactSecrets', () => {
  test('copies only what it changes and never mutates its input', () => {
    const clean = { a: 1, b: { c: [1, 2] } }
    expect(redactSecrets(clean)).toBe(clean)
    const input = { keep: { x: 1 }, deep: { list: [{ token: 't' }, 'plain'] } }
    const out = redactSecrets(input)
    expect(out).toEqual({ keep: { x: 1 }, deep: { list: [{ token: REDACTED }, 'plain'] } })
    expect(out.keep).toBe(input.keep) // untouched branches are shared
    expect(input.deep.list[0]).toEqual({ token: 't' })
  })

  test('null and undefined secret fields stay as they are (nothing to hide)', () => {
    expect(redactSecrets({ password: null, token: undefined })).toEqual({ password: null, token: undefined })
  })

  test('leaves values that serialize themselves alone', () => {
    const d = new Date(0)
    const m = new Map([['password', 'x']])
    const out = redactSecrets({ d, m, buf: Buffer.from('ab') })
    expect(out.d).toBe(d)
    expect(out.m).toBe(m) // JSON.stringify writes a Map as {}: nothing of it reaches a log
  })
})

describe('scrubSecretValues', () => {
  test('replaces every registered value, longest first', () => {
    registerSecretValue('abcd1234')
    registerSecretValue('abcd1234-extended')
    expect(scrubSecretValues('x abcd1234-extended y abcd1234 z')).toBe(`x ${REDACTED} y ${REDACTED} z`)
  })

  test('values under 4 characters are not scrubbed by value', () => {
    registerSecretValue('abc')
    expect(scrubSecretValues('abc')).toBe('abc')
  })
})
