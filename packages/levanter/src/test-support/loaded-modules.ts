/**
 * @module Child process for config.test.ts: imports the module named by argv[2] and prints, as one
 * JSON line, every module the process loaded for it: ESM URLs (recorded by the resolve hook below,
 * registered before the import) and CommonJS paths (`require.cache`), so a test can
 * tell whether a module pulls in tfjs without loading it itself.
 */
import { readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire, register } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

const record = join(tmpdir(), `levanter-resolve-${process.pid}.txt`)
writeFileSync(record, '')
// The hooks run on their own thread, which does not see later env changes: the file comes through `initialize`.
const hooks = `
import { appendFileSync } from 'node:fs'
let record
export function initialize(data) { record = data.record }
export async function resolve(specifier, context, next) {
  const r = await next(specifier, context)
  appendFileSync(record, r.url + '\\n')
  return r
}`
register(`data:text/javascript,${encodeURIComponent(hooks)}`, { data: { record } })
await import(process.argv[2]!)
const esm = readFileSync(record, 'utf8').split('\n').filter(Boolean)
rmSync(record, { force: true })
const cjs = Object.keys(createRequire(import.meta.url).cache)
process.stdout.write(`${JSON.stringify({ modules: [...new Set([...esm, ...cjs])] })}\n`)
