/**
 * @module The zephyr context datakit runs its pipelines on when the caller passes none:
 * zephyr's default, worker processes of fray's current client. It is made once per
 * process and kept, so consecutive steps (ingest, dedup, tokenize) reuse the same
 * workers instead of starting new ones; idle workers never keep Node alive.
 */
import { ZephyrContext } from '@marin/zephyr'

let shared: ZephyrContext | undefined

/** The shared worker context (created on first use). */
export function defaultContext(): ZephyrContext {
  return (shared ??= new ZephyrContext({ progress: 'off' }))
}
