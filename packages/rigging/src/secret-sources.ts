/**
 * @module Where secrets come from: specs (`env:NAME`, `file:PATH`, literal values), the
 * environment and a directory of secret files. A source answers "absent" or a value, and
 * throws SECRET_UNREADABLE when the secret exists but cannot be read.
 */
import { readFileSync } from 'node:fs'
import { homedir } from 'node:os'
import { join, resolve } from 'node:path'
import { RiggingError } from './errors.js'

/** One place a secret may live. Sources are tried in order by `SecretStore`. */
export type SecretSource = {
  /**
   * The value of secret `name`, or `undefined` when this source does not have it (the
   * store then tries the next source). Throws SECRET_UNREADABLE when the secret is
   * there but cannot be read: that must stop the search, not silently fall through.
   */
  lookup(name: string): string | undefined
  /** What this source tries for `name`, e.g. `env:OPENAI_API_KEY`; never a value. */
  describe(name: string): string
}

/** A parsed secret spec. */
export type SecretSpec =
  | { readonly kind: 'env'; readonly name: string }
  | { readonly kind: 'file'; readonly path: string }
  | { readonly kind: 'literal'; readonly value: string }

/**
 * Parses `env:NAME`, `file:PATH` (`~/` is the home directory) or a literal value.
 * `literal:VALUE` spells a literal that would otherwise look like a spec.
 * @example parseSecretSpec('env:OPENAI_API_KEY') // { kind: 'env', name: 'OPENAI_API_KEY' }
 */
export function parseSecretSpec(spec: string, what = 'secret spec'): SecretSpec {
  if (spec.startsWith('env:')) {
    const name = spec.slice(4)
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) {
      throw new RiggingError(
        'SECRET_INVALID_SPEC',
        `${what}: "env:" must be followed by a variable name such as env:OPENAI_API_KEY, got "env:${name}"`,
      )
    }
    return { kind: 'env', name }
  }
  if (spec.startsWith('file:')) {
    const path = spec.slice(5)
    if (path === '')
      throw new RiggingError(
        'SECRET_INVALID_SPEC',
        `${what}: "file:" must be followed by a path such as file:/run/secrets/token`,
      )
    return { kind: 'file', path: expandHome(path) }
  }
  if (spec.startsWith('literal:')) return { kind: 'literal', value: spec.slice(8) }
  return { kind: 'literal', value: spec }
}

function expandHome(path: string): string {
  return path === '~' || path.startsWith('~/') ? join(homedir(), path.slice(1)) : resolve(path)
}

/**
 * Reads one secret file. A missing file (or a dangling link) is absent; anything else that
 * stops the read (a directory, no permission, a link loop) is SECRET_UNREADABLE.
 * Surrounding whitespace, such as the newline editors add, is trimmed; an empty file is absent.
 */
export function readSecretFile(path: string, secret: string): string | undefined {
  let text: string
  try {
    text = readFileSync(path, 'utf8')
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code
    if (code === 'ENOENT' || code === 'ENOTDIR') return undefined
    throw new RiggingError(
      'SECRET_UNREADABLE',
      `secret "${secret}": cannot read file:${path} (${code ?? 'error'}` +
        `); make it a regular file this user can read, or remove it`,
      { cause: err },
    )
  }
  const value = text.trim()
  return value === '' ? undefined : value
}

function readEnv(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const value = env[name]
  // An empty variable is how shells spell "unset" often enough that it must not win.
  return value === undefined || value === '' ? undefined : value
}

/** Resolves one spec now: the value, or `undefined` when the variable or file is absent. */
export function resolveSecretSpec(
  spec: SecretSpec,
  secret: string,
  env: NodeJS.ProcessEnv = process.env,
): string | undefined {
  switch (spec.kind) {
    case 'env':
      return readEnv(env, spec.name)
    case 'file':
      return readSecretFile(spec.path, secret)
    case 'literal':
      return spec.value === '' ? undefined : spec.value
  }
}

/** What a spec tries, for messages: `env:NAME`, `file:PATH` or `literal value` (never the value). */
export function describeSpec(spec: SecretSpec): string {
  return spec.kind === 'env' ? `env:${spec.name}` : spec.kind === 'file' ? `file:${spec.path}` : 'literal value'
}

/**
 * Secrets named by specs, typically from config: `{ openai_api_key: 'env:OPENAI_KEY' }`.
 * Specs are parsed up front, so a bad one fails when the source is built.
 */
export function specSource(
  specs: Readonly<Record<string, string>>,
  env: NodeJS.ProcessEnv = process.env,
): SecretSource {
  const parsed = new Map(Object.entries(specs).map(([name, spec]) => [name, parseSecretSpec(spec, `secret "${name}"`)]))
  return {
    lookup: (name) => {
      const spec = parsed.get(name)
      return spec === undefined ? undefined : resolveSecretSpec(spec, name, env)
    },
    describe: (name) => {
      const spec = parsed.get(name)
      return spec === undefined ? `spec (none for "${name}")` : `spec ${describeSpec(spec)}`
    },
  }
}

/** The environment variable for a secret name: `openai_api_key` → `OPENAI_API_KEY` (plus a prefix). */
export function secretEnvName(name: string, prefix = ''): string {
  return prefix + name.toUpperCase().replace(/[^A-Z0-9_]/g, '_')
}

/**
 * Secrets in environment variables: `openai_api_key` is read from `OPENAI_API_KEY`.
 * @default prefix ''
 */
export function envSource(opts: { prefix?: string; env?: NodeJS.ProcessEnv } = {}): SecretSource {
  const { prefix = '', env = process.env } = opts
  return {
    lookup: (name) => readEnv(env, secretEnvName(name, prefix)),
    describe: (name) => `env:${secretEnvName(name, prefix)}`,
  }
}

/** Secrets as files in a directory, one file per secret named after it (as in `/run/secrets`). */
export function dirSource(dir: string): SecretSource {
  const root = expandHome(dir)
  return {
    lookup: (name) => readSecretFile(join(root, name), name),
    describe: (name) => `file:${join(root, name)}`,
  }
}
