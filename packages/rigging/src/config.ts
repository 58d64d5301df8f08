/**
 * @module Loading config: YAML/JSON files merged in order, then `MARIN_…` environment
 * overrides, then explicit overrides, validated by one zod schema that holds the defaults.
 * Every problem is reported at once, each with where the value came from (file:line:col or
 * the variable), the field path and what was expected. Unknown keys are rejected.
 */
import { resolve } from 'node:path'
import type { z } from 'zod'
import { envOverrides } from './config-env.js'
import { readConfigFile } from './config-file.js'
import type { ConfigFile } from './config-file.js'
import { findUnknownKeys } from './config-schema.js'
import { RiggingError } from './errors.js'

/** One thing wrong with a loaded config. */
export type ConfigIssue = {
  /** Dotted field path, `(root)` for the top level. */
  readonly field: string
  /** What was expected or what is wrong. */
  readonly message: string
  /** Where the offending value came from: `file.yaml:3:5`, `env MARIN_X`, `overrides`; absent when nothing set it. */
  readonly source?: string
}

/** A config that failed validation: CONFIG_INVALID, with every issue. */
export class ConfigError extends RiggingError {
  override name = 'ConfigError'
  constructor(readonly issues: readonly ConfigIssue[]) {
    super(
      'CONFIG_INVALID',
      `invalid config (${issues.length} problem${issues.length === 1 ? '' : 's'}):\n` +
        issues.map((i) => `  ${i.source === undefined ? '' : `${i.source}: `}${i.field}: ${i.message}`).join('\n') +
        '\nfix these fields and run again',
    )
  }
}

export type LoadConfigOptions = {
  /** Files merged in order, later ones winning; `.json` is JSON, anything else YAML. @default [] */
  files?: readonly string[]
  /** Where overrides are read; `false` for none. @default process.env */
  env?: NodeJS.ProcessEnv | false
  /** Prefix of override variables. @default 'MARIN_' */
  envPrefix?: string
  /** Applied last, e.g. from command-line flags; nested objects as in a file. */
  overrides?: Readonly<Record<string, unknown>>
}

type Path = readonly (string | number)[]
type Origin = { label: string; file?: ConfigFile }

const isPlainObject = (v: unknown): v is Record<string, unknown> =>
  v !== null && typeof v === 'object' && !Array.isArray(v)
const key = (p: Path) => JSON.stringify(p)

/**
 * Loads and validates config.
 * @example
 * const Config = z.strictObject({ trainer: z.strictObject({ maxSteps: z.int().positive().default(1000) }) })
 * const cfg = loadConfig(Config, { files: ['train.yaml'] }) // MARIN_TRAINER__MAX_STEPS=10 overrides
 */
export function loadConfig<S extends z.ZodType>(schema: S, opts: LoadConfigOptions = {}): z.output<S> {
  const { files = [], env = process.env, envPrefix = 'MARIN_', overrides } = opts
  const origins = new Map<string, Origin>()
  let data: Record<string, unknown> = {}

  const apply = (value: unknown, path: Path, origin: Origin) => {
    origins.set(key(path), origin)
    if (isPlainObject(value)) for (const [k, v] of Object.entries(value)) apply(v, [...path, k], origin)
  }

  for (const f of files) {
    const file = readConfigFile(resolve(f))
    data = merge(data, file.data)
    apply(file.data, [], { label: file.path, file })
  }
  if (env !== false) {
    for (const o of envOverrides(schema, env, envPrefix)) {
      data = setIn(data, o.path, o.value)
      apply(o.value, o.path, { label: `env ${o.variable}` })
    }
  }
  if (overrides !== undefined) {
    data = merge(data, overrides)
    apply(overrides, [], { label: 'overrides' })
  }

  const issues: ConfigIssue[] = []
  const reported = new Set<string>()
  for (const u of findUnknownKeys(schema, data)) {
    const at = [...u.path, u.key]
    reported.add(key(at))
    const known = u.known.length === 0 ? 'it takes no fields' : `known fields: ${u.known.join(', ')}`
    issues.push(issue(at, `unknown key "${u.key}"; ${known}`, origins))
  }
  const result = schema.safeParse(data)
  if (result.success && issues.length === 0) return result.data as z.output<S>
  if (!result.success) {
    for (const zi of result.error.issues) {
      const path = zi.path.filter((p): p is string | number => typeof p !== 'symbol')
      if (zi.code === 'unrecognized_keys') {
        for (const k of zi.keys) {
          if (!reported.has(key([...path, k]))) issues.push(issue([...path, k], `unknown key "${k}"`, origins))
        }
        continue
      }
      issues.push(issue(path, zi.message.replace(/^Invalid input: /, ''), origins))
    }
  }
  throw new ConfigError(issues)
}

function issue(path: Path, text: string, origins: Map<string, Origin>): ConfigIssue {
  const message = /received undefined$/.test(text) ? `${text} (a required field is missing)` : text
  const field = path.length === 0 ? '(root)' : path.join('.')
  // The nearest enclosing path some source set: a missing field points at its parent.
  for (let n = path.length; n >= 0; n--) {
    const origin = origins.get(key(path.slice(0, n)))
    if (origin === undefined) continue
    if (origin.file === undefined) return { field, message, source: origin.label }
    const at = origin.file.locate(path)
    return { field, message, source: at === undefined ? origin.label : `${origin.label}:${at.line}:${at.col}` }
  }
  return { field, message }
}

/** Deep merge of plain objects; arrays and scalars from `b` replace those of `a`. */
function merge(a: Record<string, unknown>, b: Readonly<Record<string, unknown>>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...a }
  for (const [k, v] of Object.entries(b)) {
    const prev = out[k]
    out[k] = isPlainObject(prev) && isPlainObject(v) ? merge(prev, v) : v
  }
  return out
}

function setIn(obj: Record<string, unknown>, path: readonly string[], value: unknown): Record<string, unknown> {
  const [head, ...rest] = path
  if (head === undefined) return obj
  const child = obj[head]
  return { ...obj, [head]: rest.length === 0 ? value : setIn(isPlainObject(child) ? child : {}, rest, value) }
}
