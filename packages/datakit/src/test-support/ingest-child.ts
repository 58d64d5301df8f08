/**
 * @module An ingest in a process of its own, for `store-faults.test.ts` to kill mid-commit: argv is a JSON
 * `{ name, source, prefix }` (a JSONL source, a prefix that may be `s3://`, reached through the S3 SDK's
 * environment). Prints `{"step":"done", …}` with the result, or `{"step":"error","message"}`, and exits.
 */
import { ingest } from '../dataset/ingest.js'

const { name, source, prefix } = JSON.parse(process.argv[2] ?? '{}') as { name: string; source: string; prefix: string }
try {
  const r = await ingest({ name, source, format: 'jsonl', prefix })
  process.stdout.write(`${JSON.stringify({ step: 'done', version: r.version, records: r.records })}\n`)
} catch (e) {
  process.stdout.write(`${JSON.stringify({ step: 'error', message: (e as Error)?.stack ?? String(e) })}\n`)
}
process.exit(0)
