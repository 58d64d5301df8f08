// Module hooks (node:module register) that append every URL an ESM import resolves to, one a line,
// to the file `register` passes as `data.record`: what a process loaded, for test-support/loaded-modules.ts.
// (The file comes through `initialize`: the hooks run on their own thread, which does not see later env changes.)
import { appendFileSync } from 'node:fs'

let record

export function initialize(data) {
  record = data.record
}

export async function resolve(specifier, context, next) {
  const r = await next(specifier, context)
  appendFileSync(record, `${r.url}\n`)
  return r
}
