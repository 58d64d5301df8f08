import { chmodSync, mkdirSync, mkdtempSync, statSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { beforeEach, describe, expect, test } from 'vitest'
import { RiggingError } from './errors.js'
import { configureLogging, logger } from './logger.js'
import { dirSource, envSource, parseSecretSpec, specSource } from './secret-sources.js'
import { writeSecretFile } from './secret-file.js'
import { SecretNotFoundError, SecretStore } from './secrets.js'

let dir: string
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'rigging-secrets-'))
})

function thrown(fn: () => unknown): RiggingError {
  try {
    fn()
  } catch (err) {
    return err as RiggingError
  }
  throw new Error('expected a throw')
}

describe('specs', () => {
  test('env:, file: and literal values resolve', () => {
    writeSecretFile(join(dir, 'hf'), 'hf-file-value')
    const env = { OPENAI_KEY: 'sk-from-env' }
    const store = new SecretStore({
      specs: {
        openai_api_key: 'env:OPENAI_KEY',
        hf_token: `file:${join(dir, 'hf')}`,
        wandb: 'plain-literal',
        odd: 'literal:env:NOT_A_VAR',
      },
      sources: [],
    })
    // specSource reads process.env by default; use one bound to our env for the env: case
    const withEnv = new SecretStore({ sources: [specSource({ openai_api_key: 'env:OPENAI_KEY' }, env)] })
    expect(withEnv.get('openai_api_key')).toBe('sk-from-env')
    expect(store.get('hf_token')).toBe('hf-file-value') // trailing newline trimmed
    expect(store.get('wandb')).toBe('plain-literal')
    expect(store.get('odd')).toBe('env:NOT_A_VAR')
  })

  test('resolve() takes one spec directly', () => {
    writeSecretFile(join(dir, 'tok'), 'file-token')
    const store = new SecretStore({ sources: [] })
    expect(store.resolve(`file:${join(dir, 'tok')}`, 'ducky_token')).toBe('file-token')
    expect(store.resolve('literal-token-value')).toBe('literal-token-value')
    const err = thrown(() => store.resolve('env:SURELY_UNSET_VARIABLE_42', 'ducky_token')) as SecretNotFoundError
    expect(err.code).toBe('SECRET_NOT_FOUND')
    expect(err.message).toContain('secret "ducky_token" not found; tried env:SURELY_UNSET_VARIABLE_42')
  })

  test('a malformed spec is SECRET_INVALID_SPEC naming the secret', () => {
    const err = thrown(() => new SecretStore({ specs: { openai_api_key: 'env:1BAD' } }))
    expect(err.code).toBe('SECRET_INVALID_SPEC')
    expect(err.message).toMatch(/secret "openai_api_key": "env:" must be followed by a variable name/)
    expect(thrown(() => parseSecretSpec('file:')).code).toBe('SECRET_INVALID_SPEC')
  })

  test('a bad secret name is rejected before any file is touched', () => {
    const store = new SecretStore({ sources: [dirSource(dir)] })
    expect(thrown(() => store.get('../etc/passwd')).code).toBe('SECRET_INVALID_SPEC')
  })
})

describe('chain of sources', () => {
  test('an absent secret falls through to the next source', () => {
    mkdirSync(join(dir, 'a'))
    mkdirSync(join(dir, 'b'))
    writeSecretFile(join(dir, 'b', 'openai_api_key'), 'from-b')
    const store = new SecretStore({
      specs: { openai_api_key: 'env:UNSET_VARIABLE_FOR_TEST' },
      sources: [envSource({ env: { OPENAI_API_KEY: '' } }), dirSource(join(dir, 'a')), dirSource(join(dir, 'b'))],
    })
    expect(store.get('openai_api_key')).toBe('from-b')
    expect(store.has('openai_api_key')).toBe(true)
  })

  test('the first source that has it wins', () => {
    writeSecretFile(join(dir, 'token'), 'from-file')
    const store = new SecretStore({ sources: [envSource({ env: { TOKEN: 'from-env' } }), dirSource(dir)] })
    expect(store.get('token')).toBe('from-env')
  })

  test('envSource maps names to upper-case variables, with an optional prefix', () => {
    const store = new SecretStore({ sources: [envSource({ prefix: 'MARIN_', env: { MARIN_HF_TOKEN: 'x-123' } })] })
    expect(store.get('hf_token')).toBe('x-123')
  })

  test('SecretNotFoundError names the secret and every source tried, never a value', () => {
    writeSecretFile(join(dir, 'other'), 'unrelated-secret-value')
    const store = new SecretStore({
      specs: { other: `file:${join(dir, 'other')}` },
      sources: [envSource({ env: { OTHER: 'env-secret-value' } }), dirSource(dir)],
    })
    const err = thrown(() => store.get('openai_api_key'))
    expect(err).toBeInstanceOf(SecretNotFoundError)
    expect(err).toBeInstanceOf(RiggingError)
    expect(err.code).toBe('SECRET_NOT_FOUND')
    expect((err as SecretNotFoundError).secret).toBe('openai_api_key')
    expect((err as SecretNotFoundError).tried).toEqual([
      'spec (none for "openai_api_key")',
      'env:OPENAI_API_KEY',
      `file:${join(dir, 'openai_api_key')}`,
    ])
    expect(err.message).toContain(
      'secret "openai_api_key" not found; tried spec (none for "openai_api_key"), env:OPENAI_API_KEY, file:',
    )
    expect(err.message).not.toMatch(/secret-value/)
    expect(store.tryGet('openai_api_key')).toBeUndefined()
  })
})

describe('unreadable secrets raise instead of falling through', () => {
  test('a directory where the secret file should be', () => {
    // Tests run as root, which reads mode-000 files anyway; a directory fails the read for everyone (EISDIR).
    mkdirSync(join(dir, 'openai_api_key'))
    const store = new SecretStore({
      sources: [dirSource(dir), envSource({ env: { OPENAI_API_KEY: 'would-hide-the-problem' } })],
    })
    const err = thrown(() => store.get('openai_api_key'))
    expect(err.code).toBe('SECRET_UNREADABLE')
    expect(err.message).toContain(`secret "openai_api_key": cannot read file:${join(dir, 'openai_api_key')} (EISDIR)`)
    expect(err.message).toContain('make it a regular file this user can read')
  })

  test('a symlink loop (ELOOP) through a file: spec', () => {
    symlinkSync(join(dir, 'loop-b'), join(dir, 'loop-a'))
    symlinkSync(join(dir, 'loop-a'), join(dir, 'loop-b'))
    const store = new SecretStore({ specs: { t: `file:${join(dir, 'loop-a')}` }, sources: [] })
    const err = thrown(() => store.get('t'))
    expect(err.code).toBe('SECRET_UNREADABLE')
    expect(err.message).toContain('(ELOOP)')
  })

  test('a mode-000 file, read by an unprivileged user', () => {
    // Root ignores file modes, so as root the read runs with the effective uid of `nobody`
    // (the real uid stays root, which lets us switch back afterwards). Tests run in forked
    // processes, where seteuid is available; the switch lasts only for this read.
    chmodSync(dir, 0o755)
    writeSecretFile(join(dir, 'locked'), 'locked-value')
    chmodSync(join(dir, 'locked'), 0o000)
    const store = new SecretStore({
      sources: [dirSource(dir), envSource({ env: { LOCKED: 'would-hide-the-problem' } })],
    })
    const asRoot = process.getuid?.() === 0
    if (asRoot) {
      process.setegid!(65534)
      process.seteuid!(65534)
    }
    let err: RiggingError
    try {
      err = thrown(() => store.get('locked'))
    } finally {
      if (asRoot) {
        process.seteuid!(0)
        process.setegid!(0)
      }
    }
    expect(process.geteuid?.()).toBe(process.getuid?.())
    expect(err.code).toBe('SECRET_UNREADABLE')
    expect(err.message).toContain(`cannot read file:${join(dir, 'locked')} (EACCES)`)
    expect(err.message).not.toContain('locked-value')
  })
})

describe('writeSecretFile', () => {
  test('creates the file 0600 and its directory 0700', () => {
    const path = join(dir, 'nested', 'secrets', 'openai_api_key')
    writeSecretFile(path, 'sk-new')
    expect(statSync(path).mode & 0o777).toBe(0o600)
    expect(statSync(join(dir, 'nested', 'secrets')).mode & 0o777).toBe(0o700)
    expect(new SecretStore({ sources: [dirSource(join(dir, 'nested', 'secrets'))] }).get('openai_api_key')).toBe(
      'sk-new',
    )
  })

  test('replacing a world-readable file leaves a 0600 file', () => {
    const path = join(dir, 'token')
    writeFileSync(path, 'old', { mode: 0o644 })
    writeSecretFile(path, 'new-token')
    expect(statSync(path).mode & 0o777).toBe(0o600)
    expect(new SecretStore({ sources: [dirSource(dir)] }).get('token')).toBe('new-token')
  })

  test('a path under a regular file is SECRET_WRITE_FAILED', () => {
    writeFileSync(join(dir, 'plain'), 'x')
    const err = thrown(() => writeSecretFile(join(dir, 'plain', 'token'), 'v'))
    expect(err.code).toBe('SECRET_WRITE_FAILED')
    expect(err.message).toContain(join(dir, 'plain', 'token'))
  })
})

test('values handed out by the store never appear in logs', () => {
  const lines: string[] = []
  configureLogging({ destination: { write: (l: string) => void lines.push(l) }, pretty: false, level: 'info' })
  const store = new SecretStore({ sources: [envSource({ env: { SERVICE_KEY: 'svc-9f8e7d6c' } })] })
  const key = store.get('service_key')
  logger('ducky').info({ header: `Bearer ${key}` }, `connecting with ${key}`)
  const raw = lines.join('')
  expect(raw).not.toContain('svc-9f8e7d6c')
  expect(JSON.parse(lines[0]!)).toMatchObject({ header: 'Bearer [REDACTED]', msg: 'connecting with [REDACTED]' })
})
