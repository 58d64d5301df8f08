/**
 * @module Environment overrides for config: `MARIN_TRAINER__MAX_STEPS=100` sets
 * `trainer.maxSteps`.
 *
 * After the prefix, `__` separates nesting levels, and each level matches a schema field
 * ignoring case and `_` (so `MAX_STEPS` finds `maxSteps` or `max_steps`). Keys of a
 * `z.record` are taken lower-cased. Values are text for string fields and parsed as YAML
 * otherwise (`true`, `12`, `[a, b]`, `{x: 1}`). A variable whose first level names no
 * top-level field is not for this schema (`MARIN_PREFIX` serves storage) and is ignored;
 * once the first level matches, every deeper level must match too.
 */
import { createRequire } from 'node:module'
import type * as Yaml from 'yaml'
import type { z } from 'zod'
import { fieldSchema, objectShapes, schemaType, unwrapSchema } from './config-schema.js'
import { RiggingError } from './errors.js'

/** One environment variable that applies to the schema. */
export type EnvOverride = { readonly variable: string; readonly path: readonly string[]; readonly value: unknown }

const norm = (s: string) => s.toLowerCase().replace(/[_-]/g, '')

function matchKey(schema: z.ZodType, segment: string): string | undefined {
  if (schemaType(schema) === 'record') return segment.toLowerCase()
  const keys = objectShapes(schema).flatMap(({ shape }) => Object.keys(shape))
  return keys.find((k) => k === segment) ?? keys.find((k) => norm(k) === norm(segment))
}

function isTextField(schema: z.ZodType): boolean {
  const base = unwrapSchema(schema)
  const d = (
    base as unknown as { _zod: { def: { type: string; values?: unknown[]; entries?: Record<string, unknown> } } }
  )._zod.def
  if (d.type === 'string' || d.type === 'template_literal') return true
  if (d.type === 'enum') return Object.values(d.entries ?? {}).every((v) => typeof v === 'string')
  if (d.type === 'literal') return (d.values ?? []).every((v) => typeof v === 'string')
  return false
}

function parseValue(schema: z.ZodType, raw: string): unknown {
  if (isTextField(schema)) return raw
  // yaml (some 70 modules) is required for the first non-text variable, not when rigging is imported
  const { parse } = createRequire(import.meta.url)('yaml') as typeof Yaml
  try {
    return parse(raw)
  } catch {
    return raw // zod then says what type was expected, naming the variable
  }
}

/**
 * The variables of `env` that start with `prefix` and name a field of `schema`.
 * An unknown deeper level is a CONFIG_INVALID error naming the variable and the known fields.
 */
export function envOverrides(schema: z.ZodType, env: NodeJS.ProcessEnv, prefix: string): EnvOverride[] {
  const out: EnvOverride[] = []
  for (const variable of Object.keys(env).sort()) {
    const raw = env[variable]
    if (!variable.startsWith(prefix) || raw === undefined) continue
    const segments = variable.slice(prefix.length).split('__')
    if (segments.some((s) => s === '')) {
      if (matchKey(schema, segments[0] ?? '') === undefined) continue
      throw new RiggingError(
        'CONFIG_INVALID',
        `${variable}: empty level in the name; separate nested fields ` +
          `with exactly "__", as in ${prefix}TRAINER__MAX_STEPS`,
      )
    }
    let s: z.ZodType = schema
    const path: string[] = []
    let ignored = false
    for (const segment of segments) {
      const key = matchKey(s, segment)
      const next = key === undefined ? undefined : fieldSchema(s, key)
      if (key === undefined || next === undefined) {
        if (path.length === 0) {
          ignored = true
          break
        }
        const known = objectShapes(s).flatMap(({ shape }) => Object.keys(shape))
        throw new RiggingError(
          'CONFIG_INVALID',
          `${variable}: config field ${[...path, segment].join('.')} does ` +
            `not exist; fields under ${path.join('.')} are ` +
            `${known.join(', ') || '(none)'}`,
        )
      }
      path.push(key)
      s = next
    }
    if (!ignored) out.push({ variable, path, value: parseValue(s, raw) })
  }
  return out
}
