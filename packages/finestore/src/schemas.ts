/** @module Metadata schemas registered per artifact kind, checked at commit. */
import type { z } from 'zod'
import { FinestoreError } from './errors.js'
import type { JsonObject } from './manifest.js'

/** The kind an artifact has unless a transaction says otherwise: the first segment of its name. */
export const defaultKind = (artifact: string): string => artifact.split('/')[0]!

/** Kind → zod schema for version metadata. Kinds without a schema accept any JSON object. */
export class SchemaRegistry {
  readonly #schemas = new Map<string, z.ZodType>()

  /** Registers (or replaces) the metadata schema of `kind`. */
  register(kind: string, schema: z.ZodType): void {
    this.#schemas.set(kind, schema)
  }

  get(kind: string): z.ZodType | undefined {
    return this.#schemas.get(kind)
  }

  /** Returns the metadata as the schema outputs it (defaults applied); throws `METADATA_INVALID` naming the field. */
  validate(kind: string, artifact: string, metadata: JsonObject): JsonObject {
    const schema = this.#schemas.get(kind)
    if (!schema) return metadata
    const parsed = schema.safeParse(metadata)
    if (parsed.success) return parsed.data as JsonObject
    const issue = parsed.error.issues[0]!
    const field = issue.path.length ? issue.path.join('.') : '(root)'
    throw new FinestoreError(
      'METADATA_INVALID',
      `metadata of ${artifact} (kind "${kind}"): field "${field}": ` +
        `${issue.message}; fix the metadata passed to the transaction`,
    )
  }
}
