/**
 * @module `SecretStore`: look a secret up by name through a chain of sources.
 *
 * The first source that has the secret wins; an absent secret falls through to the next
 * source; an unreadable one raises at once (a broken secret file must not be papered over
 * by a stale variable further down the chain). Every value handed out is registered for
 * log scrubbing, so it never appears in log output.
 */
import { homedir } from 'node:os'
import { join } from 'node:path'
import { RiggingError } from './errors.js'
import { registerSecretValue } from './redaction.js'
import { describeSpec, dirSource, envSource, parseSecretSpec, resolveSecretSpec, specSource } from './secret-sources.js'
import type { SecretSource } from './secret-sources.js'

/** A secret no source had. Names the secret and what was tried; never holds a value. */
export class SecretNotFoundError extends RiggingError {
  override name = 'SecretNotFoundError'
  constructor(
    readonly secret: string,
    readonly tried: readonly string[],
  ) {
    super(
      'SECRET_NOT_FOUND',
      `secret "${secret}" not found; tried ${tried.length === 0 ? 'no sources' : tried.join(', ')}. ` +
        'Set one of these (an environment variable, or a file written with writeSecretFile)',
    )
  }
}

const SECRET_NAME = /^[A-Za-z0-9_][A-Za-z0-9_.-]*$/

export type SecretStoreOptions = {
  /** Named specs, e.g. from config: `{ openai_api_key: 'env:OPENAI_KEY' }`; tried first. */
  specs?: Readonly<Record<string, string>>
  /**
   * The chain after the specs.
   * @default [envSource(), dirSource(defaultSecretsDir())]
   */
  sources?: readonly SecretSource[]
}

/**
 * The directory the default chain reads secret files from: `$MARIN_SECRETS_DIR` (empty counts
 * as unset, as for the prefix), else `~/.marin/secrets`.
 */
export function defaultSecretsDir(env: NodeJS.ProcessEnv = process.env): string {
  return env.MARIN_SECRETS_DIR || join(homedir(), '.marin', 'secrets')
}

/**
 * Secrets by name, through a chain of sources.
 * @example
 * const store = new SecretStore({ specs: { hf_token: 'file:~/.cache/huggingface/token' } })
 * const key = store.get('openai_api_key') // OPENAI_API_KEY, else ~/.marin/secrets/openai_api_key
 */
export class SecretStore {
  readonly sources: readonly SecretSource[]

  constructor(opts: SecretStoreOptions = {}) {
    const chain = opts.sources ?? [envSource(), dirSource(defaultSecretsDir())]
    this.sources = opts.specs === undefined ? chain : [specSource(opts.specs), ...chain]
  }

  /** The value of `name`, or SecretNotFoundError listing every source tried. */
  get(name: string): string {
    const value = this.tryGet(name)
    if (value === undefined)
      throw new SecretNotFoundError(
        name,
        this.sources.map((s) => s.describe(name)),
      )
    return value
  }

  /** The value of `name`, or `undefined` when no source has it. Unreadable secrets still throw. */
  tryGet(name: string): string | undefined {
    if (!SECRET_NAME.test(name)) {
      throw new RiggingError(
        'SECRET_INVALID_SPEC',
        `secret name ${JSON.stringify(name)} is not valid; use letters, ` +
          `digits, "_", "-" and "." such as openai_api_key`,
      )
    }
    for (const source of this.sources) {
      const value = source.lookup(name)
      if (value !== undefined) {
        registerSecretValue(value)
        return value
      }
    }
    return undefined
  }

  /**
   * Resolves one spec directly (`env:NAME`, `file:PATH` or a literal), e.g. a config field
   * that holds a spec. The value is registered for log scrubbing like any other.
   * @example store.resolve(cfg.auth.tokenSpec, 'ducky_token')
   */
  resolve(spec: string, name = 'secret'): string {
    const parsed = parseSecretSpec(spec, `secret "${name}"`)
    const value = resolveSecretSpec(parsed, name)
    if (value === undefined) throw new SecretNotFoundError(name, [describeSpec(parsed)])
    registerSecretValue(value)
    return value
  }

  /** Whether some source has `name`. */
  has(name: string): boolean {
    return this.tryGet(name) !== undefined
  }
}
