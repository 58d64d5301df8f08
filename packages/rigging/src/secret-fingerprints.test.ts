import { randomBytes } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import { registerSecretValue } from './redaction.js'
import { isSecretFingerprints, scrubFingerprinted, secretFingerprints } from './secret-fingerprints.js'

const key = `sk-${randomBytes(10).toString('hex')}`
const inner = `in-${randomBytes(6).toString('hex')}`
const outer = `out-${inner}-${randomBytes(4).toString('hex')}`
registerSecretValue(key)
registerSecretValue(`q"${inner}`)
registerSecretValue(outer)
registerSecretValue(inner)

describe('secret fingerprints', () => {
  it('hold no value, and survive JSON as a file', () => {
    const prints = JSON.parse(JSON.stringify(secretFingerprints())) as unknown
    expect(isSecretFingerprints(prints)).toBe(true)
    expect(JSON.stringify(prints)).not.toContain(key)
    expect(JSON.stringify(prints)).not.toContain(inner)
    expect(isSecretFingerprints({ salt: 'x', values: [{ length: 1, roll: 1, sha256: 'nope' }] })).toBe(false)
  })

  it('find every value another process registered, at either end, longest first; leave other text alone', () => {
    const prints = [secretFingerprints()]
    const text = `${key} middle ${outer} and ${inner}, json: ${JSON.stringify({ k: `q"${inner}` })} end ${key}`
    expect(scrubFingerprinted(text, prints)).toBe(
      '[REDACTED] middle [REDACTED] and [REDACTED], json: {"k":"[REDACTED]"} end [REDACTED]',
    )
    expect(scrubFingerprinted('nothing secret here', prints)).toBe('nothing secret here')
    expect(scrubFingerprinted(key.slice(0, -1), prints)).toBe(key.slice(0, -1))
    expect(scrubFingerprinted(`x${key}`, [])).toBe(`x${key}`)
  })

  it('take one pass per length over a long text', () => {
    const prints = [secretFingerprints()]
    const long = `${'a'.repeat(500_000)}${key}`
    expect(scrubFingerprinted(long, prints).endsWith('a[REDACTED]')).toBe(true)
  })
})
