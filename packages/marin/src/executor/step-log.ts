/** @module The logger a step function gets: JSON lines into the step's `logs/` folder and to stderr, secrets redacted.
 * */
import { createWriteStream, mkdirSync, type WriteStream } from 'node:fs'
import { dirname } from 'node:path'
import { pino } from 'pino'
import { redactSecrets, scrubSecretValues, type Logger, type Storage } from '@marin/rigging'

export type StepLog = { readonly log: Logger; close(): Promise<void> }

/**
 * A logger bound to `{ pkg: 'marin', step }` writing to `<logs>/<file>`. On a
 * local prefix lines are appended as they come; elsewhere they are kept and
 * written to storage by `close()`.
 */
export function openStepLog(storage: Storage, path: string, bindings: Record<string, unknown>): StepLog {
  const local = storage.localPath(path)
  let file: WriteStream | undefined
  const buffered: string[] = []
  if (local) {
    // Owner-only, as the executor's other files (see prefix-storage.ts).
    mkdirSync(dirname(local), { recursive: true, mode: 0o700 })
    file = createWriteStream(local, { flags: 'a', mode: 0o600 })
  }
  // The file keeps info and above whatever LOG_LEVEL says; stderr follows LOG_LEVEL.
  const envLevel = process.env.LOG_LEVEL ?? 'info'
  const stderrMin = pino.levels.values[envLevel] ?? 30
  const log = pino(
    {
      level: stderrMin < 30 ? envLevel : 'info',
      base: redactSecrets({ pkg: 'marin', ...bindings }) as Record<string, unknown>,
      formatters: { log: (obj) => redactSecrets(obj) as Record<string, unknown> },
      serializers: { err: (err: unknown) => redactSecrets(pino.stdSerializers.err(err as Error)) },
    },
    {
      write(line: string) {
        const clean = scrubSecretValues(line)
        if (file) file.write(clean)
        else buffered.push(clean)
        const level = Number(/"level":(\d+)/.exec(clean)?.[1] ?? 30)
        if (level >= stderrMin) process.stderr.write(clean)
      },
    },
  ) as unknown as Logger
  return {
    log,
    async close() {
      if (file) {
        const f = file
        await new Promise<void>((resolve) => f.end(() => resolve()))
      } else if (buffered.length) {
        await storage.write(path, buffered.join(''))
      }
    },
  }
}
