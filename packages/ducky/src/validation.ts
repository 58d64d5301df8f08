/** @module Schema checks at the edges of a call, with errors that name the failing field. */
import type { z } from 'zod'
import { RpcError } from './errors.js'

/** `a.b[2].c` for a zod issue path; `(root)` for the message itself. */
export function fieldPath(path: readonly PropertyKey[]): string {
  let out = ''
  for (const p of path) {
    if (typeof p === 'number') out += `[${p}]`
    else if (typeof p === 'string' && /^[A-Za-z_$][\w$]*$/.test(p)) out += out === '' ? p : `.${p}`
    else out += `[${JSON.stringify(String(p))}]`
  }
  return out === '' ? '(root)' : out
}

/** One line per issue (at most 5): `field "a.b": message`. */
export function describeIssues(error: z.ZodError): string {
  const lines = error.issues.slice(0, 5).map((i) => `field "${fieldPath(i.path)}": ${i.message}`)
  if (error.issues.length > 5) lines.push(`and ${error.issues.length - 5} more`)
  return lines.join('; ')
}

/** Parses a request; a mismatch is INVALID_ARGUMENT naming the field, sent back to the caller. */
export function parseRequest<T extends z.ZodType>(schema: T, value: unknown, method: string): z.output<T> {
  const r = schema.safeParse(value)
  if (r.success) return r.data
  throw new RpcError(
    'INVALID_ARGUMENT',
    `invalid request: ${describeIssues(r.error)}; fix the request to match the ${method} schema`,
    { method },
  )
}

/** Checks a handler's response; a mismatch is a server bug: INTERNAL, which the server logs. */
export function parseResponse<T extends z.ZodType>(schema: T, value: unknown, method: string): z.output<T> {
  const r = schema.safeParse(value)
  if (r.success) return r.data
  throw new RpcError(
    'INTERNAL',
    `the handler returned an invalid response: ` +
      `${describeIssues(r.error)}; the server's implementation of ` +
      `${method} must match its schema`,
    { method },
  )
}
