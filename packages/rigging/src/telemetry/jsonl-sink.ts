/**
 * @module A JSONL metrics sink: every interval, one line `{"time", "metrics": [...]}` with a
 * registry snapshot is appended to a file. Lines are appended whole with one write, so a
 * reader (or a crash) sees complete lines only, except at worst a torn last line.
 */
import { appendFileSync, mkdirSync } from 'node:fs'
import { dirname } from 'node:path'
import { RiggingError } from '../errors.js'
import { logger } from '../logger.js'
import type { MetricsRegistry } from './registry.js'

export type JsonlSinkOptions = {
  /** The file lines are appended to; its directory is created. */
  path: string
  /** Milliseconds between flushes; 0 flushes only when asked. @default 10000 */
  intervalMs?: number
  /** Write a last line when the process exits. @default true */
  flushOnExit?: boolean
}

/**
 * Appends registry snapshots to a JSONL file, periodically and on demand.
 * @example
 * const sink = new JsonlSink(metrics(), { path: 'run/metrics.jsonl', intervalMs: 5000 })
 * // ...
 * sink.close() // writes a final line
 */
export class JsonlSink {
  readonly path: string
  private timer: NodeJS.Timeout | undefined
  private readonly onExit: (() => void) | undefined
  private closed = false

  constructor(
    private readonly registry: MetricsRegistry,
    opts: JsonlSinkOptions,
  ) {
    this.path = opts.path
    try {
      mkdirSync(dirname(this.path), { recursive: true })
    } catch (err) {
      throw io(this.path, err)
    }
    const interval = opts.intervalMs ?? 10_000
    if (interval > 0) {
      // A failed periodic write must not crash the program it measures: log it and go on.
      this.timer = setInterval(() => {
        try {
          this.flush()
        } catch (err) {
          logger('rigging').warn({ err, path: this.path }, 'metrics flush failed')
        }
      }, interval)
      this.timer.unref() // metrics never keep a process alive
    }
    if (opts.flushOnExit ?? true) {
      this.onExit = () => this.close()
      process.once('exit', this.onExit)
    }
  }

  /** Appends one snapshot line now. A failed write is TELEMETRY_IO. */
  flush(): void {
    if (this.closed)
      throw new RiggingError(
        'TELEMETRY_IO',
        `metrics sink ${this.path} is closed; create a new JsonlSink to write again`,
      )
    try {
      appendFileSync(this.path, `${JSON.stringify(this.registry.snapshot())}\n`)
    } catch (err) {
      throw io(this.path, err)
    }
  }

  /** Stops the timer and writes a final line. Closing twice does nothing. */
  close(): void {
    if (this.closed) return
    if (this.timer !== undefined) clearInterval(this.timer)
    if (this.onExit !== undefined) process.removeListener('exit', this.onExit)
    try {
      this.flush()
    } finally {
      this.closed = true
    }
  }
}

function io(path: string, err: unknown): RiggingError {
  const code = (err as NodeJS.ErrnoException).code ?? 'error'
  return new RiggingError('TELEMETRY_IO', `cannot write metrics to ${path} (${code}); choose a writable path`, {
    cause: err,
  })
}
