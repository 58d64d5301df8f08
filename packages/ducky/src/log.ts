/** @module The logger ducky writes to: `logger('ducky')` from rigging unless a caller injects one. */
import { logger } from '@marin/rigging'

/** The part of a pino logger ducky uses: object first, errors under `err`. */
export type DuckyLogger = {
  debug(obj: object, msg?: string): void
  info(obj: object, msg?: string): void
  warn(obj: object, msg?: string): void
  error(obj: object, msg?: string): void
}

/** The package logger, created on first use so importing ducky configures nothing. */
export function defaultLogger(): DuckyLogger {
  return logger('ducky')
}
