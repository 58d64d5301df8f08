import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Writable } from 'node:stream'
import { describe, expect, test } from 'vitest'
import {
  REDACTED,
  isSecretKey,
  redactSecrets,
  registerSecretValue,
  scrubSecretValues,
  scrubSecrets,
  scrubWrites,
} from './redaction.js'
import { writeSecretFile } from './secret-file.js'
import { specSource } from './secret-sources.js'
import { SecretStore } from './secrets.js'

describe('isSecretKey', () => {
  test.each([
    'password',
    'db_password',
    'PASSWD',
    'pwd',
    'secret',
    'clientSecret',
    'secrets',
    'apiKey',
    'api_key',
    'X-API-KEY',
    'token',
    'hf_token',
    'accessToken',
    'refresh-token',
    'authorization',
    'Proxy-Authorization',
    'auth',
    'cookie',
    'set-cookie',
    'credentials',
    'privateKey',
    'aws_secret_access_key',
    'signingKey',
  ])('%s is secret', (key) => expect(isSecretKey(key)).toBe(true))

  test.each([
    'user',
    'key',
    'tokens',
    'numTokens',
    'max_tokens',
    'tokenizer',
    'eos_token',
    'pad_token',
    'bos_token',
    'author',
    'secretsDir',
    'passwordPolicyUrl',
    'keyId',
    'accessKeyId',
    'path',
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

describe('scrubSecrets', () => {
  // Values only a SecretStore of this test knows, read the two usual ways.
  const dir = mkdtempSync(join(tmpdir(), 'rigging-scrub-'))
  writeSecretFile(join(dir, 'hf_token'), 'hf_scrub_file_0123456789')
  const store = new SecretStore({
    sources: [
      specSource(
        { api_key: 'env:SCRUB_TEST_KEY', hf_token: `file:${join(dir, 'hf_token')}` },
        { SCRUB_TEST_KEY: 'sk-scrub-env-abcdef' },
      ),
    ],
  })

  test('values handed out by SecretStore are scrubbed from nested objects and errors: message, stack, cause', () => {
    const key = store.get('api_key')
    const token = store.get('hf_token')
    const cause = new Error(`server rejected ${token}`)
    const err = Object.assign(new TypeError(`login with ${key} failed`, { cause }), {
      request: { headers: [`Bearer ${token}`] },
    })
    const input = { step: 'login', attempts: [{ note: `tried ${key}` }, 3], err, ok: { untouched: true } }
    const out = scrubSecrets(input)
    const text = JSON.stringify(out) + String(out.err.stack) + String((out.err.cause as Error).stack)
    expect(text).not.toContain(key)
    expect(text).not.toContain(token)
    expect(out.attempts[0]).toEqual({ note: `tried ${REDACTED}` })
    expect(out.attempts[1]).toBe(3)
    expect(out.ok).toBe(input.ok) // untouched branches are shared
    // An error stays an error of its class, with its message, stack and cause scrubbed.
    expect(out.err).toBeInstanceOf(TypeError)
    expect(out.err.name).toBe('TypeError')
    expect(out.err.message).toBe(`login with ${REDACTED} failed`)
    expect(out.err.stack).toMatch(/^TypeError: login with \[REDACTED\] failed\n\s+at /)
    expect(out.err.cause).toBeInstanceOf(Error)
    expect((out.err.cause as Error).message).toBe(`server rejected ${REDACTED}`)
    expect((out.err as unknown as { request: { headers: string[] } }).request.headers).toEqual([`Bearer ${REDACTED}`])
    // The input is never modified.
    expect(err.message).toBe(`login with ${key} failed`)
    expect(input.attempts[0]).toEqual({ note: `tried ${key}` })
  })

  test('strings, clean values and cycles', () => {
    const key = store.get('api_key')
    expect(scrubSecrets(`a ${key} b`)).toBe(`a ${REDACTED} b`)
    const clean = { a: [1, 'two'], e: new Error('nothing secret') }
    expect(scrubSecrets(clean)).toBe(clean)
    const loop: Record<string, unknown> = { note: key }
    loop.self = loop
    const out = scrubSecrets(loop)
    expect(out.note).toBe(REDACTED)
    expect(out.self).toBe('[Circular]')
  })
})

describe('scrubWrites', () => {
  test('a stream no longer writes a registered value, as text or bytes', async () => {
    const key = new SecretStore({ sources: [specSource({ k: 'literal:sk-stream-0123456789' })] }).get('k')
    const chunks: string[] = []
    const sink = new Writable({ write: (c: Buffer, _e, cb) => (chunks.push(c.toString()), cb()) })
    scrubWrites(sink)
    scrubWrites(sink) // a second call changes nothing
    sink.write(`text ${key}\n`)
    sink.write(Buffer.from(`bytes ${key}\n`))
    await new Promise<void>((r) => sink.end(r))
    expect(chunks.join('')).toBe(`text ${REDACTED}\nbytes ${REDACTED}\n`)
  })
})
