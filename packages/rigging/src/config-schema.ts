/**
 * @module Reading the shape of a zod (v4) schema: what config loading needs to map
 * environment variables onto fields and to reject keys a schema does not name.
 */
import type { z } from 'zod'

type Def = { type: string; [k: string]: unknown }
const def = (s: z.ZodType): Def => (s as unknown as { _zod: { def: Def } })._zod.def

/** The schema under defaults, optionals, nullables, pipes and lazies. */
export function unwrapSchema(schema: z.ZodType): z.ZodType {
  let s = schema
  for (let i = 0; i < 64; i++) {
    const d = def(s)
    switch (d.type) {
      case 'default':
      case 'prefault':
      case 'optional':
      case 'nullable':
      case 'nonoptional':
      case 'catch':
      case 'readonly':
        s = d.innerType as z.ZodType
        break
      case 'pipe':
        s = d.in as z.ZodType
        break
      case 'lazy':
        s = (d.getter as () => z.ZodType)()
        break
      default:
        return s
    }
  }
  return s
}

/** The base type name: `object`, `string`, `number`, `union`, `record`, ... */
export function schemaType(schema: z.ZodType): string {
  return def(unwrapSchema(schema)).type
}

type ObjectDef = { shape: Record<string, z.ZodType>; catchall?: z.ZodType }

/** The object shapes a value of this schema may take (one, or one per union option). */
export function objectShapes(schema: z.ZodType): ObjectDef[] {
  const base = unwrapSchema(schema)
  const d = def(base)
  if (d.type === 'object')
    return [{ shape: d.shape as Record<string, z.ZodType>, catchall: d.catchall as z.ZodType | undefined }]
  if (d.type === 'union') return (d.options as z.ZodType[]).flatMap(objectShapes)
  if (d.type === 'intersection') return [...objectShapes(d.left as z.ZodType), ...objectShapes(d.right as z.ZodType)]
  return []
}

/** The schema of field `key` inside `schema`, or `undefined` when the schema names no such field. */
export function fieldSchema(schema: z.ZodType, key: string): z.ZodType | undefined {
  const d = def(unwrapSchema(schema))
  if (d.type === 'record') return d.valueType as z.ZodType
  if (d.type === 'array' && /^\d+$/.test(key)) return d.element as z.ZodType
  for (const { shape, catchall } of objectShapes(schema)) {
    if (Object.hasOwn(shape, key)) return shape[key]
    if (catchall !== undefined && def(catchall).type !== 'never') return catchall
  }
  return undefined
}

/** A key rejected because no schema field names it. */
export type UnknownKey = { path: readonly (string | number)[]; key: string; known: readonly string[] }

const isPlainObject = (v: unknown): v is Record<string, unknown> =>
  v !== null && typeof v === 'object' && !Array.isArray(v)

/**
 * Every key of `value` that `schema` does not name. A `z.object` is treated as strict here
 * (zod itself would silently drop the key); only a catchall (`z.looseObject`) admits more.
 * Unions are left to zod, which knows which option matched.
 */
export function findUnknownKeys(
  schema: z.ZodType,
  value: unknown,
  path: (string | number)[] = [],
  out: UnknownKey[] = [],
): UnknownKey[] {
  const base = unwrapSchema(schema)
  const d = def(base)
  if (d.type === 'object' && isPlainObject(value)) {
    const shape = d.shape as Record<string, z.ZodType>
    const catchall = d.catchall as z.ZodType | undefined
    for (const [key, v] of Object.entries(value)) {
      const field = shape[key]
      if (Object.hasOwn(shape, key) && field !== undefined) findUnknownKeys(field, v, [...path, key], out)
      else if (catchall === undefined || def(catchall).type === 'never')
        out.push({ path, key, known: Object.keys(shape) })
    }
  } else if (d.type === 'record' && isPlainObject(value)) {
    for (const [key, v] of Object.entries(value)) findUnknownKeys(d.valueType as z.ZodType, v, [...path, key], out)
  } else if (d.type === 'array' && Array.isArray(value)) {
    value.forEach((v, i) => findUnknownKeys(d.element as z.ZodType, v, [...path, i], out))
  }
  return out
}
