/**
 * @module The one pino root logger of marin-ts and its per-package children.
 *
 * Lines go to stderr (stdout stays free for the machine-readable output of CLIs): JSON
 * lines by default, pretty text when stderr is a terminal. Every line passes through
 * redaction twice: by key while the object is serialized, and by value (registered
 * secrets) once the line is finished, so a secret in a message or a stack is caught too.
 */
import { createRequire } from 'node:module'
import { pino } from 'pino'
import type { DestinationStream, Logger as PinoLogger } from 'pino'
import type * as PinoPretty from 'pino-pretty'
import { RiggingError } from './errors.js'
import { redactSecrets, scrubSecretValues } from './redaction.js'

/** A pino logger: `log.info({ jobId }, 'started')`, errors under `err`. */
export type Logger = PinoLogger

export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const
export type LogLevel = (typeof LOG_LEVELS)[number]

/** Where log lines are written: anything with `write(line: string)`, e.g. a Writable. */
export type LogDestination = DestinationStream

export type LoggingOptions = {
  /** Where lines go. @default stderr (fd 2), written synchronously so nothing is lost on exit */
  destination?: LogDestination
  /** Lowest level written. @default process.env.LOG_LEVEL ?? 'info' */
  level?: LogLevel
  /**
   * Human-readable lines instead of JSON.
   * @default LOG_FORMAT=pretty|json if set, else whether stderr is a terminal (only for the default destination)
   */
  pretty?: boolean
}

/** Reads a level from `LOG_LEVEL`-style text; an unknown name is a CONFIG_INVALID error. */
export function parseLogLevel(text: string, source = 'LOG_LEVEL'): LogLevel {
  const level = text.trim().toLowerCase()
  if ((LOG_LEVELS as readonly string[]).includes(level)) return level as LogLevel
  throw new RiggingError(
    'CONFIG_INVALID',
    `${source}=${JSON.stringify(text)} is not a log level; set it to one of ${LOG_LEVELS.join(', ')}`,
  )
}

function envLevel(): LogLevel {
  const raw = process.env.LOG_LEVEL
  return raw === undefined || raw.trim() === '' ? 'info' : parseLogLevel(raw)
}

function envPretty(usingDefaultDestination: boolean): boolean {
  const format = process.env.LOG_FORMAT?.trim().toLowerCase()
  if (format === 'pretty') return true
  if (format === 'json') return false
  if (format !== undefined && format !== '') {
    throw new RiggingError(
      'CONFIG_INVALID',
      `LOG_FORMAT=${JSON.stringify(format)} is not a log format; set it to pretty or json`,
    )
  }
  return usingDefaultDestination && process.stderr.isTTY === true
}

type Output = { destination: LogDestination; prettify: ((line: string) => string) | undefined }

let output: Output | undefined
let root: PinoLogger | undefined
const children = new Map<string, PinoLogger>()
// pino children keep the level they were born with; every descendant is tracked (weakly,
// so per-job children are still collected) so that setLogLevel reaches all of them.
const descendants = new Set<WeakRef<PinoLogger>>()
const forget = new FinalizationRegistry<WeakRef<PinoLogger>>((ref) => descendants.delete(ref))
function track(child: PinoLogger): void {
  const ref = new WeakRef(child)
  descendants.add(ref)
  forget.register(child, ref)
}

// The root logger writes into this fixed stream, which forwards to the configured output:
// reconfiguring (tests inject a sink) then reaches loggers that modules created at import time.
const forward: DestinationStream = {
  write(line: string) {
    const out = output ?? configureOutput({})
    const clean = scrubSecretValues(line)
    out.destination.write(out.prettify ? out.prettify(clean) : clean)
  },
}

function configureOutput(opts: LoggingOptions): Output {
  const destination = opts.destination ?? pino.destination({ fd: 2, sync: true })
  const pretty = opts.pretty ?? envPretty(opts.destination === undefined)
  const colorize = pretty && opts.destination === undefined && process.stderr.isTTY === true
  output = {
    destination,
    prettify: pretty
      ? // pino-pretty (some 30 modules) is required only when lines are pretty-printed
        (createRequire(import.meta.url)('pino-pretty') as typeof PinoPretty).prettyFactory({
          colorize,
          translateTime: 'SYS:HH:MM:ss.l',
          ignore: 'pid,hostname,pkg',
          messageFormat: '{if pkg}[{pkg}] {end}{msg}',
        })
      : undefined,
  }
  return output
}

function createRoot(level: LogLevel): PinoLogger {
  const created = pino(
    {
      level,
      formatters: {
        log: (obj) => redactSecrets(obj),
        bindings: (bindings) => redactSecrets(bindings),
      },
      serializers: { err: (err: unknown) => redactSecrets(pino.stdSerializers.err(err as Error)) },
      onChild: track,
    },
    forward,
  )
  // pino applies `formatters.bindings` to the root only; children of every depth inherit
  // this `child`, so their bindings are redacted as well.
  const child = created.child
  created.child = function (this: PinoLogger, bindings, options) {
    return child.call(this, redactSecrets(bindings), options)
  } as typeof created.child
  return created
}

/** The root logger; created on first use with `LOG_LEVEL` and the default output. */
export function rootLogger(): Logger {
  if (root === undefined) {
    // Read LOG_FORMAT now, so a bad value fails at startup rather than on the first line.
    if (output === undefined) configureOutput({})
    root = createRoot(envLevel())
  }
  return root
}

/**
 * The child logger of one package, bound to `{ pkg }`. Calls with the same name return the same logger.
 * @example
 * const log = logger('iris')
 * log.info({ jobId, attempt }, 'retrying job')
 * log.error({ err }, 'job failed')
 */
export function logger(pkg: string): Logger {
  let child = children.get(pkg)
  if (child === undefined) {
    child = rootLogger().child({ pkg })
    children.set(pkg, child)
  }
  return child
}

/** Sets the level of the root and of every logger below it, including children made earlier. */
export function setLogLevel(level: LogLevel): void {
  const parsed = parseLogLevel(level, 'log level')
  rootLogger().level = parsed
  for (const ref of descendants) {
    const child = ref.deref()
    if (child === undefined) descendants.delete(ref)
    else child.level = parsed
  }
}

/**
 * Replaces the output (destination, format) and optionally the level of every logger,
 * including those created before the call. Omitted options fall back to their defaults.
 * @example
 * // in a test: collect JSON lines
 * const lines: string[] = []
 * configureLogging({ destination: { write: (l) => lines.push(l) }, pretty: false, level: 'debug' })
 */
export function configureLogging(opts: LoggingOptions = {}): void {
  configureOutput(opts)
  setLogLevel(opts.level ?? envLevel())
}
